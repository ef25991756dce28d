"""Scale-out predicted for published multi-GPU results (studies/published/cases.yaml, issue
50 item 4), and the error against what was published.

Each case is predicted with the bucket mechanism (commmodel.buckets): forward, backward with
the gradient buckets ready at shares of it, the buckets' all-reduces served in order,
optimizer; a delayed (double-buffered) all-reduce runs behind the next step. Its inputs:

- compute: the shape (forward share, optimizer share, buckets' ready and byte shares) of a
  one-GPU torch-ddp bucket timeline (the profile table, config published_cases.profile: one
  timeline per model and precision), BORROWED for every case, scaled to the case's
  one-device step (per-device batch / one-device img/s): the case's own model where the
  table has it, else the nearest one timed (choose_profile), at its precision where timed.
  A case without a one-device throughput borrows the one its own assumptions name, or is
  not predicted;
- gradient bytes: the model's parameters x 4 (fp32), x 2 where the case all-reduces fp16;
- link: the nominal rate as a ring (plan.ring) over all devices, the inter-node rate as the
  ring's bandwidth (one NIC per node carries the ring's inter-node hop), a per-step latency
  per kind of link (ALPHA_S). One-node cases: a nominal NVLink rate (INTRA_NODE).
  tf_cnn_benchmarks' distributed_replicated cases: sharded parameter servers on the worker
  machines, as many as the case states (server_factor), instead of the ring.

Each compared row also gives the link rate its published figure implies (implied_rate): the
rate at which the prediction would meet it, every other input held. A diagnostic of what the
nominal rate misses, never an input to a prediction.

The ring law is used directly, not a CollectiveCurve (laws.cluster_link): no case published a
collectives log, and a curve's words speak of one. Every number here is an extrapolation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from dpscale.analysis.answers.cluster_prediction import KIND
from dpscale.analysis.laws.commmodel.buckets import BucketTimeline, bucket_step, timeline_rows
from dpscale.plan import ring

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
FP32_BYTES, FP16_BYTES = ring.FP32_BYTES, ring.FP16_BYTES

# Per ring step latency (alpha), seconds, by the kind of link; chosen from the physics before
# any error was looked at, never tuned: RDMA (InfiniBand, RoCE): about 1-2 us of wire and
# NIC plus NCCL's per-step protocol overhead of a few us -> 5 us. TCP Ethernet: the kernel's
# socket path costs tens of us per message round -> 30 us. NVLink inside a node: a few us of
# kernel-to-kernel signalling -> 3 us.
ALPHA_S = {"rdma": 5e-6, "tcp": 30e-6, "nvlink": 3e-6}

# One node's NVLink, the ring's bandwidth per direction (bytes/s): the links a GPU has times
# each link's rate, NCCL running one ring per link. Nominal numbers, never measured here.
INTRA_NODE = {
    # DGX-1 / p3.16xlarge V100: 6 NVLink 2.0 links x 25 GB/s
    "V100": (150e9, "NVLink 2.0, 6 links x 25 GB/s = 150 GB/s per direction (DGX-1V nominal)"),
    # DGX A100: 12 NVLink 3.0 links x 25 GB/s through NVSwitch
    "A100": (300e9, "NVLink 3.0 via NVSwitch, 12 x 25 GB/s = 300 GB/s per direction (nominal)"),
    # DGX-1 / Big Basin P100: 4 NVLink 1.0 links x 20 GB/s
    "P100": (80e9, "NVLink 1.0, 4 links x 20 GB/s = 80 GB/s per direction (DGX-1 P100 nominal)"),
}

# A case with no one-device throughput of its own borrows the one its assumptions name:
# case id -> the case whose one-device img/s it takes.
BORROWED_FROM = {
    "chainermn-mn1-ibfdr-32": "tf-dgx1-p100-8-resnet50",
    "chainermn-mn1-10gbe-32": "tf-dgx1-p100-8-resnet50",
    "chainermn-mn1-10gbe-dbuf-fp16-32": "tf-dgx1-p100-8-resnet50",
    "chainermn-aws-p3-25g-32": "dle-pyt-dgx1v-fp32-8",
    "goyal-bigbasin-256-resnet50": "tf-dgx1-p100-8-resnet50",
}
# MN-1's recipe: 30 epochs at per-GPU batch 64, then 60 at 128 (the cases' batch note)
MN1_PHASES = ((30, 64), (60, 128))
MN1_REFERENCE = "chainermn-mn1-ibfdr-32"
# ChainerMN's multi-node optimizer all-reduces every gradient after loss.backward() returns
# (chainer/chainer, chainermn/optimizers.py, _MultiNodeOptimizer.update: backward, then
# communicator.allreduce_grad(target), then the optimizer): no bucket overlaps the backward.
AFTER_BACKWARD = (
    "ChainerMN all-reduces all gradients after the backward pass (chainermn/optimizers.py "
    "_MultiNodeOptimizer.update): one bucket of all the bytes, ready at the backward's end"
)


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


def case_precision(case: Mapping[str, Any]) -> str:
    """The precision a case trains in, as the profile table names one: mixed precision
    (AMP) as amp_bf16, the nearest a one-GPU bf16 profile comes to it; else fp32 (TF32 and
    'fp32 compute, fp16 all-reduce' compute in fp32)."""
    words = _text(case.get("precision"))
    return "amp_bf16" if "amp" in words or "mixed" in words else "fp32"


def choose_profile(profiles: Sequence[Profile], case: Mapping[str, Any]) -> Profile:
    """The case's model at its precision; else that model at another precision; else the
    nearest model timed (NEAREST_MODELS, then ResNet-50, then the table's first)."""
    if not profiles:
        raise ValueError("no profile to borrow a compute shape from")
    order = [case["model"], *NEAREST_MODELS.get(case["model"], ()), FALLBACK_MODEL]
    for model in order:
        timed = [profile for profile in profiles if profile.model == model]
        if timed:
            wanted = case_precision(case)
            return next((p for p in timed if p.precision == wanted), timed[0])
    return profiles[0]


@dataclass
class Setup:
    """What one case's prediction needs, and every assumption it took, in words."""

    batch: int
    img_s: float
    gradient_bytes: float
    world: int
    beta: float  # bytes/s of the ring's slowest hop
    alpha: float
    hidden: bool
    link: str
    compute_source: str
    base_world: int = 1  # the published baseline's devices (1, or one node)
    base_beta: float = math.inf
    base_alpha: float = 0.0
    after_backward: bool = False  # one all-reduce of all bytes after the backward pass
    # (nodes, parameter servers) where sharded parameter servers, not a ring, carry the
    # gradients (distributed_replicated); None for a ring
    servers: tuple[int, int] | None = None
    link_kind: str = ""  # a key of ALPHA_S: rdma, tcp, nvlink
    assumptions: list[str] = field(default_factory=list)


def server_factor(nodes: int, servers: int) -> float:
    """Bytes through the busiest node's NIC, each direction, per gradient byte, when
    ``servers`` parameter-server shards run on ``servers`` of ``nodes`` worker machines and
    each machine sums its GPUs' gradients first: a machine holding a shard takes the other
    machines' gradients for it and returns the update ((nodes - 1) / servers), and pushes
    and pulls the shards it does not hold ((servers - 1) / servers); a machine without one
    moves the whole gradient once. Equal counts give the ring's 2(N-1)/N over the nodes."""
    return max((nodes + servers - 2) / servers, 1.0)


def parameter_server_seconds(
    message_bytes: Any, nodes: int, servers: int, beta: float, alpha: float
) -> Any:
    """One bucket pushed to its shards and pulled back: the busiest NIC's bytes at ``beta``,
    one ``alpha`` each way."""
    return server_factor(nodes, servers) * message_bytes / beta + 2 * alpha


def step_seconds(
    timeline: BucketTimeline,
    batch: int,
    compute_s: float,
    gradient_bytes: float,
    world: int,
    beta: float,
    alpha: float,
    hidden: bool = False,
    servers: tuple[int, int] | None = None,
) -> float:
    """One step at ``world`` devices: the bucket model with each bucket's ring all-reduce
    (its share of the bytes) at nominal ``beta`` bytes/s and ``alpha`` s per ring step, or
    its parameter-server round trip where ``servers`` gives (nodes, servers)."""
    rows = timeline_rows(timeline, np.array([math.inf]))
    rows.hidden = np.array([bool(hidden)])
    costs = np.zeros(len(timeline.share))
    if world > 1:
        sent = timeline.share > 0
        message = timeline.share[sent] * gradient_bytes
        costs[sent] = (
            ring.ring_allreduce_seconds(message, world, beta, alpha)
            if servers is None
            else parameter_server_seconds(message, *servers, beta, alpha)
        )
    one = np.array([1.0])
    step = bucket_step(
        rows, np.array([float(batch)]), np.array([compute_s]), costs[None, :], 0.0, one, one * 0
    )
    return float(step[0])


def after_backward(timeline: BucketTimeline) -> BucketTimeline:
    """The same compute with one bucket of all the bytes, ready at the backward's end."""
    return replace(timeline, ready=np.array([1.0]), share=np.array([1.0]))


def _case_step(timeline: BucketTimeline, setup: Setup, batch: int, baseline: bool = False):
    """The case's step at ``batch`` over its ring, or over its baseline's (``baseline``);
    ``timeline`` already in the case's overlap (after_backward where it applies)."""
    world, beta, alpha, servers = (
        (setup.base_world, setup.base_beta, setup.base_alpha, None)
        if baseline
        else (setup.world, setup.beta, setup.alpha, setup.servers)
    )
    compute = batch / setup.img_s
    return step_seconds(
        timeline, batch, compute, setup.gradient_bytes, world, beta, alpha, setup.hidden, servers
    )


def _case_timeline(timeline: BucketTimeline, setup: Setup) -> BucketTimeline:
    return after_backward(timeline) if setup.after_backward else timeline


def efficiency(timeline: BucketTimeline, setup: Setup, batch: int | None = None) -> float:
    """Throughput at ``world`` over ``world / base_world`` times the baseline's (weak
    scaling: the per-device batch fixed)."""
    batch = batch or setup.batch
    timeline = _case_timeline(timeline, setup)
    step = _case_step(timeline, setup, batch)
    return _case_step(timeline, setup, batch, baseline=True) / step


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


def _text(value: Any) -> str:
    return str(value or "").lower()


def _intra(case: Mapping[str, Any]) -> tuple[float, str] | None:
    gpu = str(case.get("gpu", ""))
    for name, (rate, words) in INTRA_NODE.items():
        if name in gpu:
            return rate, words
    return None


def published_efficiency(case: Mapping[str, Any], img_s: float | None) -> tuple[float, str]:
    """The published figure as an efficiency (0-1), and how it was read; NaN where none."""
    published = case["published"]
    kind, value, n = published["kind"], published["value"], case["devices_total"]
    if kind == "scaling_efficiency":
        return value / 100, "published scaling efficiency"
    if kind == "speedup":
        return value / n, f"published speed-up {value:g} / {n} devices"
    if kind == "throughput" and img_s:
        return value / (n * img_s), f"published {value:g} img/s / ({n} x {img_s:g} img/s)"
    derived = case.get("derived") or {}
    if "efficiency_percent_vs_8gpu" in derived:
        return derived["efficiency_percent_vs_8gpu"] / 100, "derived in cases.yaml (secondary)"
    return math.nan, "no published efficiency"


def setup_for(
    case: Mapping[str, Any],
    by_id: Mapping[str, Mapping[str, Any]],
    profile: Profile,
) -> Setup | str:
    """The case's inputs, or the reason it is not predicted; ``profile`` is the timeline it
    borrows (choose_profile)."""
    shape, shape_model = profile.words, profile.model
    framework = _text(case.get("framework"))
    if "local_parameter_device=cpu" in framework:
        return (
            "CPU parameter server (variable_update=parameter_server): gradients go to the "
            "host over PCIe, not a ring all-reduce of buckets; the mechanism does not apply"
        )
    model = case["model"]
    if model not in PARAMETERS:
        return f"no parameter count for model {model}"
    assumptions = [shape + ", scaled to this case's one-device step"]
    single = case.get("single_device") or {}
    if single.get("img_s"):
        img_s = float(single["img_s"])
        if single.get("published_in_same_source"):
            source = f"one-device {img_s:g} img/s published in the same source; {shape}"
        else:
            source = f"one-device {img_s:g} img/s borrowed ({single.get('from', '')}); {shape}"
    elif case["id"] in BORROWED_FROM:
        lender = by_id[BORROWED_FROM[case["id"]]]
        img_s = float(lender["single_device"]["img_s"])
        source = (
            f"one-device {img_s:g} img/s borrowed from case {lender['id']} ({lender['gpu']}, "
            f"{lender['framework'].split(',')[0]}, batch {lender['per_device_batch']}), as "
            f"this case's assumptions name; {shape}"
        )
    else:
        return (
            "no one-device throughput: none published for this GPU and model, and the case's "
            "assumptions name none to borrow"
        )
    if model != shape_model:
        assumptions.append(
            f"{model} takes {shape_model}'s compute shape (bucket ready and byte shares) with "
            "its own gradient bytes"
        )
    if profile.precision and profile.precision != case_precision(case):
        assumptions.append(
            f"the case trains in {case.get('precision')}; the profile timed {profile.precision}"
        )
    if single.get("img_s") is None or not single.get("published_in_same_source"):
        assumptions.append(f"one-device throughput borrowed: {img_s:g} img/s (other run)")
    batch = int(case["per_device_batch"])
    lender_batch = by_id.get(BORROWED_FROM.get(case["id"], ""), {}).get("per_device_batch")
    if single.get("img_s") is None and lender_batch not in (None, batch):
        assumptions.append(
            f"the borrowed img/s taken at this case's batch {batch} (measured at {lender_batch})"
        )
    fp16 = "fp16 all-reduce" in _text(case.get("precision")) or any(
        words in framework for words in ("fp16 all-reduce", "float16", "fp16 allreduce")
    )
    hidden = "double_buffering=true" in framework or (
        "double buffering" in framework and "no double buffering" not in framework
    )
    per_value = FP16_BYTES if fp16 else FP32_BYTES
    gradient = PARAMETERS[model] * per_value
    assumptions.append(
        f"gradient bytes {PARAMETERS[model]:,} parameters x {per_value} "
        f"({ring.VALUE_TYPES[per_value]} all-reduce) = {gradient / 1e6:.1f} MB"
    )
    if "amp" in _text(case.get("precision")):
        assumptions.append(
            "AMP: gradients taken as fp32 (PyTorch's native AMP keeps fp32 parameters, so DDP "
            "reduces fp32 gradients); the case's own note assumes fp16"
        )
    if hidden:
        assumptions.append(
            "double buffering = the delayed all-reduce behind the next step: "
            "step = max(compute, sum of the buckets' all-reduces)"
        )
    world = int(case["devices_total"])
    intra = _intra(case)
    # tf_cnn_benchmarks' sharded parameter servers across nodes, not a ring
    sharded = "distributed_replicated" in framework and case["nodes"] > 1
    if case["nodes"] > 1:
        inter = case["inter_node_link"]
        rdma = inter.get("rdma") is True
        kind = "rdma" if rdma else "tcp"
        beta = float(inter["nominal_gbit_s"]) * 1e9 / 8
        alpha = ALPHA_S[kind]
        link_kind = kind
        link = inter["name"]
        over, step = (
            ("parameter servers", "push or pull")
            if sharded
            else (f"ring over {world} devices", "ring step")
        )
        assumptions.append(
            f"{over} at the nominal {inter['nominal_gbit_s']:g} Gbit/s "
            f"(one NIC per node carries the inter-node hop), alpha {alpha * 1e6:g} us per "
            f"{step} ({'RDMA' if rdma else 'TCP, RDMA not stated or absent'})"
        )
    elif "nvlink" in _text(case.get("intra_node_link")) and intra:
        beta, words = intra
        alpha = ALPHA_S["nvlink"]
        link_kind = "nvlink"
        link = "NVLink (one node)"
        assumptions.append(f"ring over {world} devices, {words}, alpha {alpha * 1e6:g} us")
    else:
        return f"one node and no nominal rate assumed for its link ({case.get('intra_node_link')})"
    setup = Setup(batch, img_s, gradient, world, beta, alpha, hidden, link, source)
    setup.link_kind = link_kind
    if sharded:
        setup.servers = (int(case["nodes"]), int(case.get("parameter_servers") or case["nodes"]))
        assumptions.append(_servers_words(*setup.servers))
    if "chainermn" in framework and not hidden:
        setup.after_backward = True
        assumptions.append(AFTER_BACKWARD)
    relative = _text(case["published"].get("relative_to"))
    if case["nodes"] > 1 and ("8 gpus" in relative or "8-gpu" in relative):
        if intra is None:
            return "baseline is one node, and no NVLink rate is assumed for its GPU"
        setup.base_world = int(case["devices_per_node"])
        setup.base_beta, words = intra
        setup.base_alpha = ALPHA_S["nvlink"]
        assumptions.append(f"baseline one node of {setup.base_world} on {words}")
    setup.assumptions = assumptions
    return setup


def _servers_words(nodes: int, servers: int) -> str:
    factor = server_factor(nodes, servers)
    return (
        f"parameter servers, not a ring (distributed_replicated): {servers} shards on {servers} "
        f"of the {nodes} worker machines, each machine summing its GPUs' gradients first; the "
        f"busiest NIC moves {factor:.2f} x each bucket's bytes each way at the nominal rate "
        f"(a ring over the {nodes} nodes: {ring.ring_factor(nodes):.2f} x)"
    )


def source_words(origin: Mapping[str, Any]) -> str:
    """Where the published figure is: its URL, and the repository file at its commit."""
    parts = [origin.get("url", "")]
    if origin.get("repository") and origin.get("commit"):
        path = str(origin.get("path", "")).split(" ")[0]
        parts.append(f"{origin['repository']}:{path}@{str(origin['commit'])[:12]}")
    return " ".join(part for part in parts if part)


def _mn1_time(timeline: BucketTimeline, setup: Setup) -> float:
    """MN-1's training time, up to a constant: each phase's epochs x seconds per image."""
    timeline = _case_timeline(timeline, setup)
    return sum(epochs * _case_step(timeline, setup, batch) / batch for epochs, batch in MN1_PHASES)


def basis(setup: Setup | str) -> str:
    """What a row's predicted number rests on, in words that say it is extrapolated."""
    if isinstance(setup, str):
        return "not predicted"
    own = "published in the same source" in setup.compute_source
    throughput = "" if own else " and one-device img/s"
    return f"{KIND}: borrowed compute profile{throughput}, nominal link"


def check(cases: Sequence[Mapping[str, Any]], profiles: Sequence[Profile]) -> pd.DataFrame:
    """One row per case: predicted and published, the error, what the prediction rests on
    (``basis``) and every assumption; each case borrows its profile (choose_profile)."""
    by_id = {case["id"]: case for case in cases}
    chosen = {case["id"]: choose_profile(profiles, case) for case in cases}
    setups = {case["id"]: setup_for(case, by_id, chosen[case["id"]]) for case in cases}
    rows = []
    for case in cases:
        setup = setups[case["id"]]
        timeline = chosen[case["id"]].timeline
        source = source_words(case["source"])
        row: dict[str, Any] = {
            "id": case["id"],
            "model": case["model"],
            "devices": (
                f"{case['devices_total']} {case['gpu']} "
                f"({case['devices_per_node']} per node, {case['nodes']} nodes)"
            ),
            "link": case["inter_node_link"]["name"],
            "metric": "",
            "predicted": math.nan,
            "published": math.nan,
            "error_points": math.nan,
            "error_pct": math.nan,
            "implied_gbit_s": math.nan,
            "implied_pct_of_nominal": math.nan,
            "link_kind": "",
            "kind": KIND,
            "basis": basis(setup),
            "compute_source": "",
            "assumptions": "; ".join(str(a) for a in case.get("assumptions", [])),
            "status": "not predicted",
            "reason": "",
            "source": source,
        }
        if isinstance(setup, str):
            row["reason"] = setup
            rows.append(row)
            continue
        own = " | ".join(setup.assumptions)
        row.update(
            link=setup.link,
            compute_source=setup.compute_source,
            assumptions=own + " || case: " + row["assumptions"],
            status="predicted",
            link_kind=setup.link_kind,
        )
        if case["id"].startswith("chainermn-mn1"):
            reference = setups[MN1_REFERENCE]
            predicted_eff = efficiency(timeline, setup)
            if case["id"] == MN1_REFERENCE or isinstance(reference, str):
                row.update(
                    metric="efficiency vs 32 x 1 GPU (batch 64)",
                    predicted=100 * predicted_eff,
                    status="predicted, nothing published to compare (the ratios' reference)",
                )
            else:
                ratio = _mn1_time(timeline, setup) / _mn1_time(timeline, reference)
                published = case["published"]["value"] / by_id[MN1_REFERENCE]["published"]["value"]
                row.update(
                    metric="time ratio over InfiniBand FDR (30 epochs at b64, 60 at b128)",
                    predicted=ratio,
                    published=published,
                    error_pct=100 * (ratio - published) / published,
                    **_implied(figure_at(timeline, setup, reference), published, setup.beta),
                )
            rows.append(row)
            continue
        img_s = (case.get("single_device") or {}).get("img_s")
        published, how = published_efficiency(case, img_s)
        predicted = efficiency(timeline, setup)
        row.update(
            metric=f"scaling efficiency % ({how})",
            predicted=100 * predicted,
            published=100 * published,
            error_points=100 * (predicted - published),
            **_implied(figure_at(timeline, setup), published, setup.beta),
        )
        if case.get("confidence", "").startswith("secondary"):
            row["status"] = "predicted (published figure from secondary sources)"
        rows.append(row)
    return pd.DataFrame(rows)


def figure_at(
    timeline: BucketTimeline, setup: Setup, reference: Setup | None = None
) -> Callable[[float], float]:
    """The case's predicted figure as a function of its link rate (bytes/s): its efficiency,
    or its MN-1 time ratio over ``reference`` where one is given."""
    if reference is None:
        return lambda rate: efficiency(timeline, replace(setup, beta=rate))
    return lambda rate: (
        _mn1_time(timeline, replace(setup, beta=rate)) / _mn1_time(timeline, reference)
    )


def _implied(predict: Callable[[float], float], target: float, nominal: float) -> dict:
    """A row's implied link rate in Gbit/s and as a percent of its nominal rate."""
    rate = implied_rate(predict, target, nominal)
    return {"implied_gbit_s": rate * 8 / 1e9, "implied_pct_of_nominal": 100 * rate / nominal}


def summary(table: pd.DataFrame) -> dict[str, Any]:
    """Median and max absolute error in efficiency points over the predicted efficiency
    cases; the ratio errors; counts of cases and of links."""
    points = table.dropna(subset=["error_points"])
    ratios = table.dropna(subset=["error_pct"])
    predicted = table[table["status"].str.startswith("predicted")]
    worst = points.loc[points["error_points"].abs().idxmax()] if len(points) else None
    return {
        "efficiency_cases": len(points),
        "median_abs_error_points": float(points["error_points"].abs().median()),
        "max_abs_error_points": float(points["error_points"].abs().max()),
        "max_case": None if worst is None else worst["id"],
        "median_abs_error_points_primary": float(
            points.loc[points["status"] == "predicted", "error_points"].abs().median()
        ),
        "ratio_errors_pct": dict(zip(ratios["id"], ratios["error_pct"].round(1), strict=True)),
        "predicted_cases": len(predicted),
        "not_predicted": len(table) - len(predicted),
        "links_count": int(predicted["link"].nunique()),
        "links": sorted(predicted["link"].unique()),
        "implied_pct_of_nominal": implied_ranges(table),
    }


def implied_ranges(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per kind of link: how many cases imply a rate, and the lowest, highest and median
    implied rate as a percent of nominal."""
    implied = table.dropna(subset=["implied_pct_of_nominal"])
    return {
        kind: {
            "cases": len(group),
            "low": float(group["implied_pct_of_nominal"].min()),
            "high": float(group["implied_pct_of_nominal"].max()),
            "median": float(group["implied_pct_of_nominal"].median()),
        }
        for kind, group in implied.groupby("link_kind")
    }


LINK_KIND_WORDS = {"tcp": "TCP Ethernet", "rdma": "RDMA (InfiniBand, RoCE)", "nvlink": "NVLink"}


def implied_line(ranges: Mapping[str, Mapping[str, float]]) -> str:
    """One sentence: the link rate the published figures imply, per kind of link."""
    parts = [
        f"{LINK_KIND_WORDS.get(kind, kind)} {found['low']:.0f}-{found['high']:.0f}% of "
        f"nominal ({found['cases']:d} cases, median {found['median']:.0f}%)"
        for kind, found in ranges.items()
    ]
    return (
        "The link rate each published figure implies (the rate at which its prediction meets "
        "it, every other input held; a diagnostic, not a prediction): "
        + "; ".join(parts)
        + ". A case far below its nominal rate lost more than the modelled link explains "
        "(a transport below line rate, or a loss that is not the link's: one node's NVLink "
        "cases imply a few % of nominal); a cluster's own nccl-tests log replaces the nominal "
        "rate where it exists."
    )


# Issue 50's targets for the published check: the median and the largest absolute error in
# efficiency points, each time ratio's error in %, and how many cases over how many links.
TARGET_MEDIAN_POINTS, TARGET_MAX_POINTS, TARGET_RATIO_PCT = 10.0, 20.0, 15.0
TARGET_CASES, TARGET_LINKS = 8, 3


# why the published check's numbers carry no interval (what would give them one)
NO_INTERVAL = (
    "the published figures, the borrowed one-device throughputs and the nominal link rates "
    "come without a spread, and the borrowed shape's own interval is under 1% (a published "
    "spread, or the case's own link log and one-device runs, would give one)"
)


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def _row_source(table: pd.DataFrame, case_id: str) -> str:
    return str(table.loc[table["id"] == case_id, "source"].iloc[0])


def summary_lines(table: pd.DataFrame, profile: str = "") -> list[str]:
    """The check in sentences, each number beside its source and the target it answers,
    every one said to be extrapolated; ``profile`` names the borrowed timeline's file."""
    found = summary(table) if len(table) else None
    if found is None:
        return ["No published case to predict."]
    compared = found["efficiency_cases"] + len(found["ratio_errors_pct"])
    lines = [
        f"Published multi-GPU results: every predicted number is {KIND}, never measured "
        f"on this machine: {found['predicted_cases']} of {len(table)} cases predicted over "
        f"{found['links_count']} links from a borrowed one-device compute profile"
        f"{f' ({profile})' if profile else ''} and nominal link rates; "
        f"{found['not_predicted']} not predicted, each with its reason. No number here "
        f"has an interval: {NO_INTERVAL}. "
        f"{compared} cases are compared with a published figure (target at least "
        f"{TARGET_CASES}: {_met(compared >= TARGET_CASES)}), over {found['links_count']} "
        f"links (target at least {TARGET_LINKS}: {_met(found['links_count'] >= TARGET_LINKS)})."
    ]
    if found["efficiency_cases"]:
        median, worst = found["median_abs_error_points"], found["max_abs_error_points"]
        lines += [
            f"Median absolute error in scaling efficiency: {median:.1f} points over "
            f"{found['efficiency_cases']} cases (each listed with its source in "
            f"tables/published_cases.csv; "
            f"{found['median_abs_error_points_primary']:.1f} over the primary sources alone); "
            f"target at most {TARGET_MEDIAN_POINTS:g}: {_met(median <= TARGET_MEDIAN_POINTS)}.",
            f"Largest: {worst:.1f} points, {found['max_case']} "
            f"({_row_source(table, found['max_case'])}); target none above "
            f"{TARGET_MAX_POINTS:g}: {_met(worst <= TARGET_MAX_POINTS)}.",
        ]
    if found["implied_pct_of_nominal"]:
        lines.append(implied_line(found["implied_pct_of_nominal"]))
    for row in table.dropna(subset=["error_pct"]).itertuples(index=False):
        lines.append(
            f"{row.id}, {row.metric}: predicted {row.predicted:.2f} ({KIND}) against "
            f"published {row.published:.4g} ({row.source}), {row.error_pct:+.1f}%; target "
            f"within {TARGET_RATIO_PCT:g}%: {_met(abs(row.error_pct) <= TARGET_RATIO_PCT)}."
        )
    return lines
