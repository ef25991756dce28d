"""Cells measured once more, after the last cell, when the machine was quiet (config
``measure.again``): which ones, and which of a cell's two results the tables use.

Both results are kept (``<cell>.json`` and ``<cell>.again.json``); the tables use the
better one and say which (columns ``measured_again``, ``first_quality``, ``kept``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from dpscale.plan.layout import plural

# better first: a quiet measurement, then a noisy one, then one whose quiet is unknown
QUALITY_ORDER = ("ok", "noisy", "unknown", "contaminated")


def to_measure_again(results: Iterable[dict[str, Any]], qualities: Iterable[str]) -> list[str]:
    """The ids of the measured cells whose quality is one of ``qualities``; never a drift
    probe, whose measurement means something only at the time it ran."""
    wanted = set(qualities)
    return sorted(
        r["cell"]["cell_id"]
        for r in results
        if r["status"] == "ok" and r.get("quality") in wanted and not r["cell"].get("drift_probe")
    )


def _rank(result: dict[str, Any]) -> tuple[int, float]:
    quality = result.get("quality") or "unknown"
    order = QUALITY_ORDER.index(quality) if quality in QUALITY_ORDER else len(QUALITY_ORDER)
    foreign = (result["system"].get("contention") or {}).get("foreign_cpu_cores_mean")
    return order, math.inf if foreign is None else foreign


def better_result(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """The result the tables use, with ``measured_again`` saying which was kept and why: the
    second only when it measured and was quieter (better quality, or the same quality with
    less foreign CPU); otherwise the first."""
    kept_again = again["status"] == "ok" and _rank(again) < _rank(first)
    chosen = dict(again if kept_again else first)
    chosen["measured_again"] = {
        "first_quality": first.get("quality"),
        "kept": "again" if kept_again else "first",
    }
    return chosen


def with_second_measurements(
    results: list[dict[str, Any]], again: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``results`` with each cell that was measured again replaced by its better result."""
    second = {r["cell"]["cell_id"]: r for r in again}
    return [
        better_result(r, second[r["cell"]["cell_id"]]) if r["cell"]["cell_id"] in second else r
        for r in results
    ]


def again_sentence(cells: Any) -> str:
    """One sentence for the landing page on the cells measured again; empty when none was."""
    if "measured_again" not in cells.columns:
        return ""
    again = cells[cells["measured_again"].fillna(False).astype(bool)]
    if again.empty:
        return ""
    kept = int((again["kept"] == "again").sum())
    firsts = ", ".join(sorted(set(again["first_quality"].dropna().astype(str))))
    return (
        f"{plural(len(again), 'cell')} read {firsts} and {'was' if len(again) == 1 else 'were'} "
        "measured again after the last cell; "
        f"the tables use the second measurement for {kept} and the first for {len(again) - kept} "
        "(the quieter of the two; both results are kept)."
    )
