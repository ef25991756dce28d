"""The alpha-beta fit of the collectives table (analysis.results.collectives) per strategy, network,
layout and source (analysis.laws.alpha_beta), and the ring law's rank-count dependence checked:
fitted on the fewest ranks, predicting more."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dpscale.analysis.laws import alpha_beta
from dpscale.analysis.results.collectives import FIT_GROUP, MEASURED
from dpscale.plan import ring

# read by the communication model by these names: keep them
COMM_FITS_COLUMNS = [
    *FIT_GROUP,
    "alpha_s",
    "alpha_lo",
    "alpha_hi",
    "beta_GB_s",
    "beta_lo_GB_s",
    "beta_hi_GB_s",
    "r2",
    "points",
    "status",
    "reason",
]


def _fit_columns(fit: alpha_beta.AlphaBetaFit) -> dict[str, Any]:
    """A fit's row: a parameter its sizes cannot bound keeps its interval but no value, and
    the row reads "not resolved" with the reason, so no prediction uses it (they read "ok")."""
    unresolved = [
        f"{name} {why}"
        for name, why in (("alpha", fit.alpha_unresolved), ("beta", fit.beta_unresolved))
        if why
    ]
    return {
        "alpha_s": math.nan if fit.alpha_unresolved else fit.alpha_s,
        "alpha_lo": fit.alpha_lo,
        "alpha_hi": fit.alpha_hi,
        "beta_GB_s": math.nan if fit.beta_unresolved else fit.beta_bytes_s / 1e9,
        "beta_lo_GB_s": fit.beta_lo_bytes_s / 1e9,
        "beta_hi_GB_s": fit.beta_hi_bytes_s / 1e9,
        "r2": fit.r2,
        "points": fit.points,
        "status": "not resolved" if unresolved else "ok",
        "reason": "; ".join(unresolved) or None,
    }


def comm_fits_table(collectives: pd.DataFrame) -> pd.DataFrame:
    """alpha (s) and beta (GB/s) of the ring model per strategy, network, layout and source,
    fitted to the median per-call times of every size of the group's cells except
    contaminated ones (other work took CPU from them); an imported log is a group of its
    own, fitted to the mean times it prints."""
    rows = []
    if "source" not in collectives.columns:  # a table written before sources
        collectives = collectives.assign(source=MEASURED)
    usable = collectives[collectives["quality"].fillna("") != "contaminated"]
    for key, group in collectives.groupby(FIT_GROUP, sort=True, dropna=False):
        row: dict[str, Any] = dict(zip(FIT_GROUP, key, strict=True))
        points = usable.loc[usable.index.intersection(group.index)]
        try:
            if points.empty:
                raise ValueError(
                    "every cell of this group is contaminated (other work took CPU from it): "
                    "left out, as from the throughput fits; measure it on a quiet machine"
                )
            fit = alpha_beta.fit_alpha_beta(
                points["message_bytes"], points["time_s"], row["world_size"]
            )
        except (ValueError, RuntimeError) as error:
            row.update(status="not fitted", reason=str(error), points=len(points))
        else:
            row.update(_fit_columns(fit))
        rows.append(row)
    # beta_hi_GB_s is inf where the data bound the bandwidth only from below
    return pd.DataFrame(rows).reindex(columns=COMM_FITS_COLUMNS)


# rank_count_table: the ring law fitted on the fewest ranks, checked on more
RANKS_GROUP = ["study", "strategy", "framework", "network", "comm", "source", "placement"]
RANKS_COLUMNS = [
    *RANKS_GROUP,
    "fitted_on_ranks",
    "predicted_ranks",
    "kind",
    "sizes",
    "median_abs_relative_error",
    "worst_relative_error",
    "largest_message_bytes",
    "measured_s",
    "measured_lo",
    "measured_hi",
    "predicted_s",
    "predicted_lo",
    "predicted_hi",
    "verdict",
]


def placement(nodes: int, devices_per_node: int) -> str:
    """How a layout's ranks sit: the ring law's bandwidth is a different link in each."""
    if nodes == 1:
        return "one node"
    return "one rank per node" if devices_per_node == 1 else "several ranks per node"


def _with_placement(frame: pd.DataFrame) -> pd.DataFrame:
    nodes, devices = frame["nodes"], frame["devices_per_node"]
    return frame.assign(placement=[placement(n, d) for n, d in zip(nodes, devices, strict=True)])


def _ring_interval(size: float, ranks: int, basis: pd.Series) -> tuple[float, float, float]:
    """The basis fit's all-reduce time at ``ranks``, and its range over beta's 95% interval
    (the faster bound gives the shorter time; an unbounded beta leaves the latency)."""

    def seconds(beta_GB_s: float) -> float:
        beta = beta_GB_s * 1e9
        return ring.ring_allreduce_seconds(size, ranks, beta, basis["alpha_s"])

    return (
        seconds(basis["beta_GB_s"]),
        seconds(basis["beta_hi_GB_s"]),
        seconds(basis["beta_lo_GB_s"]),
    )


def _verdict(measured: pd.Series, lo: float, hi: float, relative_error: float) -> str:
    if lo <= measured["time_hi"] and measured["time_lo"] <= hi:
        return "within the measured interval"
    side = "under" if relative_error < 0 else "over"
    return f"{side} by {abs(relative_error):.0%}"


def _rank_row(group: pd.DataFrame, basis: pd.Series, ranks: int) -> dict[str, Any]:
    points = group[group["world_size"] == ranks].sort_values("message_bytes")
    predicted = ring.ring_allreduce_seconds(
        points["message_bytes"], ranks, basis["beta_GB_s"] * 1e9, basis["alpha_s"]
    )
    errors = predicted / points["time_s"] - 1
    largest = points.iloc[-1]
    at_largest, lo, hi = _ring_interval(largest["message_bytes"], ranks, basis)
    return {
        "fitted_on_ranks": int(basis["world_size"]),
        "predicted_ranks": ranks,
        "kind": "extrapolates in ranks",
        "sizes": len(points),
        "median_abs_relative_error": float(errors.abs().median()),
        "worst_relative_error": float(errors.loc[errors.abs().idxmax()]),
        "largest_message_bytes": int(largest["message_bytes"]),
        "measured_s": largest["time_s"],
        "measured_lo": largest["time_lo"],
        "measured_hi": largest["time_hi"],
        "predicted_s": at_largest,
        "predicted_lo": lo,
        "predicted_hi": hi,
        "verdict": _verdict(largest, lo, hi, at_largest / largest["time_s"] - 1),
    }


def rank_count_table(collectives: pd.DataFrame, fits: pd.DataFrame) -> pd.DataFrame:
    """The ring law's rank-count dependence, checked: per strategy, network, remedy, source
    and placement, the alpha-beta fit of the fewest ranks predicts every larger rank count
    it was not fitted on, at every message size measured there (contaminated cells left
    out, as from the fits). Median and worst relative error, and at the largest message
    the measured interval beside the prediction's over the basis's beta interval."""
    rows: list[dict[str, Any]] = []
    usable = collectives[collectives["quality"].fillna("") != "contaminated"]
    if usable.empty or fits.empty:
        return pd.DataFrame(columns=RANKS_COLUMNS)
    usable = _with_placement(usable)
    fitted = _with_placement(fits[fits["status"] == "ok"])
    for key, group in usable.groupby(RANKS_GROUP, sort=True, dropna=False):
        named = dict(zip(RANKS_GROUP, key, strict=True))
        bases = fitted.merge(pd.DataFrame([named]), on=RANKS_GROUP)
        if bases.empty:
            continue
        basis = bases.sort_values("world_size").iloc[0]
        for ranks in sorted(r for r in set(group["world_size"]) if r > basis["world_size"]):
            rows.append({**named, **_rank_row(group, basis, ranks)})
    return pd.DataFrame(rows, columns=RANKS_COLUMNS)
