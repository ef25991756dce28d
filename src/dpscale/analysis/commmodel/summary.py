"""The model's verdict in sentences: held-out error against the 10% target per strategy,
model and validation scheme, next to the noise floor."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpscale.analysis.commmodel.analysis import GroupModel
from dpscale.analysis.commmodel.validation import BASELINE


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
                lines.append(f"{name}, {row.scheme}: not enough data.")
                continue
            verdict = "meets" if row.median_abs_relative_error <= 0.10 else "misses"
            lines.append(
                f"{name}, {row.scheme} ({group.chosen} overlap): median |error| "
                f"{row.median_abs_relative_error:.1%} over {row.predicted_cells} configurations, "
                f"{verdict} the 10% target; {row.within_10pct} within 10%; worst {row.worst}."
            )
        if others:
            lines.append(f"{name}: other overlap forms, leave one cell out: {others}.")
        lines += _noise_floor_line(name, group, summary)
    return lines or ["not enough data: no strategy has 1-rank and multi-rank cells."]


def _noise_floor_line(name: str, group: GroupModel, summary: pd.DataFrame) -> list[str]:
    rows = summary[
        (summary["strategy"] == group.strategy)
        & (summary["model"] == group.model)
        & (summary["scheme"] == BASELINE)
        & (summary["status"] == "ok")
    ]
    if rows.empty:
        return []
    return [
        f"{name}: noise floor: a straight line per layout through its other batches "
        f"(2 parameters per layout) predicts a held-out cell with median |error| "
        f"{rows['median_abs_relative_error'].iloc[0]:.1%}; the windows of one cell scatter by "
        f"{group.window_cv:.1%} (median coefficient of variation)."
    ]
