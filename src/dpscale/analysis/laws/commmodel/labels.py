"""What a prediction is: measured, an interpolation, or an extrapolation in ranks, bandwidth
or batch beyond what the model was fitted on, and how well that kind was checked (the
held-out scheme that tests it, or "not validated")."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpscale.analysis.laws.commmodel.analysis import GroupModel
from dpscale.analysis.laws.commmodel.summary import validated_rows
from dpscale.analysis.laws.commmodel.validation import (
    CELL_SCHEMES,
    FEWEST_RANKS,
    LEAVE_ONE_NETWORK_OUT,
)

# The held-out schemes that check each kind of prediction; batch has none. Interpolation:
# the cells held out one at a time or in folds (a group has one of the two)
SCHEME_FOR: dict[str, tuple[str, ...]] = {
    "interpolates": CELL_SCHEMES,
    "ranks": (FEWEST_RANKS,),
    "bandwidth": (LEAVE_ONE_NETWORK_OUT,),
}


@dataclass(frozen=True)
class MeasuredRange:
    """What the model was fitted on: rank count, batches and the links between nodes."""

    max_ranks: int
    batch_min: float
    batch_max: float
    bandwidth_min_bit_s: float  # NaN: no link between nodes was measured
    bandwidth_max_bit_s: float

    @classmethod
    def of(cls, group: GroupModel) -> MeasuredRange:
        obs = group.obs
        between_nodes = set(obs.loc[obs["nodes"] > 1, "network"].astype(str))
        rates = [
            link.bits_per_s
            for name, link in group.links.items()
            if name in between_nodes and np.isfinite(link.bytes_per_s)
        ]
        return cls(
            max_ranks=int(obs["world_size"].max()),
            batch_min=float(obs["batch_per_device"].min()),
            batch_max=float(obs["batch_per_device"].max()),
            bandwidth_min_bit_s=min(rates) if rates else math.nan,
            bandwidth_max_bit_s=max(rates) if rates else math.nan,
        )


def extrapolated(
    measured: MeasuredRange, ranks: int, batch: float, nodes: int, bandwidth_bit_s: float
) -> list[str]:
    """The dimensions in which a configuration lies outside what was measured."""
    out = []
    if ranks > measured.max_ranks:
        out.append("ranks")
    if nodes > 1 and not (
        measured.bandwidth_min_bit_s * (1 - 1e-9)
        <= bandwidth_bit_s
        <= measured.bandwidth_max_bit_s * (1 + 1e-9)
    ):
        out.append("bandwidth")  # NaN bounds: no link measured, so any network is outside
    if not measured.batch_min <= batch <= measured.batch_max:
        out.append("batch")
    return out


def scheme_error(
    summary: pd.DataFrame, group: GroupModel, scheme: str | Collection[str]
) -> tuple[float, str]:
    """The held-out median |error| of ``scheme`` (or of whichever of several schemes the
    group was checked by; chosen form, else the best form fitted), with its words naming
    the scheme; NaN and "not validated" where the scheme predicted nothing."""
    rows = validated_rows(summary, group, scheme)
    if rows.empty:
        return math.nan, "not validated"
    chosen = rows[rows["overlap"] == group.chosen]
    row = (chosen if not chosen.empty else rows.nsmallest(1, "median_abs_relative_error")).iloc[0]
    form = "" if row["overlap"] == group.chosen else f", {row['overlap']} form"
    error = float(row["median_abs_relative_error"])
    return error, f"{error:.0%} ({row['scheme']}{form})"


def label(
    dimensions: list[str], group: GroupModel, summary: pd.DataFrame
) -> tuple[str, float, str]:
    """(kind, the largest validated median |error| of its dimensions, in words); the error
    is NaN when any dimension was never validated."""
    if not dimensions:
        error, words = scheme_error(summary, group, SCHEME_FOR["interpolates"])
        return "interpolates", error, words
    parts, errors = [], []
    for dimension in dimensions:
        scheme = SCHEME_FOR.get(dimension)
        error, words = (
            scheme_error(summary, group, scheme) if scheme else (math.nan, "not validated")
        )
        parts.append(f"{dimension}: {words}")
        errors.append(error)
    worst = max(errors) if all(np.isfinite(errors)) else math.nan
    return f"extrapolates in {', '.join(dimensions)}", worst, "; ".join(parts)
