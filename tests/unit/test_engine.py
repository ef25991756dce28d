"""The one prediction engine (analysis.laws.engine): known answers from a one-bucket timeline
and links or logs that follow a known law, a remedy read from its declaration, the overlap
applied in one place, a measured curve that refuses what it did not measure, and ranges
that hold their point."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_cluster_link import logged_seconds, nccl_log

from dpscale.analysis.laws import engine as en
from dpscale.analysis.laws import pricing as pr
from dpscale.analysis.laws.cluster_link import MEASURED, CollectiveCurve
from dpscale.analysis.laws.commmodel.buckets import BucketTimeline
from dpscale.analysis.results.import_logs import parse_all_reduce
from dpscale.plan import ring, traffic
from dpscale.plan.layout import Layout
from dpscale.plan.link import HOST_LINK, Link
from dpscale.plan.remedies import DECLARED
from dpscale.plan.traffic import ParameterServers, ReduceScatterAllGather, RingAllReduce
from helpers.timelines import FOUR

COMPUTE = 0.1  # s: the one-device step at batch 64
GRADIENT = 1e8  # bytes
BETA, ALPHA = 1e9, 30e-6  # bytes/s, s per hop
RING = RingAllReduce()
# one bucket of all the bytes, ready as the backward pass ends
ONE = BucketTimeline(1 / 3, 0.002, 0.1 / 64, 0.0, np.array([1.0]), np.array([1.0]), (64,))


def profile(timeline: BucketTimeline = ONE, lo: float = COMPUTE, hi: float = COMPUTE):
    return en.ComputeProfile(timeline, 64, COMPUTE, lo, hi, GRADIENT, "known")


def link(beta: float = BETA, alpha: float = ALPHA) -> pr.LinkPricing:
    return pr.LinkPricing(Link("test", beta, alpha, source="test"))


def curve(ranks: int = 8) -> CollectiveCurve:
    """A log at ``ranks`` that followed the ring law (5 us a step, 2 GB/s)."""
    log = nccl_log(lambda s, n: ring.ring_allreduce_seconds(s, n, 2e9, 5e-6), ranks)
    return CollectiveCurve.from_log(parse_all_reduce(log, ranks), ranks)


def collective(prediction: en.StepPrediction) -> float:
    return prediction.step_s - COMPUTE


def test_one_bucket_after_the_backward_adds_its_whole_collective():
    for layout in (Layout(1, 4), Layout(4, 1), Layout(2, 2)):  # a ring over 4, however placed
        found = en.predict_step(profile(), RING, link(), layout)
        assert found.step_s == pytest.approx(COMPUTE + 2 * 3 / 4 * GRADIENT / BETA + 6 * ALPHA)
    # the same with a log: at a size and rank count it logged, its own time
    size = 8 * 2**20
    logged = logged_seconds(nccl_log(lambda s, n: ring.ring_allreduce_seconds(s, n, 2e9, 5e-6), 8))
    one = en.ComputeProfile(ONE, 64, COMPUTE, COMPUTE, COMPUTE, size, "known")
    found = en.predict_step(one, RING, pr.CurvePricing(curve()), Layout(2, 4))
    assert found.step_s == pytest.approx(COMPUTE + logged[size], rel=1e-12)
    assert found.collective_bases == (MEASURED,) and found.kind == "extrapolated"


def test_the_after_backward_overlap_is_one_bucket_of_all_bytes_at_the_end():
    after = en.overlapped(FOUR, en.Overlap.AFTER_BACKWARD)
    assert list(after.ready) == [1.0] and list(after.share) == [1.0]
    assert en.overlapped(FOUR, en.Overlap.BUCKETS) is FOUR
    buckets = en.predict_step(profile(FOUR), RING, link(), Layout(4, 1))
    after = en.predict_step(
        profile(FOUR), RING, link(), Layout(4, 1), overlap=en.Overlap.AFTER_BACKWARD
    )
    # four buckets each pay the latency; after the backward nothing hides behind it
    assert after.step_s == pytest.approx(COMPUTE + 1.5 * GRADIENT / BETA + 6 * ALPHA)
    assert buckets.step_s < after.step_s
    assert "after the backward" in after.overlap and "buckets" in buckets.overlap


def test_a_hidden_remedy_is_the_larger_of_compute_and_the_collectives():
    hidden = en.RemedyEffect(hidden=True)
    for beta in (1e7, 1e8, 1e9, 1e10, 1e12):
        for timeline in (ONE, FOUR):
            found = en.predict_step(profile(timeline), RING, link(beta), Layout(4, 2), hidden)
            plain = en.predict_step(profile(timeline), RING, link(beta), Layout(4, 2))
            buckets = len(timeline.share)
            per_bucket = traffic.seconds(RING, GRADIENT / buckets, 4, 2, beta, ALPHA)
            assert found.step_s == pytest.approx(max(COMPUTE, buckets * per_bucket))
            assert found.step_s <= plain.step_s + 1e-12


def test_a_wire_ratio_of_two_halves_the_bandwidth_term_and_keeps_the_latency():
    plain = en.predict_step(profile(), RING, link(), Layout(2, 4))
    half = en.predict_step(profile(), RING, link(), Layout(2, 4), en.NO_EFFECT.with_wire_ratio(2))
    bandwidth = ring.ring_factor(8) * GRADIENT / BETA
    latency = 2 * 7 * ALPHA
    assert collective(plain) == pytest.approx(bandwidth + latency)
    assert collective(half) == pytest.approx(bandwidth / 2 + latency)


def test_collectives_per_bucket_pay_their_latency_each_and_split_the_bytes():
    three = en.RemedyEffect(collectives_per_bucket=3)
    found = en.predict_step(profile(), RING, link(), Layout(2, 4), three)
    assert collective(found) == pytest.approx(
        ring.ring_factor(8) * GRADIENT / BETA + 3 * 14 * ALPHA
    )


@pytest.mark.parametrize(
    "declared",
    [
        ParameterServers(4, per_node=True),
        ParameterServers(None, on_workers=True),
        ReduceScatterAllGather(2),
    ],
)
def test_any_declared_traffic_over_a_nominal_link_is_plan_traffics_price(declared):
    for layout in (Layout(8, 8), Layout(2, 4), Layout(1, 4)):
        found = en.predict_step(profile(), declared, link(), layout)
        price = traffic.seconds(
            declared, GRADIENT, layout.nodes, layout.devices_per_node, BETA, ALPHA
        )
        assert collective(found) == pytest.approx(float(price), rel=1e-12)
    # 4 shards on 8 machines summing their devices: 2.5 x the bytes, a push and a pull
    servers = en.predict_step(profile(), ParameterServers(4, per_node=True), link(), Layout(8, 8))
    assert collective(servers) == pytest.approx(2.5 * GRADIENT / BETA + 2 * ALPHA)


def test_a_measured_curve_refuses_a_traffic_that_is_not_a_ring_all_reduce_in_one_line():
    for declared in (ParameterServers(1), ReduceScatterAllGather()):
        with pytest.raises(ValueError) as error:
            en.predict_step(profile(), declared, pr.CurvePricing(curve()), Layout(2, 4))
        message = str(error.value)
        assert message.startswith("traffic: a measured all-reduce curve cannot price ")
        assert declared.words() in message and "\n" not in message


def test_ranges_hold_the_point():
    # the log at 8 ranks, asked at 32: the fitted ring law with its range; compute +-5%
    pricing = pr.CurvePricing(curve())
    for timeline, remedy in ((FOUR, en.NO_EFFECT), (ONE, en.RemedyEffect(hidden=True))):
        found = en.predict_step(
            profile(timeline, 0.095, 0.105), RING, pricing, Layout(8, 4), remedy
        )
        for name in ("step", "img_s", "speedup", "efficiency"):
            point = getattr(found, f"{name}_s" if name == "step" else name)
            lo = getattr(found, f"{name}_lo_s" if name == "step" else f"{name}_lo")
            hi = getattr(found, f"{name}_hi_s" if name == "step" else f"{name}_hi")
            assert lo <= point <= hi, name
        assert found.step_lo_s < found.step_hi_s
        assert found.collective_bases[0].startswith("ring law at 32 ranks (log measured 8)")
        assert found.efficiency == pytest.approx(found.speedup / 32)
        assert found.img_s == pytest.approx(32 * 64 / found.step_s)
    # a nominal link and a compute without a range: every end is the point
    plain = en.predict_step(profile(FOUR), RING, link(), Layout(8, 4))
    assert plain.step_lo_s == plain.step_s == plain.step_hi_s
    assert plain.speedup_lo == plain.speedup == plain.speedup_hi


def test_one_device_sends_nothing():
    found = en.predict_step(profile(FOUR), RING, pr.CurvePricing(curve()), Layout(1, 1))
    assert found.collective_bases == (en.ONE_DEVICE,)
    assert found.step_s == pytest.approx(COMPUTE) and found.speedup == pytest.approx(1.0)
    empty = BucketTimeline(1 / 3, 0.002, 0.1 / 64, 0.0, np.array([1.0]), np.array([0.0]), (64,))
    nothing = en.predict_step(profile(empty), RING, link(), Layout(2, 1))
    assert nothing.collective_bases == (en.NO_BYTES,)


def test_a_remedy_is_read_from_its_declaration():
    for remedy in DECLARED:
        if remedy.wire_ratio is None:  # measured (PowerSGD): refused without the ratio
            with pytest.raises(ValueError, match=f"remedy.wire_ratio: {remedy.name} declares none"):
                en.RemedyEffect.of(remedy)
            effect = en.RemedyEffect.of(remedy, wire_ratio=40.0)
            assert effect.wire_ratio == 40.0
        else:
            effect = en.RemedyEffect.of(remedy)
            assert effect.wire_ratio == remedy.wire_ratio
        assert effect.hidden == remedy.hidden
        assert effect.collectives_per_bucket == remedy.collectives_per_bucket
        assert remedy.name in effect.words
    assert en.NO_EFFECT.wire_ratio == 1.0 and not en.NO_EFFECT.hidden


def test_the_wire_ratio_search_meets_the_target():
    slow = link(2e8, 5e-6)
    ratio, why = en.wire_ratio_for(profile(FOUR), RING, slow, Layout(4, 4))
    assert ratio > 1 and "bisection" in why
    at = en.point_efficiency(
        profile(FOUR), RING, slow, Layout(4, 4), en.NO_EFFECT.with_wire_ratio(ratio)
    )
    assert 0.9 <= at == pytest.approx(0.9, abs=2e-3)
    assert en.wire_ratio_for(profile(FOUR), RING, link(1e13, 0.0), Layout(4, 4)) == (
        1.0,
        "already met uncompressed",
    )
    stuck, why = en.wire_ratio_for(profile(FOUR), RING, link(1e9, 5e-3), Layout(16, 4))
    assert math.isnan(stuck) and "not reachable" in why


def test_bad_inputs_are_refused_in_one_line():
    cases = [
        (lambda: en.ComputeProfile(ONE, 64, 0.1, 0.2, 0.3, GRADIENT, "x"), "compute: the range"),
        (lambda: en.ComputeProfile.point(ONE, 64, math.nan, GRADIENT, "x"), "compute.step_s"),
        (lambda: en.RemedyEffect(wire_ratio=0.0), "remedy.wire_ratio"),
        (lambda: en.RemedyEffect(collectives_per_bucket=0), "remedy.collectives_per_bucket"),
        (
            lambda: en.predict_step(profile(), RING, pr.LinkPricing(HOST_LINK), Layout(2, 1)),
            "link: host has no known bandwidth",
        ),
        (lambda: en.ComputeProfile.point(ONE, 0, 0.1, GRADIENT, "x"), "compute.batch: 0 is"),
        # implausible layouts: the ring law at 10^400 ranks overflowed a float (a traceback)
        (
            lambda: en.predict_step(profile(), RING, link(), Layout(10**400, 4)),
            "layout: about 10^400 devices in all (nodes about 10^400, devices_per_node 4); "
            "allowed: 1 to 1,048,576",
        ),
        (
            lambda: en.predict_step(profile(), RING, pr.CurvePricing(curve()), Layout(2, 2**20)),
            "layout: 2,097,152 devices in all (nodes 2, devices_per_node 1,048,576)",
        ),
        (lambda: en.wire_ratio_for(profile(), RING, link(), Layout(0, 4)), "layout: 0 devices"),
    ]
    for call, words in cases:
        with pytest.raises(ValueError) as error:
            call()
        assert str(error.value).startswith(words) and "\n" not in str(error.value)
    # an infinitely fast link sends its bytes in no time, paying its latency only
    fast = en.predict_step(profile(), RING, link(math.inf, 0.0), Layout(2, 1))
    assert fast.step_s == pytest.approx(COMPUTE)
