"""The published check's mechanism (analysis.answers.published_check): one step of a case
with the bucket model (commmodel.buckets), its efficiency against its baseline, a time to
train over batch phases, and the link rate a published figure implies.

A step: forward, backward with the gradient buckets ready at shares of it, each bucket's
collectives priced by the case's declared traffic (plan.traffic.seconds: a ring, sharded
parameter servers, ...) and served in order, optimizer; a delayed all-reduce runs behind
the next step (step = max(compute, the buckets' collectives)). The compute's shape is a
borrowed one-device profile (choose_profile), scaled to the case's one-device step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import brentq

from dpscale.analysis.laws.commmodel.buckets import BucketTimeline, bucket_step, timeline_rows
from dpscale.plan import traffic
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
    gradient_bytes: float
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
    link_kind: str = ""  # a key of ALPHA_S: rdma, tcp, nvlink
    assumptions: list[str] = field(default_factory=list)

    @property
    def world(self) -> int:
        return self.nodes * self.devices_per_node


def step_seconds(
    timeline: BucketTimeline,
    batch: int,
    compute_s: float,
    gradient_bytes: float,
    layout: tuple[int, int],
    beta: float,
    alpha: float,
    hidden: bool = False,
    declared: Traffic = RING,
) -> float:
    """One step over ``layout`` (nodes, devices per node): the bucket model with each
    bucket's collectives (its share of the bytes) priced by ``declared`` at ``beta`` bytes/s
    and ``alpha`` s per hop (plan.traffic.seconds)."""
    rows = timeline_rows(timeline, np.array([math.inf]))
    rows.hidden = np.array([bool(hidden)])
    costs = np.zeros(len(timeline.share))
    nodes, devices_per_node = layout
    if nodes * devices_per_node > 1:
        sent = timeline.share > 0
        message = timeline.share[sent] * gradient_bytes
        costs[sent] = traffic.seconds(declared, message, nodes, devices_per_node, beta, alpha)
    one = np.array([1.0])
    step = bucket_step(
        rows, np.array([float(batch)]), np.array([compute_s]), costs[None, :], 0.0, one, one * 0
    )
    return float(step[0])


def after_backward(timeline: BucketTimeline) -> BucketTimeline:
    """The same compute with one bucket of all the bytes, ready at the backward's end."""
    return replace(timeline, ready=np.array([1.0]), share=np.array([1.0]))


def case_step(timeline: BucketTimeline, setup: Setup, batch: int, baseline: bool = False):
    """The case's step at ``batch`` over its layout, or over its baseline's (``baseline``:
    one node of ``base_world`` devices); ``timeline`` already in the case's overlap."""
    layout, beta, alpha, declared = (
        ((1, setup.base_world), setup.base_beta, setup.base_alpha, setup.base_traffic)
        if baseline
        else ((setup.nodes, setup.devices_per_node), setup.beta, setup.alpha, setup.traffic)
    )
    compute = batch / setup.img_s
    return step_seconds(
        timeline, batch, compute, setup.gradient_bytes, layout, beta, alpha, setup.hidden, declared
    )


def case_timeline(timeline: BucketTimeline, setup: Setup) -> BucketTimeline:
    return after_backward(timeline) if setup.after_backward else timeline


def efficiency(timeline: BucketTimeline, setup: Setup, batch: int | None = None) -> float:
    """Throughput at ``world`` over ``world / base_world`` times the baseline's (weak
    scaling: the per-device batch fixed)."""
    batch = batch or setup.batch
    timeline = case_timeline(timeline, setup)
    step = case_step(timeline, setup, batch)
    return case_step(timeline, setup, batch, baseline=True) / step


def train_time(timeline: BucketTimeline, setup: Setup) -> float:
    """A training's time, up to a constant: each phase's epochs x seconds per image."""
    timeline = case_timeline(timeline, setup)
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
