"""The step from the mechanism: gradient buckets served in order behind the backward pass.

A one-rank cell records its bucket timeline (bucket_timeline.csv): forward, backward and
optimizer seconds, and each bucket's bytes and ready time. From it, per strategy and model:

    T_o = T_comp x O / (O + F(b) + B(b))    (the optimizer does not grow with the batch)
    T_f = (T_comp - T_o) x forward share,  T_b = T_comp - T_o - T_f
    c_k = n_k 2(N-1) alpha + 2(N-1)/N S_k / min(beta_link, beta_host)
    T_b' = T_b + kappa G + e
    bucket k starts at max(T_f + r_k T_b', end of bucket k-1) and ends c_k later
    T   = max(T_f + T_b', end of the last bucket) + T_o

T_comp is the fitted compute (commmodel.model), r_k the bucket's ready time as a share of
the backward pass, S_k its bytes, n_k its collectives (PowerSGD: 3), e a remedy's own work
per step (its hook computes on the backward pass's thread or stream, so the work delays
compute rather than hiding behind it).
beta_host: the one-node collectives' bandwidth, the ceiling of an emulated link on this
machine. kappa: the compute that communication takes where ranks share cores (fitted), in
seconds per GB each rank sends, G = 2(N-1)/N S / 1e9: moving a byte through the kernel and
the framework costs the same CPU on a fast link as on a slow one, only sooner. A delayed
all-reduce runs behind the next step: T = max(T_comp + kappa G + e, sum c_k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpscale.analysis.results.rows import no_remedy


@dataclass(frozen=True)
class BucketTimeline:
    """One strategy and model's buckets as one rank measured them."""

    forward_share: float  # forward / (forward + backward)
    optimizer_s: float  # the optimizer step, seconds (median)
    fb_slope: float  # forward + backward seconds per sample
    fb_intercept: float  # forward + backward seconds at batch 0
    ready: np.ndarray  # each bucket's ready time as a share of the backward pass
    share: np.ndarray  # each bucket's share of the gradient bytes
    batches: tuple[int, ...]  # the batch sizes it was recorded at


def timelines(table: pd.DataFrame | None) -> dict[tuple[str, str], BucketTimeline]:
    """(strategy, model) -> its timeline, from the one-rank cells without a remedy."""
    if table is None or table.empty:
        return {}
    one = table[(table["world_size"] == 1) & no_remedy(table["comm"])]
    return {
        (strategy, model): _timeline(rows)
        for (strategy, model), rows in one.groupby(["strategy", "model"], sort=True)
    }


def _timeline(rows: pd.DataFrame) -> BucketTimeline:
    cells = rows.groupby("cell_id").first()
    per_batch = cells.groupby("batch_per_device")[["forward_s", "backward_s", "optimizer_s"]]
    medians = per_batch.median()
    batches = medians.index.to_numpy(dtype=float)
    fb = (medians["forward_s"] + medians["backward_s"]).to_numpy(dtype=float)
    if len(batches) >= 2:
        slope, intercept = np.polyfit(batches, fb, 1)
    else:
        slope, intercept = fb[0] / batches[0], 0.0
    ready = rows.assign(fraction=rows["ready_s"] / rows["backward_s"].clip(lower=1e-12))
    ready_share = ready.groupby("bucket")["fraction"].median().clip(0.0, 1.0)
    sizes = rows.groupby("bucket")["bucket_bytes"].median()
    forward_share = medians["forward_s"] / (medians["forward_s"] + medians["backward_s"])
    return BucketTimeline(
        forward_share=float(forward_share.median()),
        optimizer_s=float(medians["optimizer_s"].median()),
        fb_slope=float(max(slope, 1e-12)),
        fb_intercept=float(intercept),
        ready=ready_share.sort_index().to_numpy(dtype=float),
        share=(sizes / sizes.sum()).sort_index().to_numpy(dtype=float),
        batches=tuple(int(b) for b in batches),
    )


@dataclass
class BucketRows:
    """The per-row quantities the bucket step needs beyond the common design."""

    forward_share: np.ndarray
    optimizer_s: np.ndarray  # the timeline's optimizer seconds
    fb_slope: np.ndarray  # and its forward + backward seconds per sample
    fb_intercept: np.ndarray
    ready: np.ndarray  # rows x buckets
    share: np.ndarray  # rows x buckets
    host_beta: np.ndarray  # the host's ceiling, inf where none applies
    collectives: np.ndarray  # collectives per bucket
    encode_s: np.ndarray  # a remedy's own work per step
    hidden: np.ndarray  # bool: the all-reduce runs behind the next step


def bucket_costs(
    rows: BucketRows,
    message: np.ndarray,
    wire_factor: np.ndarray,
    hops: np.ndarray,
    beta: np.ndarray,
    alpha: np.ndarray,
) -> np.ndarray:
    """Each bucket's collective time, rows x buckets: its share of the bytes through the
    strategy's traffic (plan.traffic: ``wire_factor``, ``hops``); samples x rows x buckets
    where ``beta`` and ``alpha`` are samples x rows."""
    latency = hops * alpha * rows.collectives
    wire = wire_factor * message / np.minimum(beta, rows.host_beta)
    return np.where(rows.share > 0, latency[..., None], 0.0) + rows.share * wire[..., None]


def bucket_step(
    rows: BucketRows,
    batch: np.ndarray,
    compute: np.ndarray,
    costs: np.ndarray,
    kappa: float,
    colocated: np.ndarray,
    sent_gb: np.ndarray,
) -> np.ndarray:
    """The step time of each row from its compute and its buckets' costs (module doc);
    ``sent_gb``: the GB each rank sends a step (G)."""
    rest = np.maximum(rows.fb_slope * batch + rows.fb_intercept, 1e-12)
    optimizer = rows.optimizer_s / (rows.optimizer_s + rest) * compute
    forward = (compute - optimizer) * rows.forward_share
    total = costs.sum(axis=-1)
    shared = kappa * sent_gb * (colocated > 1)  # the CPU communication took from compute
    backward = compute - optimizer - forward + shared + rows.encode_s
    end = forward.copy()
    for k in range(costs.shape[-1]):  # costs: (samples x) rows x buckets
        start = np.maximum(forward + rows.ready[:, k] * backward, end)
        end = np.where(rows.share[:, k] > 0, start + costs[..., k], end)
    step = np.maximum(forward + backward, end) + optimizer
    return np.where(rows.hidden, np.maximum(compute + shared + rows.encode_s, total), step)


def empty_rows(n: int) -> BucketRows:
    """Rows without a timeline: the bucket form cannot be evaluated on them."""
    return BucketRows(
        forward_share=np.full(n, math.nan),
        optimizer_s=np.full(n, math.nan),
        fb_slope=np.full(n, math.nan),
        fb_intercept=np.full(n, math.nan),
        ready=np.full((n, 1), math.nan),
        share=np.zeros((n, 1)),
        host_beta=np.full(n, math.inf),
        collectives=np.ones(n),
        encode_s=np.zeros(n),
        hidden=np.zeros(n, dtype=bool),
    )


def timeline_rows(timeline: BucketTimeline | None, host_beta: np.ndarray) -> BucketRows:
    n = host_beta.size
    if timeline is None:
        return BucketRows(**{**empty_rows(n).__dict__, "host_beta": host_beta})
    return BucketRows(
        forward_share=np.full(n, timeline.forward_share),
        optimizer_s=np.full(n, timeline.optimizer_s),
        fb_slope=np.full(n, timeline.fb_slope),
        fb_intercept=np.full(n, timeline.fb_intercept),
        ready=np.tile(timeline.ready, (n, 1)),
        share=np.tile(timeline.share, (n, 1)),
        host_beta=host_beta,
        collectives=np.ones(n),
        encode_s=np.zeros(n),
        hidden=np.zeros(n, dtype=bool),
    )
