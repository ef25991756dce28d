"""Drift probes: where they run in the study, and the trace computed from them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dpscale.analysis.laws.drift import (
    REPEATABILITY_GOAL,
    drift_factors,
    drift_summary,
    drift_table,
    repeatability_sentence,
    repeatability_with_drift,
    with_drift_columns,
)
from dpscale.analysis.laws.scaling import point_means, repeatability_table
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


def drifting_study(probes: tuple[float, ...] = (1.05, 1.0, 0.95)) -> pd.DataFrame:
    """Probes at 0, 5 and 10 min at ``probes`` times the reference's speed; three repeats of
    two configurations between them, each at its true speed times the drift (linear from
    +5% at 0 min to -5% at 10 min): a machine-wide, multiplicative drift."""
    base = cells_frame().iloc[0].to_dict()

    def row(mode: str, batch: int, repeat: int, minute: float, img_s: float) -> dict:
        stamp = pd.Timestamp("2026-11-24T12:00:00+00:00") + pd.Timedelta(minutes=minute)
        cell_id = f"{mode}/b{batch}-r{repeat}"
        return {
            **base,
            "mode": mode,
            "batch_per_device": batch,
            "repeat": repeat,
            "cell_id": cell_id,
            "started_at": stamp.isoformat(),
            "img_s_mean": img_s,
        }

    rows = [row("drift", 16, k, 5.0 * k, 100.0 * f) for k, f in enumerate(probes)]
    for batch, speed, minutes in ((16, 200.0, (1, 4, 9)), (32, 50.0, (2, 6, 8))):
        rows += [
            row("synthetic", batch, k, m, speed * (1.05 - 0.01 * m)) for k, m in enumerate(minutes)
        ]
    return pd.DataFrame(rows)


def test_each_cell_reads_the_trace_at_the_time_it_ran():
    cells = drifting_study()
    factors = drift_factors(cells)
    by_id = dict(zip(cells["cell_id"], factors, strict=True))
    assert by_id["drift/b16-r0"] == pytest.approx(1.05)  # a probe reads itself
    assert by_id["synthetic/b16-r0"] == pytest.approx(1.04)  # 1 min: between the first two
    assert by_id["synthetic/b32-r2"] == pytest.approx(0.97)  # 8 min: between the last two
    late = cells.assign(started_at=cells["started_at"].str.replace("T12:08", "T12:15"))
    assert drift_factors(late).iloc[-1] == pytest.approx(0.95)  # after the last probe: its own


def test_cells_csv_carries_each_cells_factor_and_corrected_img_s():
    cells = with_drift_columns(drifting_study())
    one = cells[cells["cell_id"] == "synthetic/b16-r0"].iloc[0]
    assert one["drift_factor"] == pytest.approx(1.04)
    assert one["img_s_drift_corrected"] == pytest.approx(200.0)  # its true speed
    assert one["img_s_mean"] == pytest.approx(200.0 * 1.04)  # the measured value stays


def test_half_the_launcher_wall_time_places_a_cell_at_its_middle():
    cells = drifting_study().assign(launcher_wall_s=0.0)
    cells.loc[cells["cell_id"] == "synthetic/b16-r0", "launcher_wall_s"] = 120.0  # 1 -> 2 min
    factors = dict(zip(cells["cell_id"], drift_factors(cells), strict=True))
    assert factors["synthetic/b16-r0"] == pytest.approx(1.03)


def test_a_multiplicative_drift_is_taken_out_of_the_repeats_cv():
    table = repeatability_with_drift(drifting_study())
    assert list(table["batch_per_device"]) == [16, 32] and list(table["repeats"]) == [3, 3]
    assert (table["img_s_cv"] > REPEATABILITY_GOAL).all()  # the drift, measured as is
    assert table["img_s_cv_drift_corrected"].tolist() == pytest.approx([0.0, 0.0], abs=1e-12)
    sentence = repeatability_sentence(table)
    assert sentence == (
        "CV across repeats: 3.1-4.0% as measured, 0.0% relative to the drift trace "
        "(goal 3%: 0 of 2 configurations meet it as measured, 2 of 2 after the correction); "
        "the correction narrows 2 of 2: the machine's drift explains part of the spread"
    )


def test_a_drift_the_cells_do_not_share_is_said_not_to_explain_their_spread():
    """The probes swing while the repeats hold still: dividing by the trace adds its swing."""
    cells = drifting_study(probes=(1.0, 1.10, 0.92))
    steady = cells["mode"] == "synthetic"
    cells.loc[steady, "img_s_mean"] = cells.loc[steady, "batch_per_device"].map({16: 200, 32: 50})
    cells.loc[steady & (cells["repeat"] == 1), "img_s_mean"] *= 1.01
    table = repeatability_with_drift(cells)
    assert (table["img_s_cv_drift_corrected"] > table["img_s_cv"]).all()
    assert repeatability_sentence(table).endswith(
        "the correction narrows only 0 of 2: this machine's drift is not machine-wide and "
        "multiplicative at the probes' spacing, so the measured CV stands "
        "(docs/decisions/drift-correction.md)"
    )


def test_without_two_ok_probes_there_is_no_correction():
    cells = drifting_study()
    cells.loc[cells["cell_id"] == "drift/b16-r1", "status"] = "failed"
    cells.loc[cells["cell_id"] == "drift/b16-r1", "img_s_mean"] = math.nan
    cells.loc[cells["cell_id"] == "drift/b16-r2", "quality"] = "noisy"
    assert drift_factors(cells).isna().all()
    table = repeatability_with_drift(cells)
    assert table["img_s_cv_drift_corrected"].isna().all()
    assert table["img_s_cv"].notna().all()  # the measured CV stays
    assert repeatability_sentence(table).endswith(
        "(goal 3%: 0 of 2 configurations meet it); "
        "no drift correction (fewer than 2 ok drift probes)"
    )
    assert drift_factors(cells[cells["mode"] != "drift"]).isna().all()


def test_probes_that_are_not_ok_are_left_out_of_the_trace():
    cells = drifting_study()
    broken = pd.DataFrame(
        [
            {**cells.iloc[1].to_dict(), "cell_id": "drift/b16-r3", "status": "failed"},
            {**cells.iloc[1].to_dict(), "cell_id": "drift/b16-r4", "quality": "contaminated"},
        ]
    ).assign(img_s_mean=[math.nan, 10.0])  # a failed probe, and one that others slowed down
    with_broken = pd.concat([cells, broken], ignore_index=True)
    ratio = drift_factors(with_broken).iloc[: len(cells)] / drift_factors(cells)
    assert ratio.tolist() == pytest.approx([ratio.iloc[0]] * len(cells))  # the same trace
    corrected = repeatability_with_drift(with_broken)["img_s_cv_drift_corrected"]
    assert corrected.tolist() == pytest.approx([0.0, 0.0], abs=1e-12)


def test_no_repeats_no_sentence_of_their_cv():
    table = repeatability_with_drift(cells_frame())
    assert table.empty and "img_s_cv_drift_corrected" in table.columns
    assert repeatability_sentence(table).endswith("not measured (every configuration ran once)")


def test_a_repeat_without_a_time_leaves_its_configuration_uncorrected():
    cells = drifting_study()
    cells.loc[cells["cell_id"] == "synthetic/b32-r1", "started_at"] = None
    corrected = repeatability_with_drift(cells)["img_s_cv_drift_corrected"]
    assert corrected.iloc[0] == pytest.approx(0.0, abs=1e-12) and math.isnan(corrected.iloc[1])


def test_the_drift_figure_and_its_log_give_the_cv_with_and_without_the_correction(tmp_path):
    from dpscale.steps.tables import drift as step

    drifting_study().to_csv(tmp_path / "cells.csv", index=False)
    outputs = {"table": tmp_path / "drift.csv", "figure": tmp_path / "drift.png"}
    message = step({"cells": tmp_path / "cells.csv"}, outputs, {})
    assert "2 of 2 after the correction); the correction narrows 2 of 2" in message
    assert outputs["figure"].is_file() and len(pd.read_csv(outputs["table"])) == 3
