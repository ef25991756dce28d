"""The loss breakdown (analysis.results.loss_breakdown) in words: per layout, its efficiency,
each term in points with its interval, and the largest term, or the tie where intervals
overlap; the landing answer's line for its chosen layout."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from dpscale.analysis.laws.words import is_known, readable_model
from dpscale.analysis.results.loss_breakdown import TERM_WORDS, TERMS
from dpscale.plan.columns import LAYOUT
from dpscale.plan.layout import Layout

# what narrows a term that its interval cannot tell from zero
TO_RESOLVE = "more timed windows per cell would narrow it (measure.windows)"


def interval(points: float, half: float, unit: str = "") -> str:
    """``12 [9, 15]`` points (``91% [87%, 95%]`` with ``unit`` "%"); ``12 (no interval)``
    where none is known."""
    if not is_known(half):
        return f"{points:.0f}{unit} (no interval)"
    return f"{points:.0f}{unit} [{points - half:.0f}{unit}, {points + half:.0f}{unit}]"


def term_words(term: str, points: float, half: float) -> str:
    """One term in points with its interval; one whose interval reaches zero says so."""
    words = f"{TERM_WORDS[term]} {interval(points, half)}"
    if is_known(half) and points - half <= 0 <= points + half:
        words += " (not resolved from zero)"
    return words


def largest_words(row: Mapping[str, Any]) -> str:
    """The largest term in points, or the tie its interval makes with others."""
    top = row.get("largest_term")
    if not isinstance(top, str) or not top:
        return "no term lost efficiency beyond its interval"
    ties = row.get("largest_tied_with")
    tied = [t for t in ties.split(",") if t] if isinstance(ties, str) else []  # CSV: NaN
    value = interval(row[f"{top}_points"], row[f"{top}_points_ci95"])
    if not tied:
        return f"the largest is {TERM_WORDS[top]}, {value} points"
    others = " and ".join(TERM_WORDS[t] for t in tied)
    return (
        f"the largest is a tie: {TERM_WORDS[top]} ({value} points) with {others} "
        "(their intervals overlap)"
    )


def layout_words(row: Mapping[str, Any]) -> str:
    where = Layout.from_row(row).words(str(row["network"]))
    data = ", your images" if row["mode"] == "folder" else ""
    return f"{row['strategy']}, {where}, batch {int(row['batch_per_device'])} per device{data}"


def breakdown_sentence(row: Mapping[str, Any]) -> str:
    """``torch-ddp, 1 node x 2 devices, batch 16 per device: 78% [74, 82] of one device's
    throughput per device; of the 22 [18, 26] points lost, ...; the largest is ...``"""
    terms = [
        term_words(term, row[f"{term}_points"], row[f"{term}_points_ci95"])
        for term in TERMS
        if is_known(row[f"{term}_points"]) and not (term == "left" and row["left_points"] == 0)
    ]
    missing = [TERM_WORDS[t] for t in TERMS if not is_known(row[f"{t}_points"]) and t != "left"]
    efficiency = interval(100 * row["efficiency"], 100 * row["efficiency_ci95"], "%")
    lost = interval(row["lost_points"], row["lost_points_ci95"])
    sentence = (
        f"{layout_words(row)}: {efficiency} of one device's throughput per device; of the "
        f"{lost} points lost, {'; '.join(terms)}; {largest_words(row)}"
    )
    if missing:
        sentence += f" (not measured: {', '.join(missing)})"
    if row.get("time_shared") is True or str(row.get("time_shared")) == "True":
        sentence += "; its ranks time-shared the cores, which the contention term holds"
    return sentence + "."


def breakdown_sentences(breakdown: pd.DataFrame) -> list[str]:
    return [breakdown_sentence(row) for _, row in breakdown.iterrows()]


def chosen_line(breakdown: pd.DataFrame, chosen: Mapping[str, Any]) -> str | None:
    """The landing line for the answer's chosen layout (strategy, model, network, nodes,
    devices per node): its breakdown at the largest batch it was split at, or None where
    its controls did not run."""
    if breakdown.empty:
        return None
    rows = breakdown[breakdown["mode"] == "synthetic"]
    for column in LAYOUT:
        rows = rows[rows[column].astype(str) == str(chosen[column])]
    if rows.empty:
        return None
    row = rows.sort_values("batch_per_device").iloc[-1]
    return (
        f"Where the chosen layout for {readable_model(str(row['model']))} loses efficiency "
        f"(control cells): {breakdown_sentence(row)}"
    )


def shown_table(breakdown: pd.DataFrame) -> pd.DataFrame:
    """The breakdown as the report's page shows it: a row per layout, its efficiency and
    each term in points with their intervals, the largest term; tables/ keeps every column."""
    rows = []
    for _, row in breakdown.iterrows():
        shown = {
            "layout": layout_words(row),
            "efficiency": interval(100 * row["efficiency"], 100 * row["efficiency_ci95"], "%"),
        }
        for term in TERMS:
            points = row[f"{term}_points"]
            shown[f"{TERM_WORDS[term]} (points)"] = (
                interval(points, row[f"{term}_points_ci95"]) if is_known(points) else "not measured"
            )
        shown["largest"] = largest_words(row)
        rows.append(shown)
    return pd.DataFrame(rows)
