"""The published check's mechanism (analysis.answers.published_check): one step of a case
by the prediction engine (laws.engine), its efficiency against its baseline, a time to
train over batch phases, and the link rate a published figure implies.

A step: forward, backward with the gradient buckets ready at shares of it (or one bucket
after the backward: the case's overlap), each bucket's collectives priced by the case's
declared traffic over its nominal link (pricing.LinkPricing: plan.traffic.seconds) and
served in order, optimizer; the case's wire precision divides its fp32 gradient bytes and
a delayed all-reduce runs behind the next step (engine.RemedyEffect). The compute's shape
is a borrowed one-device profile (choose_profile), scaled to the case's one-device step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from scipy.optimize import brentq

from dpscale.analysis.laws.commmodel.buckets import BucketTimeline
from dpscale.analysis.laws.engine import (
    ComputeProfile,
    Overlap,
    RemedyEffect,
    predict_step,
)
from dpscale.analysis.laws.pricing import LinkPricing
from dpscale.plan.layout import Layout
from dpscale.plan.link import Link
from dpscale.plan.traffic import RingAllReduce, Traffic

# Trainable parameters (1000 classes). ResNet-18/50/101: torchvision, as shared/BRIEF.md
# (each agrees with the H200 profiles' bucket bytes / 4). ResNet-152 60,192,808 and
# VGG-16 138,357,544: torchvision's model documentation. Inception V3: 23.9 M, the Keras
# Applications table (keras.io/api/applications, "Parameters" column, rounded there to 0.1 M;
# the rounding moves its gradient bytes by under 0.5%).
PARAMETERS = {
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
    "inception3": 23_900_000,
    "vgg16": 138_357_544,
}
FP32_BYTES = 4

# Per ring step latency (alpha), seconds, by the kind of link; chosen from the physics before
# any error was looked at, never tuned: RDMA (InfiniBand, RoCE): about 1-2 us of wire and
# NIC plus NCCL's per-step protocol overhead of a few us -> 5 us. TCP Ethernet: the kernel's
# socket path costs tens of us per message round -> 30 us. NVLink inside a node: a few us of
# kernel-to-kernel signalling -> 3 us. A kind without one (pcie) is not predicted.
ALPHA_S = {"rdma": 5e-6, "tcp": 30e-6, "nvlink": 3e-6}
LINK_KIND_WORDS = {"tcp": "TCP Ethernet", "rdma": "RDMA (InfiniBand, RoCE)", "nvlink": "NVLink"}
RING = RingAllReduce()  # what a case declares unless it says otherwise
NOMINAL = "the case's nominal rate"  # where a case's link comes from
HIDDEN = ", all-reduced behind the next step (delayed)"


@dataclass(frozen=True)
class Profile:
    """One timeline of the profile table: its shape, the words naming it in each row, the
    model it timed (as the cases spell one: resnet50) and its precision ('' unknown)."""

    timeline: BucketTimeline
    words: str
    model: str
    precision: str = ""


# A model the profile table did not time borrows the shape of the nearest one it did: the
# same family first (ResNet-152's bottleneck stages are ResNet-101's, deeper), else ResNet-50.
NEAREST_MODELS = {"resnet152": ("resnet101", "resnet50"), "resnet101": ("resnet50",)}
FALLBACK_MODEL = "resnet50"
# a case's compute_precision as the profile table names one: mixed precision (AMP) as
# amp_bf16, the nearest a one-GPU bf16 profile comes to it; TF32 computes as fp32 does
PROFILE_PRECISION = {"fp32": "fp32", "tf32": "fp32", "amp": "amp_bf16"}


def choose_profile(profiles: Sequence[Profile], model: str, compute_precision: str) -> Profile:
    """The model at its precision; else that model at another precision; else the nearest
    model timed (NEAREST_MODELS, then ResNet-50, then the table's first)."""
    if not profiles:
        raise ValueError("no profile to borrow a compute shape from")
    order = [model, *NEAREST_MODELS.get(model, ()), FALLBACK_MODEL]
    for name in order:
        timed = [profile for profile in profiles if profile.model == name]
        if timed:
            wanted = PROFILE_PRECISION[compute_precision]
            return next((p for p in timed if p.precision == wanted), timed[0])
    return profiles[0]


@dataclass
class Setup:
    """What one case's prediction needs, and every assumption it took, in words."""

    batch: int
    img_s: float
    gradient_bytes: float  # the backward pass's (fp32) gradient bytes
    nodes: int
    devices_per_node: int
    beta: float  # bytes/s of the slowest hop
    alpha: float
    hidden: bool  # delayed: the collectives run behind the next step
    link: str
    compute_source: str
    traffic: Traffic = RING
    base_world: int = 1  # the published baseline's devices (1, or one node)
    base_beta: float = math.inf
    base_alpha: float = 0.0
    base_traffic: Traffic = RING
    after_backward: bool = False  # one all-reduce of all bytes after the backward pass
    phases: tuple[tuple[float, int], ...] = ()  # (epochs, per-device batch) of a training
    own_img_s: bool = False  # the one-device img/s published in the case's own source
    wire_ratio: float = 1.0  # fp32 gradient bytes per byte on the wire (wire_precision)
    link_kind: str = ""  # a key of ALPHA_S: rdma, tcp, nvlink
    assumptions: list[str] = field(default_factory=list)

    @property
    def world(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def remedy(self) -> RemedyEffect:
        """What the case does to its collectives, from its typed fields: its wire precision's
        bytes (a wire ratio over fp32 gradients) and its delayed all-reduce (hidden)."""
        words = "gradients on the wire at their fp32 bytes"
        if self.wire_ratio != 1:
            words = f"gradients on the wire at 1/{self.wire_ratio:g} of their fp32 bytes"
        return RemedyEffect(
            self.wire_ratio, self.hidden, 1, words + (HIDDEN if self.hidden else "")
        )

    @property
    def overlap(self) -> Overlap:
        return Overlap.AFTER_BACKWARD if self.after_backward else Overlap.BUCKETS

    def over(self, baseline: bool) -> tuple[Layout, Traffic, LinkPricing]:
        """The case's layout, traffic and nominal link, or its baseline's (one node of
        ``base_world`` devices on its own link and traffic)."""
        if baseline:
            link = Link(f"{self.link} baseline", self.base_beta, self.base_alpha, source=NOMINAL)
            return Layout(1, self.base_world), self.base_traffic, LinkPricing(link)
        link = Link(self.link, self.beta, self.alpha, source=NOMINAL)
        return Layout(self.nodes, self.devices_per_node), self.traffic, LinkPricing(link)


def case_step(timeline: BucketTimeline, setup: Setup, batch: int, baseline: bool = False) -> float:
    """The case's step at ``batch`` over its layout, or over its baseline's (``baseline``),
    as the prediction engine gives it (laws.engine.predict_step: the compute a borrowed
    ``timeline`` scaled to the case's one-device step, its overlap and remedy applied)."""
    compute = ComputeProfile.point(
        timeline, batch, batch / setup.img_s, setup.gradient_bytes, setup.compute_source
    )
    layout, declared, pricing = setup.over(baseline)
    return predict_step(compute, declared, pricing, layout, setup.remedy, setup.overlap).step_s


def efficiency(timeline: BucketTimeline, setup: Setup, batch: int | None = None) -> float:
    """Throughput at ``world`` over ``world / base_world`` times the baseline's (weak
    scaling: the per-device batch fixed)."""
    batch = batch or setup.batch
    step = case_step(timeline, setup, batch)
    return case_step(timeline, setup, batch, baseline=True) / step


def train_time(timeline: BucketTimeline, setup: Setup) -> float:
    """A training's time, up to a constant: each phase's epochs x seconds per image."""
    return sum(epochs * case_step(timeline, setup, batch) / batch for epochs, batch in setup.phases)


def figure_at(
    timeline: BucketTimeline, setup: Setup, reference: Setup | None = None
) -> Callable[[float], float]:
    """The case's predicted figure as a function of its link rate (bytes/s): its efficiency,
    or its time over ``reference``'s where one is given (both on ``timeline``)."""
    if reference is None:
        return lambda rate: efficiency(timeline, replace(setup, beta=rate))
    return lambda rate: (
        train_time(timeline, replace(setup, beta=rate)) / train_time(timeline, reference)
    )


# the link rates searched for the one a published figure implies: 1 MB/s to 100 x nominal
IMPLIED_LOW_BYTES_S, IMPLIED_HIGH_FACTOR = 1e6, 100.0


def implied_rate(predict: Callable[[float], float], target: float, nominal: float) -> float:
    """The link rate (bytes/s) at which ``predict(rate)`` equals ``target``: what the
    published figure says the link delivered if every other input holds. NaN where no rate
    between 1 MB/s and 100 x ``nominal`` does (the loss is not the link's, or is more than
    the link can cause)."""
    if math.isnan(target):
        return math.nan
    low, high = IMPLIED_LOW_BYTES_S, nominal * IMPLIED_HIGH_FACTOR
    if (predict(low) - target) * (predict(high) - target) > 0:
        return math.nan
    return float(brentq(lambda rate: predict(rate) - target, low, high, xtol=1.0, rtol=1e-6))
