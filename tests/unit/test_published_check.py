"""The published multi-GPU cases predicted with the bucket model (issue 50 item 4): the real
cases file gives enough predicted cases over enough links, each with its source and its
assumptions; synthetic cases with known answers check the mechanism. The errors themselves
are what is measured, not asserted."""

from __future__ import annotations

import copy
import math

import pandas as pd
import pytest

from conftest import REPO
from dpscale.analysis.answers import published_check as pc
from dpscale.analysis.laws.commmodel.buckets import timelines
from dpscale.plan.config_files import load_yaml
from helpers.timelines import FOUR

CASES = load_yaml(REPO / "studies" / "published" / "cases.yaml")["cases"]
TIMELINE_CSV = (
    REPO / "evidence/2026-11-26-nvidia-h100/gpu_resnet50_bucket_timeline/tables/bucket_timeline.csv"
)
H100 = timelines(pd.read_csv(TIMELINE_CSV))[("torch-ddp", "resnet50-imagenet224-c1000")]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pc.check(CASES, H100)


def by_id(case_id: str) -> dict:
    return copy.deepcopy(next(case for case in CASES if case["id"] == case_id))


def test_the_h100_timeline_holds_resnet50s_fp32_gradient():
    timeline = pd.read_csv(TIMELINE_CSV)
    assert (
        timeline.groupby("bucket")["bucket_bytes"].median().sum()
        == pc.PARAMETERS["resnet50"] * pc.FP32_BYTES
    )
    assert H100.share.sum() == pytest.approx(1.0)


def test_real_cases_give_eight_predictions_over_three_links_with_sources(table):
    compared = table[table["error_points"].notna() | table["error_pct"].notna()]
    assert len(compared) >= 8
    assert compared["link"].nunique() >= 3, compared["link"].unique()
    for row in compared.itertuples():
        assert row.id and ("http" in row.source or "@" in row.source), row.id
        assert row.assumptions.strip() and "borrowed" in row.compute_source, row.id
        assert math.isfinite(row.predicted) and math.isfinite(row.published), row.id
    assert set(table["id"]) == {case["id"] for case in CASES}


def test_not_predicted_cases_say_why(table):
    skipped = table[table["status"] == "not predicted"]
    assert len(skipped) >= 1
    assert skipped["reason"].str.len().min() > 10
    assert skipped["predicted"].isna().all()
    assert "parameter server" in table.set_index("id").loc["tf-dgx1-p100-8-resnet50", "reason"]


def test_summary_counts_what_it_summarises(table):
    result = pc.summary(table)
    points = table["error_points"].dropna().abs()
    assert result["efficiency_cases"] == len(points)
    assert result["median_abs_error_points"] == pytest.approx(points.median())
    assert result["max_abs_error_points"] == pytest.approx(points.max())
    assert len(result["links"]) >= 3


def test_an_infinitely_fast_link_scales_perfectly():
    case = by_id("horovod-512-vgg16")
    case["inter_node_link"]["nominal_gbit_s"] = math.inf
    setup = pc.setup_for(case, {c["id"]: c for c in CASES})
    setup.alpha = 0.0
    assert pc.efficiency(FOUR, setup) == pytest.approx(1.0)
    assert pc.efficiency(H100, setup) == pytest.approx(1.0)


def test_a_slow_link_costs_and_the_known_answer_is_met():
    # one bucket of all bytes ready at the backward's end: step = compute + ring time
    one = pc.after_backward(FOUR)
    compute, size, world, beta = 0.1, 1e8, 4, 1e9
    step = pc.step_seconds(one, 64, compute, size, world, beta, 0.0)
    assert step == pytest.approx(compute + 2 * 3 / 4 * size / beta)


def test_a_hidden_all_reduce_is_never_slower():
    for beta in (1e7, 1e8, 1e9, 1e10, 1e12):
        plain = pc.step_seconds(FOUR, 64, 0.1, 1e8, 32, beta, 30e-6)
        hidden = pc.step_seconds(FOUR, 64, 0.1, 1e8, 32, beta, 30e-6, hidden=True)
        assert hidden <= plain + 1e-12
    # and it is the larger of compute and the all-reduces
    slow = pc.step_seconds(FOUR, 64, 0.1, 1e8, 2, 1e8, 0.0, hidden=True)
    assert slow == pytest.approx(max(0.1, 1e8 / 1e8))


def test_fp16_all_reduce_halves_the_bytes():
    lookup = {c["id"]: c for c in CASES}
    fp32 = pc.setup_for(lookup["chainermn-mn1-10gbe-32"], lookup)
    fp16 = pc.setup_for(lookup["chainermn-mn1-10gbe-dbuf-fp16-32"], lookup)
    assert fp16.gradient_bytes * 2 == fp32.gradient_bytes == pc.PARAMETERS["resnet50"] * 4
    assert fp16.hidden and not fp32.hidden


def test_a_case_without_any_one_device_throughput_is_not_predicted():
    case = by_id("horovod-512-vgg16")
    case["single_device"] = {"img_s": None, "published_in_same_source": False}
    reason = pc.setup_for(case, {})
    assert isinstance(reason, str) and "one-device throughput" in reason


def test_relative_to_one_node_uses_the_node_as_baseline():
    lookup = {c["id"]: c for c in CASES}
    setup = pc.setup_for(lookup["chainermn-aws-p3-25g-32"], lookup)
    assert setup.base_world == 8 and setup.world == 32
    assert setup.base_beta == pc.INTRA_NODE["V100"][0]
