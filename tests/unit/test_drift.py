"""Drift probes: where they run in the study, and the trace computed from them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dpscale.analysis.drift import drift_summary, drift_table
from dpscale.analysis.tables import point_means, repeatability_table
from dpscale.plan.cell import Cell
from dpscale.plan.config import check_config
from dpscale.plan.matrix import drift_reference, expand, run_priorities
from dpscale.registry import STRATEGIES


def study(default_config: dict, **changes) -> list[Cell]:
    default_config.update(modes=["synthetic"], **changes)
    default_config.update(check_config(default_config, STRATEGIES))  # defaults filled in
    return expand(default_config, STRATEGIES)


def run_order(cells: list[Cell]) -> list[Cell]:
    priority = run_priorities(cells)
    return sorted(cells, key=lambda cell: -priority[cell.cell_id])


def test_probes_are_the_reference_cell_again_under_their_own_ids(default_config):
    cells = study(default_config, drift={"probes": 3})
    probes = [c for c in cells if c.drift_probe]
    assert [c.cell_id for c in probes] == [
        f"torch-dp/resnet18-imagenet64-c10/drift/n1-d1-b16-r{k}" for k in range(3)
    ]
    reference = drift_reference(default_config, cells)
    assert reference.cell_id == "torch-dp/resnet18-imagenet64-c10/synthetic/n1-d1-b16-r0"
    assert Cell.from_json(probes[1].to_json()) == probes[1]
    assert probes[1].mode == "synthetic"  # measured like one


def test_probes_are_spread_from_the_first_measured_cell_to_the_last(default_config):
    cells = study(default_config, drift={"probes": 3})
    order = run_order(cells)
    measured = [c for c in order if not c.skip_reason]
    positions = [i for i, c in enumerate(measured) if c.drift_probe]
    assert positions[0] == 0 and positions[-1] == len(measured) - 1
    middle = positions[1] / (len(measured) - 1)
    assert 0.4 < middle < 0.6
    assert all(c.skip_reason for c in order[len(measured) :])  # skipped cells last


def test_repeats_run_a_round_at_a_time(default_config):
    default_config["measure"]["repeats"] = 3
    order = [c for c in run_order(study(default_config)) if not c.skip_reason]
    repeats = [c.repeat for c in order]
    assert repeats == sorted(repeats)  # every cell once, then again
    assert run_priorities(study(default_config)) == run_priorities(study(default_config))


def test_a_chosen_reference_cell(default_config):
    chosen = "mxnet-dist/resnet18-imagenet64-c10/synthetic/n1-d2-b32-r0"
    cells = study(default_config, drift={"probes": 2, "cell": chosen})
    assert {c.cell_id for c in cells if c.drift_probe} == {
        "mxnet-dist/resnet18-imagenet64-c10/drift/n1-d2-b32-r0",
        "mxnet-dist/resnet18-imagenet64-c10/drift/n1-d2-b32-r1",
    }


def cells_frame() -> pd.DataFrame:
    base = {
        "strategy": "torch-dp",
        "model": "m",
        "nodes": 1,
        "network": "host",
        "devices_per_node": 1,
        "world_size": 1,
        "batch_per_device": 16,
        "status": "ok",
        "quality": "ok",
        "img_s_ci95": 1.0,
    }
    rows = [  # a study cell at 12:00, probes at 12:00:30, 12:05 and 12:10 (the last noisy)
        {**base, "mode": "synthetic", "cell_id": "c", "repeat": 0, "img_s_mean": 50.0},
        {**base, "mode": "drift", "cell_id": "p0", "repeat": 0, "img_s_mean": 100.0},
        {**base, "mode": "drift", "cell_id": "p1", "repeat": 1, "img_s_mean": 90.0},
        {**base, "mode": "drift", "cell_id": "p2", "repeat": 2, "img_s_mean": 80.0},
    ]
    starts = ["12:00:00", "12:00:30", "12:05:00", "12:10:00"]
    frame = pd.DataFrame(rows)
    frame["started_at"] = [f"2026-11-24T{t}+00:00" for t in starts]
    frame.loc[3, "quality"] = "noisy"
    return frame


def test_the_trace_is_each_probe_against_the_probes_median():
    table = drift_table(cells_frame())
    assert list(table["probe"]) == [0, 1, 2]
    assert list(table["minutes"]) == [0.5, 5.0, 10.0]  # since the study's first cell
    assert table["relative"].tolist() == pytest.approx([100 / 90 - 1, 0.0, 80 / 90 - 1])
    assert table["relative_ci95"].tolist() == pytest.approx([1 / 90] * 3)
    summary = drift_summary(table)
    assert summary["probes_ok"] == 3 and summary["minutes"] == 9.5
    assert summary["range"] == pytest.approx(20 / 90)
    assert summary["cv"] == pytest.approx(10 / 90)


def test_probes_are_no_repeats_or_points_of_the_study():
    cells = cells_frame()
    assert repeatability_table(cells).empty
    assert list(point_means(cells)["img_s"]) == [50.0]


def test_no_probes_no_trace():
    table = drift_table(cells_frame().iloc[:1])
    assert table.empty
    assert math.isnan(drift_summary(table)["cv"])
