"""The study's measurement quality in one sentence, for the landing page."""

from __future__ import annotations

import pandas as pd

from dpscale.analysis.results.again import again_sentence
from dpscale.plan.layout import plural


def quality_line(cells: pd.DataFrame) -> str:
    """The study's measurement quality in one sentence, for the landing page: every cell of
    cells.csv measured ok, remedies' cells included (the landing page quotes them too)."""
    measured = cells[cells["status"] == "ok"] if "status" in cells.columns else cells.iloc[:0]
    if measured.empty or "quality" not in measured.columns:
        return "Measurement quality: no cell was measured."
    counts = measured["quality"].astype("string").fillna("unknown").value_counts()
    parts = [
        f"{counts.get(q, 0)} {q}" for q in ("noisy", "contaminated", "unknown") if counts.get(q, 0)
    ]
    line = f"Measurement quality: {counts.get('ok', 0)} of {len(measured)} measured cells ok"
    line += f", {', '.join(parts)}" if parts else ""
    if counts.get("contaminated", 0):
        line += " (contaminated cells are left out of the fits)"
    foreign = measured.get("foreign_cpu_cores_mean")
    if foreign is not None and foreign.notna().any():
        worst = measured.loc[foreign.idxmax()]
        line += f"; the worst foreign load was {worst['foreign_cpu_cores_mean']:.2f} cores"
        line += f" ({worst['cell_id']})" if "cell_id" in measured.columns else ""
    line += _oversubscribed_words(measured)
    second = again_sentence(measured)
    return line + "." + (f" {second}" if second else "")


def _oversubscribed_words(measured: pd.DataFrame) -> str:
    """How many cells ran more ranks than CPUs, and how many of them were network-bound."""
    if "oversubscribed" not in measured.columns:
        return ""
    over = measured[measured["oversubscribed"].astype("boolean").fillna(False)]
    if over.empty:
        return ""
    kept = int((over["quality"] != "contaminated").sum())
    cores = over.get("cell_cpu_cores_mean")
    most = f", their ranks used at most {cores.max():.2f} cores" if cores is not None else ""
    return (
        f"; {plural(len(over), 'cell')} ran more ranks than CPUs (oversubscribed){most}: "
        f"{kept} network-bound and kept, {len(over) - kept} left out"
    )
