"""The model's verdict in sentences: held-out error against the 10% target per strategy,
model and validation scheme, next to the noise floor."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from dpscale.analysis.laws.commmodel.analysis import GroupModel
from dpscale.analysis.laws.commmodel.validation import BASELINE


def summary_lines(groups: list[GroupModel], summary: pd.DataFrame) -> list[str]:
    """One sentence per strategy, model and validation scheme (the chosen form), against
    the 10% target; or why there is no model."""
    lines = []
    for group in groups:
        name = f"{group.strategy} {group.model}"
        if group.chosen is None:
            lines.append(f"{name}: no model ({group.reason or 'not enough data'}).")
            continue
        rows = summary[
            (summary["strategy"] == group.strategy)
            & (summary["model"] == group.model)
            & (summary["overlap"] == group.chosen)
        ]
        others = ", ".join(
            f"{form} {error:.1%}"
            for form, error in group.loo_error.items()
            if form != group.chosen and np.isfinite(error)
        )
        for row in rows.itertuples(index=False):
            if row.status != "ok":
                lines.append(_not_fitted_line(name, group, row.scheme, summary))
                continue
            verdict = "meets" if row.median_abs_relative_error <= 0.10 else "misses"
            lines.append(
                f"{name}, {row.scheme} ({group.chosen} overlap): median |error| "
                f"{row.median_abs_relative_error:.1%} over {row.predicted_cells} configurations, "
                f"{verdict} the 10% target; {row.within_10pct} within 10%; worst {row.worst}; "
                f"{_coverage(row)}."
            )
        if others:
            lines.append(f"{name}: other overlap forms, {group.cell_scheme}: {others}.")
        lines += _noise_floor_line(name, group, summary)
    return lines or ["not enough data: no strategy has 1-rank and multi-rank cells."]


WIDE_INTERVAL = 2.0  # an interval whose top is twice its bottom tells little


def _coverage(row) -> str:
    """How many measurements fell inside their 95% prediction interval, and whether those
    intervals were narrow enough for that to mean anything."""
    text = (
        f"{row.within_interval} of {row.predicted_cells} measured inside their 95% prediction "
        f"interval"
    )
    ratio = row.interval_hi_over_lo_median
    if np.isfinite(ratio) and ratio > WIDE_INTERVAL:
        text += (
            f" (unresolved: the intervals span a median {ratio:.1f}x, top over bottom; more "
            "configurations, batch sizes or layouts, in the cells fitted would narrow them)"
        )
    return text


def _not_fitted_line(name: str, group: GroupModel, scheme: str, summary: pd.DataFrame) -> str:
    """The chosen form could not be fitted without the held-out cells: what the forms with
    fewer parameters that could be fitted achieved, if any."""
    others = validated_rows(summary, group, scheme)
    others = others[others["overlap"] != group.chosen]
    if others.empty:
        return f"{name}, {scheme}: not enough data."
    fitted = "; ".join(
        f"{row.overlap} overlap: median |error| {row.median_abs_relative_error:.1%} over "
        f"{row.predicted_cells} configurations, {row.within_10pct} within 10%, worst {row.worst}, "
        f"{_coverage(row)}"
        for row in others.itertuples(index=False)
    )
    return (
        f"{name}, {scheme}: the chosen {group.chosen} overlap has more parameters than those "
        f"cells can fit; the forms that fit: {fitted}."
    )


def validated_rows(
    summary: pd.DataFrame, group: GroupModel, scheme: str | Collection[str]
) -> pd.DataFrame:
    """The summary rows of one strategy, model and scheme (or any of several: the cells
    held out one at a time or in folds, validation.CELL_SCHEMES) that predicted something,
    every overlap form."""
    schemes = [scheme] if isinstance(scheme, str) else list(scheme)
    return summary[
        (summary["strategy"] == group.strategy)
        & (summary["model"] == group.model)
        & summary["scheme"].isin(schemes)
        & (summary["status"] == "ok")
    ]


def _noise_floor_line(name: str, group: GroupModel, summary: pd.DataFrame) -> list[str]:
    rows = validated_rows(summary, group, BASELINE)
    if rows.empty:
        return []
    return [
        f"{name}: noise floor: a straight line per layout through its other batches "
        f"(2 parameters per layout) predicts a held-out cell with median |error| "
        f"{rows['median_abs_relative_error'].iloc[0]:.1%}; the windows of one cell scatter by "
        f"{group.window_cv:.1%} (median coefficient of variation)."
    ]
