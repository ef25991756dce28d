"""Predictions of configurations that were not measured, on real clusters: step time, img/s
and speedup with 95% intervals, and the break-even global batch."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize

from dpscale.analysis.laws.commmodel.analysis import GroupModel
from dpscale.analysis.laws.commmodel.compression import needed_compressions, sampled_thetas
from dpscale.analysis.laws.commmodel.fitting import (
    Z95,
    Fit,
    delta_steps,
    moved_sets,
    propagate,
    safe_exp,
    stacked_jacobian,
)
from dpscale.analysis.laws.commmodel.inputs import INTRA, OBS_COLUMNS
from dpscale.analysis.laws.commmodel.labels import MeasuredRange, extrapolated, label
from dpscale.analysis.laws.commmodel.model import (
    MIN_STEP,
    Design,
    Parameters,
    compute_seconds,
    step_seconds,
)
from dpscale.analysis.laws.commmodel.validation import SUMMARY_COLUMNS
from dpscale.plan.columns import NETWORK, RUN, SPREAD
from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.link import Link

PREDICTION_COLUMNS = [
    *RUN,
    "overlap",
    NETWORK,
    "basis",
    "bandwidth_Gbit_s",
    "latency_us",
    *SPREAD,
    "batch_per_device",
    "measured",
    "kind",
    "validated_median_abs_error",
    "validated_by",
    "step_time_s",
    "step_time_lo_s",
    "step_time_hi_s",
    "img_s",
    "img_s_lo",
    "img_s_hi",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "break_even_global_batch",
    "break_even_global_batch_ci95",
    "efficiency_uncompressed",
    "efficiency_nothing_sent",
    "compression_for_90pct",
    "compression_for_90pct_lo",
    "compression_for_90pct_hi",
    "status",
    "reason",
]


# what a prediction stands on where the fitted model adds no communication time to its step:
# the speed-up is compute's alone, the same on every network, not a measured point
COMPUTE_ONLY = "compute only: no communication term in this prediction"
_HIDDEN = {
    "max": "the fitted overlap (max) hides all communication behind compute",
    "buckets": "every bucket's communication hides behind the backward pass",
}


def compute_only_basis(basis: str, form: str) -> str:
    """``basis`` with what a compute-only prediction stands on, and why it is one."""
    why = _HIDDEN.get(form, "the fitted model prices no communication here")
    return f"{basis}; {COMPUTE_ONLY} ({why})"


def _compute_only(values: dict[str, Any], multi: Design) -> np.ndarray:
    """Per multi-rank row: whether the model's step is its compute alone (no second of
    communication added)."""
    step = step_seconds(values, multi)
    compute = compute_seconds(values, multi)
    return np.abs(step - compute) <= 1e-9 * np.maximum(step, MIN_STEP)


def predicted_networks(predict: dict[str, Any], links: dict[str, Link]) -> list[Link]:
    """``predict["networks"]`` (links: plan.link.predicted_links) and the study's own links
    that have a reference (their bandwidth as the model sees it, as on a real cluster: not
    emulated)."""
    out = list(predict.get("networks") or [])
    for link in links.values():
        if link.name != INTRA and np.isfinite(link.bytes_per_s):
            out.append(replace(link, emulated=False, source=f"study ({link.source})"))
    return out


def predictions(
    groups: list[GroupModel],
    predict: dict[str, Any],
    default_devices: Sequence[int],
    default_batches: Sequence[int],
    summary: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Every configuration of ``predict`` on every network; each row says whether it
    interpolates or extrapolates, with the held-out error of that kind (``summary``: the
    validation summary, else every row reads "not validated")."""
    rows = []
    nodes_list = list(predict.get("nodes") or [1, 2, 4, 8])
    devices_list = list(predict.get("devices_per_node") or default_devices)
    batches = list(predict.get("batch_per_device") or default_batches)
    for group in groups:
        if group.chosen is None:
            continue
        fit = group.fits[group.chosen]
        thetas = sampled_thetas(fit)  # the same draws for every row: drawn once
        message = float(group.obs["gradient_bytes"].iloc[0])
        measured = set(map(tuple, group.obs[OBS_COLUMNS].astype(str).to_numpy()))
        for index, network in enumerate(predicted_networks(predict, group.links)):
            links = dict(group.links)
            links[network.name] = network
            for nodes in nodes_list:
                for devices in devices_list:
                    if nodes == 1 and devices == 1:
                        continue
                    name = INTRA if nodes == 1 else network.name
                    if nodes == 1 and index > 0:
                        continue  # one-node rows do not depend on the network: list them once
                    rows += _prediction_rows(
                        fit,
                        group,
                        links,
                        name,
                        network,
                        nodes,
                        devices,
                        batches,
                        message,
                        measured,
                        thetas,
                    )
    table = pd.DataFrame(rows).reindex(columns=PREDICTION_COLUMNS)
    return _labelled(table, groups, summary)


def _labelled(
    table: pd.DataFrame, groups: list[GroupModel], summary: pd.DataFrame | None
) -> pd.DataFrame:
    """Each predicted row's kind and the validated error of that kind."""
    summary = summary if summary is not None else pd.DataFrame(columns=SUMMARY_COLUMNS)
    by_name = {(g.strategy, g.model): g for g in groups}
    ranges = {key: MeasuredRange.of(g) for key, g in by_name.items() if g.chosen is not None}
    kinds, errors, words = [], [], []
    labels: dict[tuple, tuple[str, float, str]] = {}  # the same words for every row alike
    for row in table.itertuples(index=False):
        group = by_name[(row.strategy, row.model)]
        if row.status != "ok":
            kinds.append(None), errors.append(math.nan), words.append(None)
            continue
        if row.measured:
            kinds.append("measured"), errors.append(math.nan), words.append("measured")
            continue
        bandwidth = row.bandwidth_Gbit_s * 1e9 if row.nodes > 1 else math.nan
        dimensions = extrapolated(
            ranges[(row.strategy, row.model)],
            row.world_size,
            row.batch_per_device,
            row.nodes,
            bandwidth,
        )
        key = (row.strategy, row.model, tuple(dimensions))
        if key not in labels:
            labels[key] = label(dimensions, group, summary)
        kind, error, text = labels[key]
        kinds.append(kind), errors.append(error), words.append(text)
    return table.assign(kind=kinds, validated_median_abs_error=errors, validated_by=words)


def _prediction_rows(
    fit: Fit,
    group: GroupModel,
    links: dict[str, Link],
    link_name: str,
    network: Link,
    nodes: int,
    devices: int,
    batches: Sequence[int],
    message: float,
    measured: set[tuple[str, ...]],
    thetas: np.ndarray | None,
) -> list[dict[str, Any]]:
    """The rows of one layout on one network at every batch; ``thetas``: the fit's sampled
    parameter sets (compression.sampled_thetas), for the compression's interval."""
    world = nodes * devices
    frame = pd.DataFrame(
        {
            "strategy": group.strategy,
            "model": group.model,
            "nodes": [nodes] * len(batches) + [1] * len(batches),
            "network": [network.name] * len(batches) + [HOST_NETWORK] * len(batches),
            "devices_per_node": [devices] * len(batches) + [1] * len(batches),
            "world_size": [world] * len(batches) + [1] * len(batches),
            "batch_per_device": list(batches) * 2,
            "gradient_bytes": message,
        }
    )
    base = {
        "strategy": group.strategy,
        "model": group.model,
        "overlap": group.chosen,
        "network": HOST_NETWORK if nodes == 1 else network.name,
        "basis": f"{INTRA} ({group.links[INTRA].source})" if nodes == 1 else network.source,
        "bandwidth_Gbit_s": math.nan if nodes == 1 else network.gbit_per_s,
        "latency_us": math.nan if nodes == 1 else round(network.latency_s * 1e6, 3),
        "nodes": nodes,
        "devices_per_node": devices,
        "world_size": world,
    }
    link = links.get(link_name)
    if link_name not in fit.parameters.free_links and (
        link is None or not np.isfinite(link.bytes_per_s)
    ):
        return [
            dict(
                base,
                batch_per_device=b,
                status="not predicted",
                reason=f"link {link_name!r} was not measured",
            )
            for b in batches
        ]
    rows = fit.design(frame, emulation=False, links=links)
    centre, variance = fit.log_prediction(rows)
    n = len(batches)
    speed_log, speed_var = _log_speedup(fit, rows, n)
    values = fit.values
    even = break_even(values, _row(rows, 0), _row(rows, n))  # the same at every batch
    even_half = _break_even_ci95(fit, _row(rows, 0), _row(rows, n), even)
    compute_only = _compute_only(values, rows.take(slice(0, n)))
    needs = needed_compressions(fit, rows.take(slice(0, n)), rows.take(slice(n, 2 * n)), thetas)
    out = []
    for i, batch in enumerate(batches):
        half = Z95 * math.sqrt(variance[i]) if np.isfinite(variance[i]) else math.nan
        s_half = Z95 * math.sqrt(speed_var[i]) if np.isfinite(speed_var[i]) else math.nan
        step = safe_exp(centre[i])
        needed = needs[i]
        key = (
            group.strategy,
            group.model,
            str(nodes),
            base["network"],
            str(devices),
            str(world),
            str(batch),
        )
        basis = base["basis"]
        if world > 1 and compute_only[i]:
            basis = compute_only_basis(basis, values["form"])
        out.append(
            dict(
                base,
                basis=basis,
                batch_per_device=batch,
                measured=key in measured,
                step_time_s=step,
                step_time_lo_s=safe_exp(centre[i] - half),
                step_time_hi_s=safe_exp(centre[i] + half),
                img_s=world * batch / step,
                img_s_lo=world * batch / safe_exp(centre[i] + half),
                img_s_hi=world * batch / safe_exp(centre[i] - half),
                speedup=safe_exp(speed_log[i]),
                speedup_lo=safe_exp(speed_log[i] - s_half),
                speedup_hi=safe_exp(speed_log[i] + s_half),
                break_even_global_batch=even,
                break_even_global_batch_ci95=even_half,
                efficiency_uncompressed=needed.efficiency_uncompressed,
                efficiency_nothing_sent=needed.efficiency_nothing_sent,
                compression_for_90pct=needed.ratio,
                compression_for_90pct_lo=needed.lo,
                compression_for_90pct_hi=needed.hi,
                status="ok",
                reason=None,
            )
        )
    return out


def _log_speedup(fit: Fit, rows: Design, n: int) -> tuple[np.ndarray, np.ndarray]:
    """log(N T_1 / T_N) at each batch and its variance (parameters only: the residual
    scatter of a ratio of two predictions of one model largely cancels)."""
    world = rows.ranks[:n]

    def log_speedup(values: dict[str, Any]) -> np.ndarray:
        t = np.maximum(step_seconds(values, rows), MIN_STEP)
        return np.log(world) + np.log(t[..., n:]) - np.log(t[..., :n])

    centre = log_speedup(fit.values)
    gradient = stacked_jacobian(log_speedup, fit.parameters, fit.theta, centre)
    return centre, propagate(gradient, fit.covariance)


def _break_even_ci95(fit: Fit, multi: Design, single: Design, even: float) -> float:
    """The break-even batch's 95% half-width from the fit's parameter covariance (delta
    method, numerical gradient: :func:`stacked_jacobian`'s steps, every moved parameter
    set's search grid priced in one call); NaN where it is 0 or never (no interval to give)."""
    if not np.isfinite(even) or even <= 0:
        return math.nan
    steps = delta_steps(fit.theta)
    evens = break_evens(fit.parameters, moved_sets(fit.theta, steps), multi, single)
    gradient = ((evens - even) / steps)[None, :]  # 1 x parameters, as stacked_jacobian's
    if not np.isfinite(gradient).all():
        return math.inf
    variance = float(propagate(gradient, fit.covariance)[0])
    return Z95 * math.sqrt(variance) if np.isfinite(variance) else math.nan


def _row(rows: Design, index: int) -> Design:
    return rows.take(slice(index, index + 1))


def _first_at(rows: Design, batch: np.ndarray) -> Design:
    """``rows``' first row at each per-device ``batch``: a new Design, ``rows`` untouched.
    One row's arrays broadcast against ``batch`` in every step function (elementwise, the
    same numbers as the row repeated), so no row is copied: the root search asks hundreds
    of times."""
    first = rows if rows.batch.size == 1 else rows.take(slice(0, 1))
    return first.with_batch(batch)


@functools.lru_cache(maxsize=256)
def _grid(ranks: float) -> np.ndarray:
    """The global batches the break-even search tries first (read-only: shared)."""
    grid = np.geomspace(ranks * 1e-3, 1e8, 400)
    grid.flags.writeable = False
    return grid


def break_even(
    values: dict[str, Any],
    multi: Design,
    single: Design,
    step: Callable[[dict[str, Any], Design], np.ndarray] = step_seconds,
) -> float:
    """Smallest global batch B at which the N-rank configuration finishes a step sooner
    than one rank (strong scaling): T_N(B/N) < T_1(B). 0: always; inf: never (up to 1e8).
    ``step``: the step-time model (a remedy's, commmodel.remedy_fit)."""
    gain = _gain(values, multi, single, step)
    grid = _grid(float(multi.ranks[0]))
    return _crossing(gain, grid, gain(grid))


def break_evens(
    parameters: Parameters, thetas: np.ndarray, multi: Design, single: Design
) -> np.ndarray:
    """:func:`break_even` under each parameter set of ``thetas`` (sets x parameters): the
    grid priced for all sets in one call (Parameters.stacked_values, the same numbers),
    each set's root then searched on its own."""
    grid = _grid(float(multi.ranks[0]))
    gains = _gain(parameters.stacked_values(thetas), multi, single, step_seconds)(grid)
    return np.array(
        [
            _crossing(_gain(parameters.values(theta), multi, single, step_seconds), grid, row)
            for theta, row in zip(thetas, gains, strict=True)
        ],
        dtype=float,
    )


def _gain(
    values: dict[str, Any],
    multi: Design,
    single: Design,
    step: Callable[[dict[str, Any], Design], np.ndarray],
) -> Callable[[np.ndarray], np.ndarray]:
    """T_1(B) - T_N(B/N) at each global batch B (the last axis)."""
    ranks = float(multi.ranks[0])

    def gain(global_batch: np.ndarray) -> np.ndarray:
        m = _first_at(multi, global_batch / ranks)
        return step(values, _first_at(single, global_batch)) - step(values, m)

    return gain


def _crossing(
    gain: Callable[[np.ndarray], np.ndarray], grid: np.ndarray, gains: np.ndarray
) -> float:
    """The first global batch where ``gain`` turns positive: 0 where it already is at the
    grid's start, inf where it never does, else the root between the grid's two batches."""
    if gains[0] > 0:
        return 0.0
    winning = np.nonzero(gains > 0)[0]
    if winning.size == 0:
        return math.inf
    first = int(winning[0])
    return float(
        optimize.brentq(lambda b: float(gain(np.array([b]))[0]), grid[first - 1], grid[first])
    )
