"""How the prediction engine (laws.engine) prices one collective of each gradient bucket:
a nominal or fitted link through plan.traffic's one price, or a measured all-reduce curve
(an nccl-tests log, laws.cluster_link) with its range and basis. Each returns per-bucket
point, lo and hi seconds with the words the numbers rest on."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from dpscale.analysis.laws.cluster_link import CollectiveCurve, bucket_costs
from dpscale.plan import traffic as plan_traffic
from dpscale.plan.layout import Layout
from dpscale.plan.link import Link
from dpscale.plan.traffic import RING, Traffic


@dataclass(frozen=True)
class BucketPrices:
    """Each bucket's collectives, seconds: the point and its 95% range (the point where the
    pricing has none), and the basis of the numbers in a few words each."""

    point: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    bases: tuple[str, ...]
    unresolved: tuple[
        str, ...
    ] = ()  # why some bucket has no price (NaN), and what would resolve it


class Pricing(Protocol):
    """Prices one collective of each message (bytes) through ``traffic`` over ``layout``."""

    def price(self, messages: np.ndarray, traffic: Traffic, layout: Layout) -> BucketPrices: ...


@dataclass(frozen=True)
class LinkPricing:
    """A nominal or fitted link, priced by plan.traffic.seconds (no range: a link's rate is
    taken as given; an infinite rate sends its bytes in no time, an unknown one is refused)."""

    link: Link

    def price(self, messages: np.ndarray, traffic: Traffic, layout: Layout) -> BucketPrices:
        link = self.link
        if not (link.bytes_per_s > 0 and math.isfinite(link.latency_s) and link.latency_s >= 0):
            raise ValueError(
                f"link: {link.name} has no known bandwidth and latency "
                f"({link.bytes_per_s!r} bytes/s, {link.latency_s!r} s) to price {traffic.words()}"
            )
        nodes, per_node = layout.nodes, layout.devices_per_node
        point = plan_traffic.seconds(
            traffic, messages, nodes, per_node, link.bytes_per_s, link.latency_s
        )
        point = np.asarray(point, dtype=float)
        basis = f"{traffic.words()} on {link.name} ({link.words()}, {link.source})"
        return BucketPrices(point, point, point, (basis,))


@dataclass(frozen=True)
class CurvePricing:
    """A measured all-reduce curve (an nccl-tests log): its own times within its sizes,
    carried to other rank counts by the ring law fitted to it; that law beyond its sizes
    (laws.cluster_link). It measured an all-reduce, so any other traffic is refused rather
    than priced as a ring."""

    curve: CollectiveCurve

    def price(self, messages: np.ndarray, traffic: Traffic, layout: Layout) -> BucketPrices:
        if traffic.kind != RING:
            raise ValueError(
                f"traffic: a measured all-reduce curve cannot price {traffic.words()} "
                f"({traffic.kind}); it prices only {RING}"
            )
        times = bucket_costs(self.curve, messages, layout.world_size).times
        point = np.array([time.seconds for time in times], dtype=float)
        lo = np.array([t.lo if math.isfinite(t.lo) else t.seconds for t in times], dtype=float)
        hi = np.array([t.hi if math.isfinite(t.hi) else t.seconds for t in times], dtype=float)
        unresolved = tuple(dict.fromkeys(t.unresolved for t in times if not t.resolved))
        bases = tuple(dict.fromkeys(t.basis for t in times))
        return BucketPrices(point, lo, hi, bases, unresolved)
