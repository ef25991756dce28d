"""A prediction that needs a fitted law whose alpha or beta the log left open says "not
resolved" and gives no number; a time the log measured needs no law and keeps its number.

Logs are written from a known ring law at sizes that leave one parameter open: 8 B to 512 B
(latency only: beta open) and 64 MiB to 1 GiB (bandwidth only: alpha open)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_cluster_link import nccl_log
from test_cluster_prediction import DEVICE, GRADIENT, cluster, cluster_file, results

from dpscale import cli
from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.answers import exported_log_check as elc
from dpscale.analysis.laws.cluster_link import MEASURED, CollectiveCurve
from dpscale.analysis.laws.commmodel.buckets import BucketTimeline
from dpscale.analysis.results.import_logs import parse_all_reduce
from dpscale.plan import ring
from helpers.timelines import FOUR

ALPHA, BETA = 5e-6, 2e9
LATENCY_ONLY = [8 * 2**k for k in range(7)]  # 8 B to 512 B
BANDWIDTH_ONLY = [2**k for k in range(26, 31)]  # 64 MiB to 1 GiB
# one bucket of all the gradient, ready when the backward pass ends
ONE = BucketTimeline(1 / 3, 0.002, 0.1 / 64, 0.0, np.array([1.0]), np.array([1.0]), (64,))
NUMBERS = [
    c
    for c in cp.COLUMNS
    if c.startswith(("step_time", "img_s", "speedup", "efficiency", "compression_for"))
]


def law(size: float, ranks: int) -> float:
    return ring.ring_allreduce_seconds(size, ranks, BETA, ALPHA)


def curve(sizes: list[int]) -> CollectiveCurve:
    return CollectiveCurve.from_log(parse_all_reduce(nccl_log(law, 8, sizes), 8), 8)


LATENCY = curve(LATENCY_ONLY)
BANDWIDTH = curve(BANDWIDTH_ONLY)


def test_the_logs_leave_the_parameter_they_say_open():
    assert LATENCY.fit.beta_unresolved and not LATENCY.fit.alpha_unresolved
    assert BANDWIDTH.fit.alpha_unresolved and not BANDWIDTH.fit.beta_unresolved


@pytest.mark.parametrize(
    ("log", "size", "ranks", "measured"),
    [
        (LATENCY, 64, 8, True),  # logged
        (LATENCY, 100, 8, True),  # between logged sizes
        (LATENCY, 4096, 8, False),  # beyond: needs beta
        (LATENCY, 64, 16, False),  # other ranks: the law
        (BANDWIDTH, 2**28, 8, True),
        (BANDWIDTH, 2**20, 8, False),  # below: needs alpha
        (BANDWIDTH, 2**32, 8, False),  # beyond: the law stands on both (decision record)
        (BANDWIDTH, 2**28, 32, False),
    ],
)
def test_a_measured_time_keeps_its_number_and_the_law_needs_both_parameters(
    log, size, ranks, measured
):
    time = log.seconds(size, ranks)
    if measured:
        assert time.resolved and time.basis == MEASURED and time.seconds > 0
        return
    assert not time.resolved and math.isnan(time.seconds) and math.isnan(time.hi)
    open_ = "beta" if log is LATENCY else "alpha"
    assert f"{open_} not resolved: " in time.unresolved
    assert "would resolve it: a log with sizes " in time.unresolved
    assert (f"or a log at {ranks} ranks" in time.unresolved) == (ranks != 8)


def test_a_latency_only_log_predicts_no_number_beyond_what_it_measured():
    table = cp.predict(FOUR, DEVICE, cluster(LATENCY), GRADIENT, "test")
    assert (table["status"] == "not resolved").all()
    assert table[NUMBERS].isna().all().all()
    reason = table["reason"].iloc[-1]
    assert reason.startswith("ring law at 64 ranks (log measured 8); beta not resolved: largest")
    assert "all_reduce_perf -e 1G" in reason
    assert table["compression_reason"].iloc[-1] == f"not resolved: {reason}"
    text = cp.sentence(table)
    assert text.startswith("On test, 64 devices at per-device batch 64: not resolved (ring law")
    assert "x the one-device" not in text and "% efficient" not in text


def test_rows_the_log_measured_keep_their_numbers_beside_rows_it_did_not():
    """A 256 B gradient at the log's 8 ranks is measured; at 16 ranks the law is needed."""
    table = cp.predict(ONE, DEVICE, cluster(LATENCY, (2, 4)), 256, "test")
    measured, extended = table.iloc[0], table.iloc[1]
    assert measured["status"] == "ok" and measured["reason"] == ""
    assert measured["collective_basis"] == MEASURED
    assert measured["step_time_s"] == pytest.approx(0.1 + law(256, 8), rel=0.01)
    assert extended["status"] == "not resolved" and math.isnan(extended["speedup"])
    assert "ring law at 16 ranks (log measured 8)" in extended["reason"]
    assert cp.sentence(table).startswith("On test, 16 devices at per-device batch 64: not ")


def test_a_compression_search_that_leaves_the_log_says_not_resolved():
    """256 MiB at 8 ranks is measured (64% efficient); compressing it below the log's
    smallest size needs alpha, which the bandwidth-only log left open."""
    row = cp.predict(ONE, DEVICE, cluster(BANDWIDTH, (2,)), 2**28, "test").iloc[0]
    assert row["status"] == "ok" and row["efficiency"] < 0.9
    assert math.isnan(row["compression_for_90pct"])
    assert row["compression_reason"].startswith("not resolved at wire ratio ")
    assert "alpha not resolved: smallest message 67,108,864 B" in row["compression_reason"]


def test_the_command_prints_not_resolved_instead_of_a_speedup(tmp_path, capsys):
    (tmp_path / "latency.log").write_text("\n".join(nccl_log(law, 8, LATENCY_ONLY)) + "\n")
    inter = {"nccl_tests_log": "latency.log", "ranks": 8}
    path = cluster_file(tmp_path, inter_node=inter)
    out = tmp_path / "predicted.csv"
    cli.main(["predict", "--results", str(results(tmp_path)), "--cluster", path, "--out", str(out)])
    printed = capsys.readouterr().out.splitlines()
    # the first line says it is not resolved, with no number; the rows say why
    assert printed[0].startswith("On gh200-slingshot, 32 devices at per-device batch 256: not")
    assert printed[2].startswith("    2 nodes      8 devices  not resolved: ring law beyond")
    assert "speedup" not in "".join(printed) and "efficient" not in printed[0]
    assert not any(line.startswith("The link-only figure") for line in printed)
    table = pd.read_csv(out)
    assert list(table["status"]) == ["not resolved"] * 2 and table["speedup"].isna().all()


def test_the_exported_log_check_says_not_predicted_where_the_law_is_open():
    """A 2-rank log of 4 B to 512 B predicting 4 ranks: beta open, so no number."""
    sizes = (4, 64, 512)
    collectives = pd.DataFrame(
        {
            "strategy": "strat",
            "network": "slow",
            "comm": "none",
            "nodes": 2,
            "devices_per_node": 1,
            "world_size": 2,
            "source": "measured",
            "cell_id": "strat/m/collectives-net-slow/n2-d1-b0-r0",
            "message_bytes": size,
            "time_s": ring.ring_allreduce_seconds(size, 2, 1e8, 1e-4),
            "link_GB_s": 0.125,
        }
        for size in sizes
    )
    from test_exported_log_check import buckets, cell, cells

    table = elc.check_cells(cells(cell(4, 0.3)), collectives, buckets(), "test", ["slow"])
    fewest = table[table["scheme"] == elc.FEWEST_LOG].iloc[0]
    assert fewest["status"] == elc.NOT_PREDICTED and math.isnan(fewest["predicted_step_s"])
    assert "beta not resolved: largest message 512 B" in fewest["reason"]
