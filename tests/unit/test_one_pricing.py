"""One pricing rule across node counts (docs/decisions/one-pricing-across-scales.md): a
cluster's log prices every rank count from its own times, carried by the ring law fitted to
it, so for a fixed per-device batch more nodes never predict a shorter step. Checked on the
GH200 logs shipped in tests/data with the H100 ResNet-50 tables, and on generated logs."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cluster_link import SIZES, nccl_log

from conftest import REPO
from dpscale import cli
from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.laws.cluster_link import MEASURED, CollectiveCurve, rank_ratio
from dpscale.analysis.laws.engine import predict_step
from dpscale.analysis.laws.pricing import CurvePricing
from dpscale.analysis.results.import_logs import parse_all_reduce, read_lines
from dpscale.plan import ring
from dpscale.plan.layout import Layout
from helpers.timelines import FOUR

DATA = REPO / "tests" / "data" / "imports"
LOGS = ("nccl_all_reduce_gh200_2x4_nocxi.log", "nccl_all_reduce_gh200_2x4_slingshot.log")
EVIDENCE = REPO / "evidence" / "2026-11-26-nvidia-h100" / "gpu_resnet50_bucket_timeline"
NODES = [1, 2, 4, 8, 16]  # 4 devices each: 4 to 64 ranks, the logs' 8 among them
FUZZ = settings(
    deadline=10_000,  # ms: a hang, not a timing
    database=None,  # nothing written under the checkout (.hypothesis/)
    max_examples=40,
    suppress_health_check=[HealthCheck.too_slow],
)


def shipped_curve(name: str) -> CollectiveCurve:
    return CollectiveCurve.from_log(parse_all_reduce(read_lines(DATA / name), 8), 8)


@pytest.mark.parametrize("name", LOGS)
def test_a_message_never_costs_less_on_more_ranks(name):
    """Every size the log spans and beyond, 2 to 64 ranks: the price never falls as ranks
    grow, through the log's own count (where the noisy no-CXI log once priced 16 ranks
    below its own measured 8)."""
    curve = shipped_curve(name)
    for size in [*curve.sizes, 25 << 20, 1 << 30]:
        prices = [curve.seconds(size, ranks).seconds for ranks in (2, 4, 8, 16, 32, 64)]
        assert all(np.diff(prices) >= 0), (size, prices)


@pytest.mark.parametrize("name", LOGS)
def test_the_law_and_the_log_agree_at_the_logs_rank_count(name):
    """Carried to another count and back, a logged time is the log's own: the scale is the
    fitted law's ratio between the counts, 1 at the log's."""
    curve = shipped_curve(name)
    fit = curve.fit
    for size, logged in zip(curve.sizes, curve.times_s, strict=True):
        assert curve.seconds(size, 8).seconds == logged
        assert rank_ratio(size, 8, 8, fit.alpha_s, fit.beta_bytes_s) == pytest.approx(1.0)
        at_16 = curve.seconds(size, 16)
        assert at_16.lo <= at_16.seconds <= at_16.hi
        assert at_16.seconds == pytest.approx(
            logged * rank_ratio(size, 8, 16, fit.alpha_s, fit.beta_bytes_s)
        )


@pytest.mark.parametrize("name", LOGS)
def test_more_nodes_never_predict_a_shorter_step_on_the_shipped_logs(tmp_path, name):
    """`dpscale predict` on the H100 ResNet-50 tables and a GH200 log: the step, and each end
    of its range, is non-decreasing in nodes at one per-device batch; 2 nodes are the log's
    own times."""
    tables = tmp_path / "results" / "tables"
    tables.mkdir(parents=True)
    for table in ("bucket_timeline.csv", "cells.csv"):
        shutil.copy(EVIDENCE / "tables" / table, tables / table)
    shutil.copy(DATA / name, tmp_path / name)
    entry = {
        "name": "gh200",
        "inter_node": {"nccl_tests_log": name, "ranks": 8},
        "devices_per_node": 4,
        "nodes": NODES,
        "model": "resnet50-imagenet224-c1000",
        "batch_per_device": 256,
    }
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(entry), encoding="utf-8")
    out = tmp_path / "predicted.csv"
    cli.main(
        ["predict", "--results", str(tables.parent), "--cluster", str(tmp_path / "cluster.yaml")]
        + ["--out", str(out)]
    )
    table = pd.read_csv(out)
    assert list(table["nodes"]) == NODES and (table["status"] == cp.OK).all()
    for column in ("step_time_s", "step_time_lo_s", "step_time_hi_s"):
        assert table[column].is_monotonic_increasing, table[column].tolist()
    assert table.loc[table["nodes"] == 2, "collective_basis"].item() == MEASURED


@st.composite
def noisy_ring_logs(draw) -> CollectiveCurve:
    """A log at 8 ranks following a ring law, each size's time off it by up to 2x either way
    (a protocol switch, a congested size), as published logs are."""
    alpha = draw(st.floats(1e-6, 1e-4))
    beta = draw(st.floats(1e8, 1e11))
    noise = draw(st.lists(st.floats(0.5, 2.0), min_size=len(SIZES), max_size=len(SIZES)))
    factor = dict(zip(SIZES, noise, strict=True))

    def law(size: float, ranks: int) -> float:
        return factor[size] * ring.ring_allreduce_seconds(size, ranks, beta, alpha)

    return CollectiveCurve.from_log(parse_all_reduce(nccl_log(law, 8), 8), 8)


@FUZZ
@given(noisy_ring_logs(), st.floats(1e5, 1e9))
def test_more_nodes_never_predict_a_shorter_step_on_any_log(curve, gradient_bytes):
    """Over generated logs and gradient sizes: the predicted step at a fixed per-device
    batch is non-decreasing in nodes wherever it has a number."""
    one = cp.profile(FOUR, cp.OneDevice(64, 0.1, 0.1, 0.1), gradient_bytes)
    steps = [
        predict_step(one, cp.RING, CurvePricing(curve), Layout(nodes, 4)).step_s for nodes in NODES
    ]
    numbered = [step for step in steps if np.isfinite(step)]
    assert all(np.diff(numbered) >= 0), steps
