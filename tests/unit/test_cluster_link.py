"""A cluster's all_reduce_perf log gives each bucket's collective time and its basis: the
log's own times where it measured the case, the ring law fitted to it elsewhere, and a
bus bandwidth above the link's rate named as not a plain ring.

The logs are written here in nccl-tests' text format from a known law, so each answer is
known; one published log checks the real format."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import REPO
from dpscale.analysis.laws.cluster_link import (
    MEASURED,
    NOT_CHECKED,
    CollectiveCurve,
    bucket_costs,
)
from dpscale.analysis.results.import_logs import parse_all_reduce, read_lines
from dpscale.plan import ring
from dpscale.plan.link import Link

SLINGSHOT = REPO / "tests" / "data" / "imports" / "nccl_all_reduce_gh200_2x4_slingshot.log"
ALPHA = 5e-6  # s per ring step
BETA = 20e9  # bytes/s, the link
SCALED = "scaled from the log's time at 8"  # a logged size at another rank count
SIZES = [8 * 2**k for k in range(25)]  # 8 B to 128 MiB, x2 steps (all_reduce_perf -f 2)

HEADER = """\
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
{ranks}
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
"""  # noqa: E501, W291
FOOTER = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 10.0 
#
# Collective test concluded: all_reduce_perf
"""  # noqa: W291


def ring_law(size: float, ranks: int) -> float:
    return ring.ring_allreduce_seconds(size, ranks, BETA, ALPHA)


def tree_law(size: float, ranks: int) -> float:
    """A tree-like all-reduce: log2(N) latency steps and each byte once, S/beta."""
    return 2 * math.log2(ranks) * ALPHA + size / BETA


def time_field(us: float) -> str:
    """nccl-tests' precision: two decimals under 100 us, one under 10 ms, none above."""
    if us >= 10000:
        return f"{us:7.0f}"
    return f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def row(size: int, seconds: float, ranks: int) -> str:
    us = time_field(seconds * 1e6)
    algbw = size / seconds / 1e9
    busbw = algbw * ring.ring_factor(ranks)
    block = f"{us}  {algbw:6.2f}  {busbw:6.2f}  {0:5d}"
    return f"{size:12d}  {size // 4:12d}     float     sum      -1  {block}  {block}"


def nccl_log(law, ranks: int, sizes: list[int] = SIZES) -> list[str]:
    """An all_reduce_perf log at ``ranks`` whose times follow ``law(size, ranks)``."""
    rank_lines = "\n".join(
        f"#  Rank {r:2d} Group  0 Pid {1000 + r} on node{r // 4} device {r % 4} [0000:01:00] GPU"
        for r in range(ranks)
    )
    rows = [row(size, law(size, ranks), ranks) for size in sizes]
    return (HEADER.format(ranks=rank_lines) + "\n".join(rows) + "\n" + FOOTER).splitlines()


def logged_seconds(lines: list[str]) -> dict[int, float]:
    """Size -> the in-place time as the log prints it, in seconds."""
    return {r.message_bytes: r.time_us * 1e-6 for r in parse_all_reduce(lines, 8).rows}


@pytest.fixture(scope="module")
def ring_curve() -> CollectiveCurve:
    return CollectiveCurve.from_log(parse_all_reduce(nccl_log(ring_law, 8), 8), 8)


def test_logged_sizes_return_the_logged_time_exactly(ring_curve):
    for size, seconds in logged_seconds(nccl_log(ring_law, 8)).items():
        time = ring_curve.seconds(size, 8)
        assert (time.seconds, time.basis) == (seconds, MEASURED)


@pytest.mark.parametrize("size", [300, 20_000_000, 100_000_000])
def test_a_size_between_logged_sizes_is_interpolated_within_1_percent(ring_curve, size):
    # away from the law's knee, where log-log interpolation bends it most (tested below)
    time = ring_curve.seconds(size, 8)
    assert time.basis == MEASURED
    assert time.seconds == pytest.approx(ring_law(size, 8), rel=0.01)


def test_interpolation_where_latency_and_bandwidth_weigh_alike_stays_within_2_percent(ring_curve):
    # the law's knee: 2(N-1) alpha = 2(N-1)/N S/beta at S = N alpha beta = 800 kB; with x2
    # steps a straight line in log-log misses a + bS by up to 1.5% there
    lower, upper = 524_288, 1_048_576
    middle = math.sqrt(lower * upper)
    time = ring_curve.seconds(middle, 8).seconds
    assert time == pytest.approx(ring_law(middle, 8), rel=0.02)
    assert time != pytest.approx(ring_law(middle, 8), rel=1e-3)  # interpolated, not the law


@pytest.mark.parametrize("size", [1 << 30, 4 << 30, 2])
def test_beyond_the_logged_sizes_the_fitted_ring_law_answers(ring_curve, size):
    time = ring_curve.seconds(size, 8)
    assert time.seconds == pytest.approx(ring_law(size, 8), rel=0.03)
    assert time.basis == "ring law beyond the log's sizes (fitted on the log)"
    assert time.lo <= time.seconds <= time.hi
    assert type(time.seconds) is float


def test_the_fit_recovers_the_law_the_log_was_written_from(ring_curve):
    assert ring_curve.fit.alpha_s == pytest.approx(ALPHA, rel=0.03)
    assert ring_curve.fit.beta_bytes_s == pytest.approx(BETA, rel=0.03)


@pytest.mark.parametrize("ranks", [16, 4, 2])
def test_another_rank_count_takes_the_ring_law_at_that_count(ring_curve, ranks):
    for size in (1024, 4_000_000, 64 << 20):
        time = ring_curve.seconds(size, ranks)
        assert time.seconds == pytest.approx(ring_law(size, ranks), rel=0.03)
        assert time.basis == f"ring law at {ranks} ranks (log measured 8), {SCALED}"
    assert ring_curve.seconds(64 << 20, 16).seconds > ring_curve.seconds(64 << 20, 8).seconds


def test_a_log_at_the_links_rate_is_consistent_with_a_ring(ring_curve):
    assert ring_curve.plain_ring is None and ring_curve.algorithm == NOT_CHECKED
    log = parse_all_reduce(nccl_log(ring_law, 8), 8)
    curve = CollectiveCurve.from_log(log, 8, Link("slingshot", BETA))
    assert curve.plain_ring is True
    assert curve.algorithm.endswith("consistent with a ring over this link")


def test_a_busbw_above_the_links_rate_is_not_a_plain_ring_and_its_times_are_used():
    lines = nccl_log(tree_law, 8)
    curve = CollectiveCurve.from_log(parse_all_reduce(lines, 8), 8, nominal=BETA)
    # the tree moves each byte once: its busbw reaches 2(N-1)/N beta = 35 GB/s on a 20 GB/s link
    assert curve.plain_ring is False
    assert curve.peak_busbw_bytes_s == pytest.approx(ring.ring_factor(8) * BETA, rel=0.02)
    assert curve.algorithm == (
        "busbw 34.8 GB/s above the link's 20 GB/s: not a plain ring over this link; "
        "the measured times are used"
    )
    for size, seconds in logged_seconds(lines).items():
        assert (curve.seconds(size, 8).seconds, curve.seconds(size, 8).basis) == (seconds, MEASURED)
    middle = curve.seconds(50_000_000, 8)
    assert middle.seconds == pytest.approx(tree_law(50_000_000, 8), rel=0.01)
    assert curve.seconds(50_000_000, 16).basis.endswith("not a plain ring over this link")


def test_a_busbw_within_the_tolerance_of_the_rate_is_still_a_ring():
    log = parse_all_reduce(nccl_log(ring_law, 8), 8)
    assert CollectiveCurve.from_log(log, 8, nominal=BETA / 1.04).plain_ring is True
    assert CollectiveCurve.from_log(log, 8, nominal=BETA / 1.10).plain_ring is False
    assert CollectiveCurve.from_log(log, 8, nominal=Link("unknown")).algorithm == NOT_CHECKED


def test_a_log_at_8_ranks_asked_for_4_falls_back_to_the_ring_law_and_says_so():
    curve = CollectiveCurve.from_log(parse_all_reduce(nccl_log(ring_law, 8), 8), 8)
    size = SIZES[8]  # a logged size, but at 8 ranks
    time = curve.seconds(size, 4)
    assert time.basis == f"ring law at 4 ranks (log measured 8), {SCALED}"
    assert time.seconds == pytest.approx(ring_law(size, 4), rel=0.03)
    assert time.seconds != pytest.approx(ring_law(size, 8), rel=0.03)


@pytest.mark.parametrize(
    ("size", "ranks", "named"),
    [(1024, 1, "ranks"), (1024, 0, "ranks"), (0, 8, "message_bytes"), (-5, 8, "message_bytes")],
)
def test_bad_requests_are_a_value_error_naming_the_argument(ring_curve, size, ranks, named):
    with pytest.raises(ValueError, match=rf"^{named} must be") as error:
        ring_curve.seconds(size, ranks)
    assert "\n" not in str(error.value)


def test_a_curve_of_another_rank_count_than_its_log_lists_is_refused():
    log = parse_all_reduce(nccl_log(ring_law, 8), 8)
    with pytest.raises(ValueError, match="^ranks: the log lists 8 ranks, not 16"):
        CollectiveCurve.from_log(log, 16)
    with pytest.raises(ValueError, match="^ranks must be >= 2"):
        CollectiveCurve.from_log(log, 1)


def test_a_log_of_two_sizes_answers_inside_it_and_refuses_to_extrapolate():
    lines = nccl_log(ring_law, 8, sizes=[1024, 4096])
    curve = CollectiveCurve.from_log(parse_all_reduce(lines, 8), 8)
    assert curve.fit is None
    assert curve.seconds(2048, 8).basis == MEASURED
    with pytest.raises(ValueError, match="too few to fit the ring law"):
        curve.seconds(1 << 20, 8)


def test_bucket_costs_give_one_row_of_the_bucket_model_with_each_basis(ring_curve):
    buckets = [25 << 20, 1 << 30, 3_000_000]
    costs = bucket_costs(ring_curve, buckets, 8)
    expected = [ring_law(size, 8) for size in buckets]
    np.testing.assert_allclose(costs.seconds, expected, rtol=0.03)
    assert costs.bases == (
        MEASURED,
        "ring law beyond the log's sizes (fitted on the log)",
        MEASURED,
    )
    at_16 = bucket_costs(ring_curve, buckets, 16)
    assert at_16.bases == (
        f"ring law at 16 ranks (log measured 8), {SCALED}",
        "ring law at 16 ranks (log measured 8)",  # beyond the log's sizes: the law itself
        f"ring law at 16 ranks (log measured 8), {SCALED}",
    )
    assert np.all(at_16.seconds > costs.seconds)
    with pytest.raises(ValueError, match="^message_bytes"):
        bucket_costs(ring_curve, [1024, 0], 8)


def test_the_published_slingshot_log_reproduces_its_own_times():
    log = parse_all_reduce(read_lines(SLINGSHOT), 8)  # 2 nodes x 4 GH200 (README)
    slingshot = Link.from_rate("slingshot", "200gbit", field="test", emulated=False, source="t")
    curve = CollectiveCurve.from_log(log, 8, slingshot)
    assert len(curve.sizes) == 25 and curve.sizes[-1] == 134_217_728
    for r in log.rows:
        time = curve.seconds(r.message_bytes, 8)
        assert (time.seconds, time.basis) == (r.time_us * 1e-6, MEASURED)
    assert curve.seconds(134_217_728, 8).seconds == pytest.approx(1907.8e-6)
    # 123 GB/s busbw over 25 GB/s Slingshot NICs: NVLink inside each node carries most of it
    assert curve.plain_ring is False
    assert curve.algorithm.startswith("busbw 123 GB/s above the link's 25 GB/s")
