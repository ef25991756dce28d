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
from dpscale.analysis.answers import published_model as pm
from dpscale.analysis.answers import published_summary as ps
from dpscale.analysis.answers.published_setup import setup_for
from dpscale.plan.published import DEFAULT_PROFILE, read_cases
from dpscale.plan.published_cases import case_fields
from dpscale.plan.traffic import ParameterServers, RingAllReduce
from dpscale.steps.published import profiles
from helpers.timelines import FOUR

CASES = read_cases(REPO / "studies" / "published" / "cases.yaml")
PROFILE_CSV = REPO / DEFAULT_PROFILE
PROFILES = profiles(PROFILE_CSV)
H200_RESNET50_FP32 = next(p for p in PROFILES if (p.model, p.precision) == ("resnet50", "fp32"))
KNOWN = pm.Profile(FOUR, "compute shape borrowed from four equal buckets", "resnet50")


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pc.check(CASES, PROFILES)


def by_id(case_id: str) -> dict:
    return copy.deepcopy(next(case for case in CASES if case["id"] == case_id))


def test_each_profile_holds_its_models_fp32_gradient():
    timeline = pd.read_csv(PROFILE_CSV)
    per_cell = timeline.groupby(["cell_id", "precision"])["bucket_bytes"].sum()
    for (cell_id, _), total in per_cell.items():
        name = cell_id.split("/")[1].split("-")[0]
        assert total == pm.PARAMETERS[name] * pm.FP32_BYTES, cell_id
    assert {(p.model, p.precision) for p in PROFILES} == {
        (model, precision)
        for model in ("resnet18", "resnet50", "resnet101")
        for precision in ("amp_bf16", "fp32")
    }
    assert all(p.timeline.share.sum() == pytest.approx(1.0) for p in PROFILES)
    assert all(p.timeline.batches == (64, 256) for p in PROFILES)


def test_a_case_borrows_its_own_model_at_its_precision_else_the_nearest():
    def chosen(model: str, precision: str) -> tuple[str, str]:
        found = pm.choose_profile(PROFILES, model, precision)
        return found.model, found.precision

    assert chosen("resnet101", "fp32") == ("resnet101", "fp32")
    assert chosen("resnet50", "amp") == ("resnet50", "amp_bf16")
    assert chosen("resnet50", "tf32") == ("resnet50", "fp32")
    assert chosen("resnet152", "fp32") == ("resnet101", "fp32")
    assert chosen("vgg16", "fp32") == ("resnet50", "fp32")
    only_bf16 = [p for p in PROFILES if p.precision == "amp_bf16"]
    assert pm.choose_profile(only_bf16, "resnet50", "fp32").precision == "amp_bf16"


def test_a_borrowed_shape_of_another_model_or_precision_is_said(table):
    rows = table.set_index("id")
    assert (
        "resnet152 takes resnet101's compute shape"
        in rows.loc["tf-p2-k80-64-resnet152", "assumptions"]
    )
    amp = rows.loc["dle-pyt-dgx1v-amp-8"]
    assert "resnet50 amp_bf16" in amp["compute_source"]
    assert "the profile timed" not in rows.loc["horovod-128-resnet101", "assumptions"]


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
    result = ps.summary(table)
    points = table["error_points"].dropna().abs()
    assert result["efficiency_cases"] == len(points)
    assert result["median_abs_error_points"] == pytest.approx(points.median())
    assert result["max_abs_error_points"] == pytest.approx(points.max())
    assert len(result["links"]) >= 3


def test_an_infinitely_fast_link_scales_perfectly():
    case = by_id("horovod-512-vgg16")
    case["inter_node_link"]["nominal_gbit_s"] = math.inf
    setup = setup_for(case, {c["id"]: c for c in CASES}, KNOWN)
    setup.alpha = 0.0
    assert pm.efficiency(FOUR, setup) == pytest.approx(1.0)
    assert pm.efficiency(H200_RESNET50_FP32.timeline, setup) == pytest.approx(1.0)


def known_setup(
    layout: tuple[int, int], beta: float, alpha: float = 0.0, hidden: bool = False, **fields
) -> pm.Setup:
    """A case of 0.1 s compute at batch 64 and 1e8 gradient bytes over ``layout``."""
    return pm.Setup(64, 640.0, 1e8, *layout, beta, alpha, hidden, "link", "known", **fields)


def test_a_slow_link_costs_and_the_known_answer_is_met():
    # one bucket of all bytes ready at the backward's end: step = compute + ring time
    compute, size, beta = 0.1, 1e8, 1e9
    for layout in ((1, 4), (4, 1), (2, 2)):  # a ring over 4 devices, however they sit
        setup = known_setup(layout, beta, after_backward=True)
        step = pm.case_step(FOUR, setup, 64)
        assert step == pytest.approx(compute + 2 * 3 / 4 * size / beta)
        assert pm.case_step(FOUR, setup, 64, baseline=True) == pytest.approx(compute)


def test_a_hidden_all_reduce_is_never_slower():
    for beta in (1e7, 1e8, 1e9, 1e10, 1e12):
        plain = pm.case_step(FOUR, known_setup((4, 8), beta, 30e-6), 64)
        hidden = pm.case_step(FOUR, known_setup((4, 8), beta, 30e-6, hidden=True), 64)
        assert hidden <= plain + 1e-12
    # and it is the larger of compute and the all-reduces
    slow = pm.case_step(FOUR, known_setup((1, 2), 1e8, hidden=True), 64)
    assert slow == pytest.approx(max(0.1, 1e8 / 1e8))


def test_fp16_all_reduce_halves_the_bytes():
    lookup = {c["id"]: c for c in CASES}
    fp32 = setup_for(lookup["chainermn-mn1-10gbe-32"], lookup, KNOWN)
    fp16 = setup_for(lookup["chainermn-mn1-10gbe-dbuf-fp16-32"], lookup, KNOWN)
    # both make fp32 gradients; fp16 sends them at half the bytes (a wire ratio of 2)
    assert fp16.gradient_bytes == fp32.gradient_bytes == pm.PARAMETERS["resnet50"] * 4
    assert (fp16.remedy.wire_ratio, fp32.remedy.wire_ratio) == (2.0, 1.0)
    assert fp16.hidden and not fp32.hidden
    assert fp16.remedy.hidden and not fp32.remedy.hidden
    # halving the bytes on a pure-bandwidth link halves the collective, whatever the overlap
    plain = known_setup((2, 1), 1e9, after_backward=True)
    half = known_setup((2, 1), 1e9, after_backward=True, wire_ratio=2.0)
    assert pm.case_step(FOUR, half, 64) - 0.1 == pytest.approx(
        (pm.case_step(FOUR, plain, 64) - 0.1) / 2
    )


def test_a_case_without_any_one_device_throughput_is_not_predicted():
    case = by_id("horovod-512-vgg16")
    case["single_device"] = {"img_s": None, "published_in_same_source": False}
    reason = setup_for(case, {}, KNOWN)
    assert isinstance(reason, str) and "one-device throughput" in reason


def test_a_one_node_baseline_is_the_node_on_its_own_nominal_link():
    lookup = {c["id"]: c for c in CASES}
    case = lookup["chainermn-aws-p3-25g-32"]
    setup = setup_for(case, lookup, KNOWN)
    assert setup.base_world == 8 and setup.world == 32
    assert setup.base_beta == case["intra_node_link"]["nominal_gbyte_s"] * 1e9 == 150e9
    assert setup.base_alpha == pm.ALPHA_S["nvlink"] and setup.base_traffic == RingAllReduce()
    words = case["intra_node_link"]["nominal"]
    assert f"baseline one node of 8 on {words}" in setup.assumptions


def test_parameter_servers_load_the_busiest_nic_by_their_count():
    # plan.traffic prices them (its tests hold the factors); the step pays one bucket's
    # push and pull: 4 shards on 8 machines move 2.5 x the bytes through the busiest NIC
    servers = ParameterServers(4, per_node=True)
    setup = known_setup((8, 8), 1e9, traffic=servers, after_backward=True)
    step = pm.case_step(FOUR, setup, 64)
    assert step == pytest.approx(0.1 + 2.5 * 1e8 / 1e9)
    with_latency = pm.case_step(
        FOUR, known_setup((8, 8), 1e9, 1e-3, traffic=servers, after_backward=True), 64
    )
    assert with_latency == pytest.approx(step + 2 * 1e-3)  # one push, one pull


def test_a_case_takes_its_declared_traffic():
    lookup = {c["id"]: c for c in CASES}
    resnet152 = setup_for(lookup["tf-p2-k80-64-resnet152"], lookup, KNOWN)
    resnet50 = setup_for(lookup["tf-p2-k80-64-resnet50"], lookup, KNOWN)
    assert resnet152.traffic == ParameterServers(4, per_node=True)
    assert resnet50.traffic == ParameterServers(8, per_node=True)
    assert any("4 shards on 4 of the 8 worker machines" in a for a in resnet152.assumptions)
    # a case that declares no traffic is a ring over every device
    case = by_id("tf-p2-k80-64-resnet152")
    del case["traffic"]
    assert setup_for(case, lookup, KNOWN).traffic == RingAllReduce()
    # parameter servers summed per node leave one node's devices a ring of their own;
    # servers off the devices in one node are the host's, a path with no nominal rate
    one_node = by_id("tf-dgx1-p100-8-vgg16")
    one_node["traffic"] = {"kind": "parameter_servers", "servers": 1, "per_node": True}
    assert setup_for(one_node, lookup, KNOWN).traffic == RingAllReduce()
    one_node["traffic"] = {"kind": "parameter_servers", "servers": 1}
    assert "parameter servers in one node, off its devices" in setup_for(one_node, lookup, KNOWN)


def test_the_implied_rate_has_a_known_answer_and_none_where_no_rate_fits():
    # efficiency 1 / (1 + 1e9 / rate): 50% at 1e9 bytes/s
    def predict(rate: float) -> float:
        return 1 / (1 + 1e9 / rate)

    assert pm.implied_rate(predict, 0.5, nominal=1e10) == pytest.approx(1e9, rel=1e-5)
    # more than compute alone allows, or less than 1 MB/s would give: no rate
    assert math.isnan(pm.implied_rate(predict, 1.01, nominal=1e10))
    assert math.isnan(pm.implied_rate(predict, 1e-6, nominal=1e10))
    assert math.isnan(pm.implied_rate(predict, math.nan, nominal=1e10))


def test_a_case_predicted_at_its_implied_rate_meets_its_published_figure(table):
    lookup = {c["id"]: c for c in CASES}
    row = table.set_index("id").loc["tf-p2-k80-64-resnet50"]
    case = lookup["tf-p2-k80-64-resnet50"]
    profile = pm.choose_profile(PROFILES, case["model"], case_fields(case).compute_precision)
    setup = setup_for(case, lookup, profile)
    setup.beta = row["implied_gbit_s"] * 1e9 / 8
    assert 100 * pm.efficiency(profile.timeline, setup) == pytest.approx(row["published"], abs=1e-3)
    assert row["implied_pct_of_nominal"] == pytest.approx(100 * setup.beta / (10e9 / 8))
    assert row["link_kind"] == "tcp"
    # the ratio cases too, and a case compared with nothing implies nothing
    ratio = table.set_index("id").loc["chainermn-mn1-10gbe-32"]
    assert ratio["implied_gbit_s"] > 0
    assert math.isnan(table.set_index("id").loc["chainermn-mn1-ibfdr-32", "implied_gbit_s"])


def test_the_implied_rates_are_summarised_per_kind_of_link(table):
    ranges = ps.summary(table)["implied_pct_of_nominal"]
    implied = table.dropna(subset=["implied_pct_of_nominal"])
    assert sum(found["cases"] for found in ranges.values()) == len(implied)
    tcp = implied.loc[implied["link_kind"] == "tcp", "implied_pct_of_nominal"]
    assert ranges["tcp"]["low"] == pytest.approx(tcp.min())
    assert ranges["tcp"]["median"] == pytest.approx(tcp.median())
    line = ps.implied_line(ranges)
    assert f"TCP Ethernet {tcp.min():.0f}-{tcp.max():.0f}% of nominal ({len(tcp)} cases" in line
    assert "a diagnostic, not a prediction" in line
