"""One step predicted from typed inputs: the one prediction engine every caller of a single
configuration shares (a user's cluster, the exported-log check, the published cases).

Its inputs, each typed once:

- :class:`ComputeProfile`: one rank's bucket timeline (commmodel.buckets.BucketTimeline),
  the per-device batch, the one-device step and its 95% range, the gradient bytes the
  backward pass makes, and where they came from;
- the traffic: a ``plan.traffic.Traffic``, declared by the strategy or the case;
- :class:`RemedyEffect`: what a remedy does to the buckets, read from its declaration
  (plan.remedies.Remedy: bytes divided by its wire ratio, hidden behind the next step,
  collectives per bucket), never from its name;
- :class:`Overlap`: the buckets as the timeline has them, or all bytes after the backward;
- the pricing (:class:`Pricing`): a nominal or fitted ``plan.link.Link`` priced by
  ``plan.traffic.seconds`` (laws.pricing.LinkPricing), or a measured collective curve
  (laws.cluster_link.CollectiveCurve, laws.pricing.CurvePricing; an all-reduce, so it refuses
  any other traffic);
- the layout: a ``plan.layout.Layout``.

The step is the bucket mechanism (commmodel.buckets.bucket_step) with kappa 0 (the devices
share no cores): forward, backward with each bucket's collectives served in order as it is
ready, optimizer; a hidden remedy runs the collectives behind the next step (step =
max(compute, their sum)). Each bucket of ``S`` bytes sends ``k`` collectives of
``S / (ratio k)`` bytes each, priced by the link or the curve (k x one collective's time).

Ranges: the step at the corners of the compute range and the collectives' range (a
measured time has none: the point stands for both ends). Every number is an extrapolation.

Not resolved: where a bucket's price needs a fitted law whose parameter the measurements
left open (laws.alpha_beta's ``*_unresolved``; a curve's time says so), the step has no
number: every value and range is NaN and ``unresolved`` says why and what would resolve it
(docs/decisions/not-resolved-predictions.md).

The fitted study model (commmodel.model) keeps its own vectorised form: it fits its
parameters by least squares over many rows at once, and its network term is plan.traffic's
same price precomputed per row (wire_factor, hops) (docs/decisions/one-prediction-engine.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from dpscale.analysis.laws.commmodel.buckets import BucketTimeline, bucket_step, timeline_rows
from dpscale.analysis.laws.pricing import BucketPrices, Pricing
from dpscale.plan.layout import Layout
from dpscale.plan.remedies import BY_NAME, NO_REMEDY, Remedy
from dpscale.plan.traffic import Traffic

KIND = "extrapolated"
NOT_RESOLVED = "not resolved"
TARGET_EFFICIENCY = 0.9
MAX_WIRE_RATIO = 1000.0
# the largest data-parallel runs use about 10^5 devices: a layout ten times that is no
# cluster a one-device profile and one log can stand for (and the ring law at 10^400 ranks
# overflows a float); refused in one line
MAX_DEVICES = 2**20
ONE_DEVICE = "nothing sent (one device)"
NO_BYTES = "nothing sent (no gradient bytes)"


class Overlap(Enum):
    """How the collectives overlap the backward pass: each bucket as the timeline has it
    (DDP, Horovod), or one bucket of all the bytes after the backward (ChainerMN)."""

    BUCKETS = "buckets"
    AFTER_BACKWARD = "after_backward"

    def words(self) -> str:
        if self is Overlap.AFTER_BACKWARD:
            return "all gradient bytes all-reduced after the backward pass"
        return "buckets served in order as the backward pass makes them ready"


def overlapped(timeline: BucketTimeline, overlap: Overlap) -> BucketTimeline:
    """The timeline in ``overlap``: the one place an overlap changes the buckets (after the
    backward: the same compute, one bucket of all the bytes, ready at the backward's end)."""
    if overlap is Overlap.AFTER_BACKWARD:
        return replace(timeline, ready=np.array([1.0]), share=np.array([1.0]))
    return timeline


@dataclass(frozen=True)
class ComputeProfile:
    """One device's compute: its bucket timeline, per-device batch, step seconds with the
    95% range (lo, hi; the point where none), the gradient bytes its backward pass makes
    (before any remedy) and the words saying where they came from."""

    timeline: BucketTimeline
    batch: int
    step_s: float
    lo: float
    hi: float
    gradient_bytes: float
    source: str

    def __post_init__(self) -> None:
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 1:
            raise ValueError(f"compute.batch: {self.batch!r} is not a whole number >= 1")
        for name in ("step_s", "lo", "hi"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"compute.{name}: {value!r} is not a finite number > 0")
        if not self.lo <= self.step_s <= self.hi:
            raise ValueError(
                f"compute: the range {self.lo!r}-{self.hi!r} does not hold the step {self.step_s!r}"
            )
        if not (math.isfinite(self.gradient_bytes) and self.gradient_bytes >= 0):
            raise ValueError(f"compute.gradient_bytes: {self.gradient_bytes!r} is not >= 0")

    @classmethod
    def point(
        cls, timeline: BucketTimeline, batch: int, step_s: float, gradient_bytes: float, source: str
    ) -> ComputeProfile:
        """A profile without a range: the point stands for both ends."""
        return cls(timeline, batch, step_s, step_s, step_s, gradient_bytes, source)


@dataclass(frozen=True)
class RemedyEffect:
    """What a remedy does to one step's collectives: the gradient bytes divided by
    ``wire_ratio``, ``hidden`` behind the next step, ``collectives_per_bucket`` each
    bucket sends; ``words`` names it."""

    wire_ratio: float = 1.0
    hidden: bool = False
    collectives_per_bucket: int = 1
    words: str = "no remedy"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.wire_ratio) and self.wire_ratio > 0):
            raise ValueError(f"remedy.wire_ratio: {self.wire_ratio!r} is not a finite number > 0")
        if self.collectives_per_bucket < 1:
            raise ValueError(
                f"remedy.collectives_per_bucket: {self.collectives_per_bucket!r} is not >= 1"
            )

    @classmethod
    def of(cls, remedy: Remedy, wire_ratio: float | None = None) -> RemedyEffect:
        """A declared remedy's effect (plan.remedies.Remedy); ``wire_ratio``: the measured
        ratio of a remedy that declares none (PowerSGD's depends on the layers)."""
        ratio = remedy.wire_ratio if wire_ratio is None else wire_ratio
        if ratio is None:
            raise ValueError(
                f"remedy.wire_ratio: {remedy.name} declares none (it is measured); give the "
                "ratio its cells recorded"
            )
        words = f"remedy {remedy.name}: {remedy.words}"
        return cls(float(ratio), remedy.hidden, remedy.collectives_per_bucket, words)

    def with_wire_ratio(self, ratio: float) -> RemedyEffect:
        """The same remedy sending its bytes divided by ``ratio`` instead."""
        return replace(self, wire_ratio=ratio)


NO_EFFECT = RemedyEffect.of(BY_NAME[NO_REMEDY])


def collective_prices(
    profile: ComputeProfile,
    timeline: BucketTimeline,
    traffic: Traffic,
    pricing: Pricing,
    layout: Layout,
    remedy: RemedyEffect,
) -> BucketPrices:
    """Each bucket of ``timeline`` priced: its share of the gradient bytes divided by the
    remedy's wire ratio, in its collectives per bucket; a bucket of no bytes costs nothing;
    at one device nothing is sent."""
    k = len(timeline.share)
    point, lo, hi = np.zeros(k), np.zeros(k), np.zeros(k)
    if layout.world_size < 2:
        return BucketPrices(point, lo, hi, (ONE_DEVICE,))
    sent = np.flatnonzero(timeline.share > 0)
    if not sent.size:
        return BucketPrices(point, lo, hi, (NO_BYTES,))
    each = remedy.collectives_per_bucket
    message = timeline.share[sent] * profile.gradient_bytes / remedy.wire_ratio / each
    prices = pricing.price(message, traffic, layout)
    point[sent], lo[sent], hi[sent] = each * prices.point, each * prices.lo, each * prices.hi
    return BucketPrices(point, lo, hi, prices.bases, prices.unresolved)


def bucket_step_s(
    timeline: BucketTimeline, batch: int, compute_s: float, costs: np.ndarray, hidden: bool
) -> float:
    """One step of the bucket mechanism (commmodel.buckets.bucket_step) at one row: kappa 0,
    no remedy work, no host ceiling."""
    rows = timeline_rows(timeline, np.array([math.inf]))
    rows.hidden = np.array([bool(hidden)])
    one = np.array([1.0])
    step = bucket_step(
        rows, np.array([float(batch)]), np.array([compute_s]), costs[None, :], 0.0, one, one * 0
    )
    return float(step[0])


@dataclass(frozen=True)
class StepPrediction:
    """One configuration's step predicted: seconds, img/s, speed-up and efficiency over one
    device (its compute alone), each with its range, and what they rest on."""

    layout: Layout
    batch: int
    step_s: float
    step_lo_s: float
    step_hi_s: float
    img_s: float
    img_s_lo: float
    img_s_hi: float
    speedup: float
    speedup_lo: float
    speedup_hi: float
    efficiency: float
    efficiency_lo: float
    efficiency_hi: float
    collective_bases: tuple[str, ...]
    remedy: str
    overlap: str
    compute_source: str
    kind: str = KIND
    unresolved: str = ""  # why no number (every value NaN), and what would resolve it

    @property
    def resolved(self) -> bool:
        return not self.unresolved

    @property
    def basis(self) -> str:
        """Everything the numbers rest on, in one line."""
        parts = (*self.collective_bases, self.remedy, self.overlap, self.compute_source)
        return f"{self.kind}: " + "; ".join(parts)


def predict_step(
    profile: ComputeProfile,
    traffic: Traffic,
    pricing: Pricing,
    layout: Layout,
    remedy: RemedyEffect = NO_EFFECT,
    overlap: Overlap = Overlap.BUCKETS,
) -> StepPrediction:
    """The step of ``profile`` over ``layout``, its collectives ``traffic`` priced by
    ``pricing``, with ``remedy`` and ``overlap`` applied (module doc); a layout of more
    than MAX_DEVICES devices is refused."""
    check_layout(layout)
    timeline = overlapped(profile.timeline, overlap)
    prices = collective_prices(profile, timeline, traffic, pricing, layout, remedy)
    if prices.unresolved:
        return _not_resolved(profile, layout, prices, remedy, overlap)
    step = bucket_step_s(timeline, profile.batch, profile.step_s, prices.point, remedy.hidden)
    world = layout.world_size
    steps, speedups = [step], [world * profile.step_s / step]
    ranged = profile.lo != profile.hi or not (
        np.array_equal(prices.lo, prices.point) and np.array_equal(prices.hi, prices.point)
    )
    if ranged:
        steps, speedups = [], []
        for compute, costs in itertools.product((profile.lo, profile.hi), (prices.lo, prices.hi)):
            corner = bucket_step_s(timeline, profile.batch, compute, costs, remedy.hidden)
            steps.append(corner)
            speedups.append(world * compute / corner)
    speedup = world * profile.step_s / step
    images = world * profile.batch
    return StepPrediction(
        layout=layout,
        batch=profile.batch,
        step_s=step,
        step_lo_s=min(steps),
        step_hi_s=max(steps),
        img_s=images / step,
        img_s_lo=images / max(steps),
        img_s_hi=images / min(steps),
        speedup=speedup,
        speedup_lo=min(speedups),
        speedup_hi=max(speedups),
        efficiency=speedup / world,
        efficiency_lo=min(speedups) / world,
        efficiency_hi=max(speedups) / world,
        collective_bases=prices.bases,
        remedy=remedy.words,
        overlap=overlap.words(),
        compute_source=profile.source,
    )


def check_layout(layout: Layout) -> None:
    """A layout a prediction can stand for: 1 to MAX_DEVICES devices; else one line."""
    world = layout.world_size
    if not 1 <= world <= MAX_DEVICES:
        raise ValueError(
            f"layout: {_count(world)} devices in all (nodes {_count(layout.nodes)}, "
            f"devices_per_node {_count(layout.devices_per_node)}); allowed: 1 to "
            f"{MAX_DEVICES:,} (no cluster is larger)"
        )


def _count(number: int) -> str:
    """A whole number in words a line can hold, however many digits it has."""
    if abs(number) < 10**15:
        return f"{number:,}"
    return f"about 10^{int(abs(number).bit_length() * math.log10(2))}"


def _not_resolved(
    profile: ComputeProfile,
    layout: Layout,
    prices: BucketPrices,
    remedy: RemedyEffect,
    overlap: Overlap,
) -> StepPrediction:
    """A step with no number: a bucket's price needs a parameter its fit left open."""
    nan = math.nan
    return StepPrediction(
        layout=layout,
        batch=profile.batch,
        **dict.fromkeys(NUMBERS, nan),
        collective_bases=prices.bases,
        remedy=remedy.words,
        overlap=overlap.words(),
        compute_source=profile.source,
        unresolved="; ".join(prices.unresolved),
    )


# every number of a StepPrediction, each NaN where it is not resolved
NUMBERS = (
    "step_s",
    "step_lo_s",
    "step_hi_s",
    "img_s",
    "img_s_lo",
    "img_s_hi",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "efficiency",
    "efficiency_lo",
    "efficiency_hi",
)


def point_efficiency(
    profile: ComputeProfile,
    traffic: Traffic,
    pricing: Pricing,
    layout: Layout,
    remedy: RemedyEffect = NO_EFFECT,
    overlap: Overlap = Overlap.BUCKETS,
) -> float:
    """The one-device step over the predicted step, at the point values (NaN where the
    step is not resolved)."""
    step = predict_step(profile, traffic, pricing, layout, remedy, overlap).step_s
    return profile.step_s / step


def wire_ratio_for(
    profile: ComputeProfile,
    traffic: Traffic,
    pricing: Pricing,
    layout: Layout,
    remedy: RemedyEffect = NO_EFFECT,
    overlap: Overlap = Overlap.BUCKETS,
    target: float = TARGET_EFFICIENCY,
) -> tuple[float, str]:
    """The wire ratio the remedy must reach (the bytes divided by it, the latency kept) for
    ``target`` efficiency: 1 where already met; bisection on [1, MAX_WIRE_RATIO]; NaN and
    why where not, "not resolved" where a ratio tried needs a parameter left open."""

    def meets(ratio: float) -> bool:
        sent = remedy.with_wire_ratio(ratio)
        found = predict_step(profile, traffic, pricing, layout, sent, overlap)
        if not found.resolved:
            where = "" if ratio == 1.0 else f" at wire ratio {ratio:.3g}"
            raise _Unresolved(f"{NOT_RESOLVED}{where}: {found.unresolved}")
        return profile.step_s / found.step_s >= target

    try:
        return _bisect(meets)
    except _Unresolved as error:
        return math.nan, str(error)


class _Unresolved(Exception):
    """A ratio the search tried has no step: the search has no answer."""


def _bisect(meets: Callable[[float], bool]) -> tuple[float, str]:
    if meets(1.0):
        return 1.0, "already met uncompressed"
    if not meets(MAX_WIRE_RATIO):
        return math.nan, (
            f"not reachable by compression up to {MAX_WIRE_RATIO:.0f}x: the collectives' "
            "latency alone keeps the efficiency below the target"
        )
    low, high = 1.0, MAX_WIRE_RATIO
    while high / low > 1.001:
        middle = math.sqrt(low * high)
        low, high = (low, middle) if meets(middle) else (middle, high)
    return high, "bisection on the bytes sent (latency kept)"
