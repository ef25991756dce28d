"""A user's cluster predicted from one device and the cluster's nccl-tests log, or its
link's nominal rate and latency where it has no log.

The one-device step time (cells.csv, world_size 1: batch / img_s, its 95% interval from the
img_s interval) is the compute of the prediction engine (laws.engine: the bucket model,
commmodel.buckets); each gradient bucket's all-reduce is priced by the cluster's own log
(pricing.CurvePricing over laws.cluster_link: the log's own times within its sizes, carried
to other rank counts by the ring law fitted to it, that law beyond its sizes; a strategy
whose declared traffic is not a ring all-reduce is refused, since the log measured one). A
cluster without a log gives a nominal link instead (rate and latency, pricing.LinkPricing
through the strategy's declared traffic): its rows say they stand on a nominal link, not a
measured log. One node's rows take the cluster's intra-node log (NVLink, PCIe) where it
gives one, else the inter-node link stands in; rows of two or more nodes take the
inter-node link. kappa = 0: the devices do not share cores. Every number is an
extrapolation: nothing was measured on the cluster but its collectives, and with a nominal
link not even those.

Ranges: the step at the ends of the compute interval and of the collective's range (a
measured time has no range: the log prints one average per size, and the basis says so).
The compression for 90% is the engine's search over a remedy's wire ratio.

Not resolved: where a bucket's all-reduce needs the ring law fitted to the log (another rank
count, a size beyond the log's) and that fit left alpha or beta not resolved, the row has no
number: every value and range NaN, ``status`` "not resolved" and ``reason`` saying why and
what would resolve it; the sentence says so instead of a speed-up
(docs/decisions/not-resolved-predictions.md). A measured time needs no law: rows the log
covers keep their numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dpscale.analysis.laws.cluster_link import CollectiveCurve
from dpscale.analysis.laws.commmodel.buckets import BucketTimeline
from dpscale.analysis.laws.engine import (
    KIND,
    NO_EFFECT,
    NOT_RESOLVED,
    TARGET_EFFICIENCY,
    ComputeProfile,
    point_efficiency,
    predict_step,
    wire_ratio_for,
)
from dpscale.analysis.laws.pricing import CurvePricing, LinkPricing, Pricing
from dpscale.analysis.results.rows import no_remedy
from dpscale.plan.columns import SPREAD, SYSTEM_HOST
from dpscale.plan.layout import Layout
from dpscale.plan.link import Link
from dpscale.plan.traffic import RingAllReduce, Traffic

# what a cluster's nccl-tests log measured, and what a strategy declares unless told
RING = RingAllReduce()
# one node's devices talk over its own fabric, which the inter-node log did not measure
ONE_NODE = "one node: the inter-node log stands in for the node's own fabric"
# ... unless the cluster gave a log of that fabric: then the basis names it
INTRA_NODE = "one node: intra-node log ({log})"
INTRA_NOMINAL = "one node: the node's own fabric at its nominal rate and latency (no log)"
# a nominal inter-node link standing in for the node's own fabric
ONE_NODE_NOMINAL = "one node: the nominal inter-node link stands in for the node's own fabric"
# the algorithm column of a row priced by a nominal link: no log to check
NOMINAL = "nominal link: no log measured it"
# predict()'s table, in its order (a table of no cluster keeps them)
COLUMNS = (
    "cluster",
    *SPREAD,
    "batch_per_device",
    "kind",
    "step_time_s",
    "step_time_lo_s",
    "step_time_hi_s",
    "img_s",
    "img_s_lo",
    "img_s_hi",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "efficiency",
    "efficiency_lo",
    "efficiency_hi",
    "compression_for_90pct",
    "compression_reason",
    "gradient_bytes",
    "gradient_bytes_source",
    "collective_basis",
    "algorithm",
    "status",
    "reason",
)
OK = "ok"


@dataclass(frozen=True)
class OneDevice:
    """The one-device step at a per-device batch, seconds, with its 95% interval, and the
    device and host it was measured on (every prediction names them)."""

    batch: int
    step_s: float
    lo: float
    hi: float
    device: str = "a device not recorded"
    host: str = "a host not recorded"
    on_cpu: bool = False

    def words(self) -> str:
        """``NVIDIA H100 80GB HBM3 on host vm``."""
        return f"{self.device} on host {self.host}"

    def is_named(self, named: str) -> bool:
        """Whether a cluster file's ``device`` names this profile's device: "cpu" for a CPU
        profile, else a GPU name contained in the recorded one, case and spaces aside
        ("H100" names "NVIDIA H100 80GB HBM3")."""
        wanted = "".join(named.lower().split())
        if wanted == "cpu":
            return self.on_cpu
        return not self.on_cpu and wanted in "".join(self.device.lower().split())


def _profile(rows: pd.DataFrame) -> tuple[str, str, bool]:
    """The one-device cells' device in words, their host, and whether it was a CPU: the
    first GPU a CUDA cell's system listed, else one CPU process and its threads."""
    first = rows.iloc[0]
    host = str(first.get(SYSTEM_HOST) or "") or "a host not recorded"
    accelerator = str(first.get("accelerator") or "cpu")
    if accelerator != "cpu":
        gpus = str(first.get("gpus") or "")
        name = gpus.split(";")[0].strip() if gpus and gpus != "nan" else ""
        return name or f"a {accelerator} device (name not recorded)", host, False
    threads = first.get("threads_per_device")
    count = int(threads) if pd.notna(threads) else 1
    cpu = str(first.get("cpu_model") or "") or "a CPU not recorded"
    thread_words = "1 thread" if count == 1 else f"{count} threads"
    return f"one CPU process of {thread_words} ({cpu})", host, True


@dataclass(frozen=True)
class Cluster:
    """What the prediction needs of a cluster: its name, inter-node curve (None where a
    nominal link stands instead) and shape, the intra-node curve and its log's name where
    the cluster gave one, and the nominal inter-node link where it gave no log."""

    name: str
    curve: CollectiveCurve | None
    devices_per_node: int
    nodes: tuple[int, ...]
    intra: CollectiveCurve | None = None
    intra_log: str = ""
    nominal: Link | None = None
    intra_nominal: Link | None = None  # the node's fabric's nominal rate, where no log

    def __post_init__(self) -> None:
        if (self.curve is None) == (self.nominal is None):
            raise ValueError("cluster: give exactly one of an inter-node curve or a nominal link")

    def link(self, nodes: int) -> tuple[Pricing, str, str | None]:
        """The pricing for ``nodes`` nodes, its algorithm words and the words the basis adds
        (None: nothing). Two or more nodes: the inter-node link, always: a flat ring over all
        ranks is bounded by its slowest hop, the inter-node one. One node: its own fabric's
        log where given, else the inter-node link stands in."""
        if nodes == 1 and self.devices_per_node >= 2 and self.intra is not None:
            words = INTRA_NODE.format(log=self.intra_log or "unnamed")
            return CurvePricing(self.intra), self.intra.algorithm, words
        if nodes == 1 and self.devices_per_node >= 2 and self.intra_nominal is not None:
            return LinkPricing(self.intra_nominal), NOMINAL, INTRA_NOMINAL
        stands_in = nodes == 1 and self.devices_per_node >= 2
        if self.curve is None:
            return LinkPricing(self.nominal), NOMINAL, ONE_NODE_NOMINAL if stands_in else None
        return CurvePricing(self.curve), self.curve.algorithm, ONE_NODE if stands_in else None

    @property
    def is_nominal(self) -> bool:
        return self.curve is None


def one_device(cells: pd.DataFrame, strategy: str, model: str, batch: int) -> OneDevice:
    """The one-device step from cells.csv (world_size 1, status ok, no remedy): batch over
    the mean img_s of its repeats; the interval from the widest repeat's img_s_ci95."""
    rows = cells[
        (cells["strategy"] == strategy)
        & (cells["model"] == model)
        & (cells["world_size"] == 1)
        & (cells["batch_per_device"] == batch)
        & (cells["status"] == "ok")
        & no_remedy(cells["comm"])
    ]
    if rows.empty:
        found = cells[(cells["world_size"] == 1) & (cells["status"] == "ok")]
        keys = found[["strategy", "model", "batch_per_device"]].itertuples(index=False)
        have = sorted({f"{s} {m} b{b}" for s, m, b in keys})
        raise ValueError(
            f"batch_per_device: no ok one-device cell of {strategy} {model} at batch {batch}; "
            f"the results have {have or 'none'}"
        )
    img_s = float(rows["img_s_mean"].mean())
    half = float(rows["img_s_ci95"].fillna(0.0).max())
    fast, slow = img_s + half, max(img_s - half, 1e-12)
    device, host, on_cpu = _profile(rows)
    return OneDevice(int(batch), batch / img_s, batch / fast, batch / slow, device, host, on_cpu)


def gradient_bytes(
    table: pd.DataFrame, strategy: str, model: str, cells: pd.DataFrame | None = None
) -> tuple[float, str]:
    """The bytes all-reduced each step: the sum of the one-rank timeline's bucket bytes,
    checked against the cells' trainable parameters x 4 (fp32 gradients) where they have
    them, and the words say which agreed."""
    rows = table[
        (table["strategy"] == strategy)
        & (table["model"] == model)
        & (table["world_size"] == 1)
        & no_remedy(table["comm"])
    ]
    total = float(rows.groupby("bucket")["bucket_bytes"].median().sum())
    words = "sum of the timeline's bucket bytes"
    if cells is None or "trainable_params" not in cells:
        return total, words
    params = cells.loc[
        (cells["strategy"] == strategy) & (cells["model"] == model), "trainable_params"
    ].dropna()
    if params.empty:
        return total, words
    fp32 = float(params.median()) * 4
    if fp32 == total:
        return total, f"{words} (= trainable parameters x 4)"
    return total, f"{words} (trainable parameters x 4 would be {fp32:,.0f})"


def profile(
    timeline: BucketTimeline, device: OneDevice, total_bytes: float, source: str = ""
) -> ComputeProfile:
    """The one device as the engine takes it: its timeline, batch, step and interval, and
    the gradient bytes it all-reduces each step."""
    return ComputeProfile(
        timeline, device.batch, device.step_s, device.lo, device.hi, total_bytes, source
    )


def priced(link: CollectiveCurve | Pricing) -> Pricing:
    """A measured curve as its pricing (CurvePricing); a pricing as it is."""
    return CurvePricing(link) if isinstance(link, CollectiveCurve) else link


def efficiency(
    timeline: BucketTimeline,
    device: OneDevice,
    curve: CollectiveCurve | Pricing,
    total_bytes: float,
    layout: Layout,
    compression: float = 1.0,
    traffic: Traffic = RING,
) -> float:
    """The one-device step over the predicted step at the point values, with the gradient
    bytes divided by ``compression`` (the latency kept)."""
    remedy = NO_EFFECT.with_wire_ratio(compression)
    one = profile(timeline, device, total_bytes)
    return point_efficiency(one, traffic, priced(curve), layout, remedy)


def compression_for(
    timeline: BucketTimeline,
    device: OneDevice,
    curve: CollectiveCurve | Pricing,
    total_bytes: float,
    layout: Layout,
    target: float = TARGET_EFFICIENCY,
    traffic: Traffic = RING,
) -> tuple[float, str]:
    """The factor the gradient bytes must shrink by (the latency stays) for ``target``
    efficiency: the engine's search over a remedy's wire ratio (engine.wire_ratio_for)."""
    one = profile(timeline, device, total_bytes)
    return wire_ratio_for(one, traffic, priced(curve), layout, target=target)


def predict(
    timeline: BucketTimeline,
    device: OneDevice,
    cluster: Cluster,
    total_bytes: float,
    bytes_source: str,
    traffic: Traffic = RING,
) -> pd.DataFrame:
    """One row per node count: step, img/s, speedup and efficiency with their ranges
    (engine.predict_step, each bucket priced by the cluster's log or nominal link);
    ``traffic``: the strategy's declared traffic (a log measured an all-reduce: any other
    is refused; a nominal link prices any)."""
    one = profile(timeline, device, total_bytes, bytes_source)
    rows = []
    for nodes in cluster.nodes:
        layout = Layout(nodes, cluster.devices_per_node)
        pricing, algorithm, words = cluster.link(nodes)
        found = predict_step(one, traffic, pricing, layout)
        basis = found.collective_bases
        if words is not None:
            basis = (*basis, words)
        c, c_reason = compression_for(
            timeline, device, pricing, total_bytes, layout, traffic=traffic
        )
        rows.append(
            {
                "cluster": cluster.name,
                "nodes": nodes,
                "devices_per_node": cluster.devices_per_node,
                "world_size": layout.world_size,
                "batch_per_device": device.batch,
                "kind": found.kind,
                "step_time_s": found.step_s,
                "step_time_lo_s": found.step_lo_s,
                "step_time_hi_s": found.step_hi_s,
                "img_s": found.img_s,
                "img_s_lo": found.img_s_lo,
                "img_s_hi": found.img_s_hi,
                "speedup": found.speedup,
                "speedup_lo": found.speedup_lo,
                "speedup_hi": found.speedup_hi,
                "efficiency": found.efficiency,
                "efficiency_lo": found.efficiency_lo,
                "efficiency_hi": found.efficiency_hi,
                "compression_for_90pct": c,
                "compression_reason": c_reason,
                "gradient_bytes": total_bytes,
                "gradient_bytes_source": bytes_source,
                "collective_basis": "; ".join(basis),
                "algorithm": algorithm,
                "status": OK if found.resolved else NOT_RESOLVED,
                "reason": found.unresolved,
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def times(value: float) -> str:
    """A speed-up with the same decimals at every size, so a value and its range read alike
    ("32.0x (31.9-32.0)", not "32x (31.9-32)")."""
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def sentence(table: pd.DataFrame) -> str:
    """The answer for the largest node count, with its range and the word extrapolated; or
    that it is not resolved, why and what would resolve it (no number)."""
    row = table.sort_values("world_size").iloc[-1]
    if row.get("status", OK) != OK:
        return (
            f"On {row['cluster']}, {row['world_size']} devices at per-device batch "
            f"{row['batch_per_device']}: {NOT_RESOLVED} ({row['reason']}); no speed-up or "
            f"efficiency is given from one device and {_stands_on(row)}."
        )
    return (
        f"On {row['cluster']}, {row['world_size']} devices at per-device batch "
        f"{row['batch_per_device']} are predicted {times(row['speedup'])}x the one-device "
        f"throughput ({times(row['speedup_lo'])}-{times(row['speedup_hi'])}), "
        f"{100 * row['efficiency']:.0f}% efficient "
        f"({100 * row['efficiency_lo']:.0f}-{100 * row['efficiency_hi']:.0f}%); {KIND} from "
        f"one device and {_stands_on(row)} ({row['collective_basis']})."
    )


def _stands_on(row: pd.Series) -> str:
    """What the row's collectives stand on, in the sentence's words."""
    if row.get("algorithm") == NOMINAL:
        return "the cluster's nominal link (no nccl-tests log)"
    return "the cluster's nccl-tests log"


def study_sentence(table: pd.DataFrame, strategy: str, model: str) -> str:
    """The answer sentence as a study's landing page gives it, with the run whose one
    device it stands on."""
    return f"{sentence(table)} One device: this study's {strategy} {model} cells."


def why_not(name: str, source: str, reason: str) -> str:
    """The landing page's line for a cluster this study cannot predict, and why."""
    return f"On {name}, nothing is predicted from this study ({source}: {reason})."
