"""The exported-log path checked end to end (issue 50, item 5): a study's collectives exported
as nccl-tests logs, read back as a cluster's log, and its multi-node cells predicted from the
one-process cell. Known answers from a ring law and a one-bucket timeline; status rows for
what cannot be predicted; the 16-core evidence beside its native held-out median."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from conftest import REPO
from dpscale.analysis.answers import exported_log_check as elc
from dpscale.analysis.answers import exported_log_summary as els
from dpscale.plan import ring

EVIDENCE = REPO / "evidence/2026-11-26-nvidia-h100/cpu16_torch_ddp_nodes_two_links/tables"
STRATEGY, MODEL, NET = "strat", "resnet18-imagenet64-c10", "slow"
ALPHA, BETA = 1e-4, 1e8  # s per hop, bytes/s: the law the collectives followed
GRADIENT = 4_000_000  # bytes, one bucket
SIZES = (4, 4096, 262_144, GRADIENT, 16_000_000)
COMPUTE = 0.2  # s: the one-process step at batch 16
BATCH = 16


def law(size: float, ranks: int) -> float:
    return ring.ring_allreduce_seconds(size, ranks, BETA, ALPHA)


def collectives(ranks=(2,), network: str = NET) -> pd.DataFrame:
    """collectives.csv rows of layouts that followed the ring law, one node per rank."""
    return pd.DataFrame(
        {
            "strategy": STRATEGY,
            "network": network,
            "comm": "none",
            "nodes": n,
            "devices_per_node": 1,
            "world_size": n,
            "source": "measured",
            "cell_id": f"{STRATEGY}/{MODEL}/collectives-net-{network}/n{n}-d1-b0-r0",
            "message_bytes": size,
            "time_s": law(size, n),
            "link_GB_s": 0.125,
        }
        for n in ranks
        for size in SIZES
    )


def buckets() -> pd.DataFrame:
    """One one-process timeline: a single bucket of all the gradient, ready as the backward
    pass ends, so the step is the compute plus the bucket's whole all-reduce."""
    return pd.DataFrame(
        [
            {
                "cell_id": f"{STRATEGY}/{MODEL}/synthetic/n1-d1-b{BATCH}-r0",
                "strategy": STRATEGY,
                "model": MODEL,
                "nodes": 1,
                "network": "intra",
                "devices_per_node": 1,
                "world_size": 1,
                "batch_per_device": BATCH,
                "comm": "none",
                "forward_s": 0.06,
                "backward_s": 0.12,
                "optimizer_s": 0.02,
                "bucket": 0,
                "bucket_bytes": GRADIENT,
                "ready_s": 0.12,
            }
        ]
    )


def cell(nodes: int, step_s: float, network: str = NET, **changes) -> dict:
    world = nodes
    return {
        "cell_id": f"{STRATEGY}/{MODEL}/synthetic/n{nodes}-d1-b{BATCH}-r0",
        "strategy": STRATEGY,
        "model": MODEL,
        "mode": "synthetic",
        "nodes": nodes,
        "network": network,
        "comm": "none",
        "devices_per_node": 1,
        "world_size": world,
        "batch_per_device": BATCH,
        "status": "ok",
        "reason": None,
        "quality": "ok",
        "step_time_s_mean": step_s,
        "img_s_mean": world * BATCH / step_s,
        "img_s_ci95": 0.0,
        "trainable_params": GRADIENT // 4,
        **changes,
    }


def cells(*multi: dict) -> pd.DataFrame:
    return pd.DataFrame([cell(1, COMPUTE, network="intra"), *multi])


def check(table_cells: pd.DataFrame, table_collectives: pd.DataFrame) -> pd.DataFrame:
    return elc.check_cells(table_cells, table_collectives, buckets(), "test", [NET])


def test_two_nodes_are_the_compute_plus_the_logged_all_reduce():
    table = check(cells(cell(2, 0.25)), collectives())
    assert len(table) == 1
    row = table.iloc[0]
    expected = COMPUTE + law(GRADIENT, 2)  # 0.2 + 0.0402 s
    assert row["status"] == elc.OK and row["scheme"] == elc.SAME_RANKS
    assert row["predicted_step_s"] == pytest.approx(expected, rel=1e-6)
    assert row["relative_error"] == pytest.approx(expected / 0.25 - 1, rel=1e-5)
    assert row["predicted_img_s"] == pytest.approx(2 * BATCH / expected, rel=1e-6)
    assert row["one_process_step_s"] == pytest.approx(COMPUTE)
    assert row["collective_basis"].startswith("measured at 2 ranks")
    assert row["log"] == "strat_slow_none_n2-d1.log" and row["log_ranks"] == 2
    assert row["kind"] == "extrapolated from one process"
    assert "ranks shared its cores" in row["note"]


def test_more_ranks_from_the_fewest_log_follow_the_ring_law_and_a_missing_layout_says_so():
    table = check(cells(cell(4, 0.3)), collectives(ranks=(2,)))
    same = table[table["scheme"] == elc.SAME_RANKS].iloc[0]
    assert same["status"] == elc.NOT_PREDICTED
    assert "no collectives cell" in same["reason"] and "no log to export" in same["reason"]
    assert math.isnan(same["predicted_step_s"])
    fewest = table[table["scheme"] == elc.FEWEST_LOG].iloc[0]
    assert fewest["status"] == elc.OK
    assert fewest["collective_basis"].startswith("ring law at 4 ranks (log measured 2)")
    # the ring law fitted to the 2-rank log gives the 4-rank all-reduce back
    assert fewest["predicted_step_s"] == pytest.approx(COMPUTE + law(GRADIENT, 4), rel=1e-3)


def test_with_both_logs_each_scheme_has_its_row():
    table = check(cells(cell(4, 0.3)), collectives(ranks=(2, 4)))
    assert sorted(table["scheme"]) == sorted([elc.SAME_RANKS, elc.FEWEST_LOG])
    assert (table["status"] == elc.OK).all()
    same = table[table["scheme"] == elc.SAME_RANKS].iloc[0]
    assert same["predicted_step_s"] == pytest.approx(COMPUTE + law(GRADIENT, 4), rel=1e-6)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"status": "failed", "reason": "timeout"}, "failed (timeout)"),
        ({"quality": "contaminated", "quality_reason": "CPU-bound"}, "native model leaves it"),
        ({"comm": "fp16"}, "a remedy (fp16)"),
    ],
)
def test_a_cell_that_cannot_be_compared_gets_a_status_row(changes, words):
    table = check(cells(cell(2, 0.25, **changes)), collectives())
    row = table.iloc[0]
    assert row["status"] == elc.NOT_PREDICTED and words in row["reason"]


def test_no_one_process_cell_at_the_batch_is_a_status_row():
    one = cells(cell(2, 0.25))
    one.loc[one["nodes"] == 1, "batch_per_device"] = 32
    row = check(one, collectives()).iloc[0]
    assert row["status"] == elc.NOT_PREDICTED and "no one-process cell" in row["reason"]


def test_a_one_process_step_the_engine_refuses_is_a_status_row():
    # no img/s on the one-process cell: no compute to extrapolate, one line saying why
    one = cells(cell(2, 0.25))
    one.loc[one["nodes"] == 1, "img_s_mean"] = math.nan
    row = check(one, collectives()).iloc[0]
    assert row["status"] == elc.NOT_PREDICTED and row["reason"].startswith("compute.step_s: ")
    assert "\n" not in row["reason"]


@pytest.mark.parametrize(
    ("table_cells", "table_collectives", "words"),
    [
        (cells(), collectives(), "no multi-node synthetic cell"),
        (cells(cell(2, 0.25)), pd.DataFrame(), "no collectives cell of two or more ranks"),
        (cells(cell(2, 0.25)), collectives().iloc[0:0], "no collectives cell of two or more"),
    ],
)
def test_nothing_to_check_is_one_row_saying_why(table_cells, table_collectives, words):
    table = check(table_cells, table_collectives)
    assert list(table.columns) == elc.CELL_COLUMNS
    assert len(table) == 1 and table["status"].iloc[0] == elc.NOT_CHECKED
    assert words in table["reason"].iloc[0]
    summary = els.summarise(table, pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    assert len(summary) == 1 and summary["status"].iloc[0] == elc.NOT_CHECKED
    assert words in summary["note"].iloc[0]
    assert els.headline(summary).startswith(elc.NOT_CHECKED)


def native_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A native validation (chosen form buckets) with known medians, and its parameters."""
    validation = pd.DataFrame(
        {
            "scheme": elc.NATIVE_SCHEME[elc.SAME_RANKS],
            "overlap": "buckets",
            "chosen": True,
            "strategy": STRATEGY,
            "model": MODEL,
            "network": [NET, NET, "fast"],
            "relative_error": [0.02, -0.06, 0.5],
            "status": "ok",
        }
    )
    summary = pd.DataFrame(
        {
            "scheme": elc.NATIVE_SCHEME[elc.SAME_RANKS],
            "overlap": ["buckets", "max"],
            "chosen": [True, False],
            "strategy": STRATEGY,
            "model": MODEL,
            "predicted_cells": 3,
            "median_abs_relative_error": [0.06, 0.9],
        }
    )
    parameters = pd.DataFrame(
        {
            "strategy": STRATEGY,
            "model": MODEL,
            "chosen": True,
            "parameter": ["sigma", "kappa"],
            "value": [0.12, 0.1],
        }
    )
    return validation, summary, parameters


def test_the_summary_sets_each_network_beside_the_native_median():
    table = check(cells(cell(2, 0.25), cell(2, 0.5, status="failed")), collectives())
    summary = els.summarise(table, *native_tables())
    assert list(summary.columns) == els.SUMMARY_COLUMNS
    assert list(summary["network"]) == [NET, els.ALL_NETWORKS]
    per_network, overall = summary.iloc[0], summary.iloc[1]
    error = abs((COMPUTE + law(GRADIENT, 2)) / 0.25 - 1)
    assert per_network["median_abs_relative_error"] == pytest.approx(error, rel=1e-5)
    assert per_network["predicted_cells"] == 1 and per_network["within_10pct"] == 1
    assert per_network["native_median_abs_relative_error"] == pytest.approx(0.04)
    assert per_network["native_form"] == "buckets"
    assert overall["native_median_abs_relative_error"] == pytest.approx(0.06)
    assert overall["native_scheme"] == "leave one network out"
    assert "sigma = 0.12" in overall["note"] and "kappa = 0.1" in overall["note"]


def test_the_sixteen_core_evidence_through_its_exported_logs():
    """The dev data: 2, 4 and 8 emulated nodes over 10 and 1 Gbit/s on a 16-core CPU."""
    read = {name: pd.read_csv(EVIDENCE / f"{name}.csv") for name in (
        "cells", "collectives", "bucket_timeline", "model_validation",
        "model_validation_summary", "comm_model",
    )}  # fmt: skip
    table = elc.check_cells(
        read["cells"], read["collectives"], read["bucket_timeline"], "cpu16", None
    )
    assert (table["status"] == elc.OK).all()
    same = table[table["scheme"] == elc.SAME_RANKS]
    assert len(same) == 12 and same["collective_basis"].str.startswith("measured").all()
    assert len(table[table["scheme"] == elc.FEWEST_LOG]) == 8
    # two nodes share few cores: the exported-log path is within 5% there
    two = same[same["nodes"] == 2]
    assert (two["relative_error"].abs() < 0.05).all()
    summary = els.summarise(
        table, read["model_validation"], read["model_validation_summary"], read["comm_model"]
    )
    overall = summary[
        (summary["network"] == els.ALL_NETWORKS) & (summary["scheme"] == elc.SAME_RANKS)
    ].iloc[0]
    assert overall["native_median_abs_relative_error"] == pytest.approx(0.053495, rel=1e-4)
    assert overall["predicted_cells"] == 12
