"""Which communication remedy helps most per slow network and layout (RANK_RULE), and the
best remedy's columns of findings.csv."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.laws.fits import intervals_overlap
from dpscale.analysis.laws.words import batch_words, even_interval
from dpscale.plan.columns import DEVICES_PER_NODE, MODE_LAYOUT, NETWORK, NODES, RUN
from dpscale.plan.remedies import BY_FIDELITY, remedy_of

# How far each remedy's update departs from synchronous SGD on exact gradients, least first,
# is each remedy's declared fidelity (plan.remedies.Remedy.fidelity); no remedy comes first,
# and a bucket size alone (none's key) with it.
RANK_RULE = (
    "the largest gain over no remedy at the largest per-device batch measured, among gains "
    "resolved above 1; where gains' 95% intervals overlap, the smaller break-even global "
    "batch; where those overlap too, the remedy that changes the update least (a bucket size, "
    "then " + ", ".join(remedy.name for remedy in BY_FIDELITY[1:]) + ")"
)


def _slow_points(table: pd.DataFrame) -> pd.DataFrame:
    """Remedy rows on a network slower than the fastest one measured for their layout."""
    between_nodes = table[table["fastest_network"].notna()]
    return between_nodes[between_nodes["network"] != between_nodes["fastest_network"]]


def _helps(point: pd.DataFrame) -> pd.Series:
    """Whether each remedy's gain is resolved above 1 (its whole 95% interval)."""
    return point["gain_vs_none"] - point["gain_vs_none_ci95"].fillna(0.0) > 1


def _tied_at(point: pd.DataFrame) -> pd.DataFrame:
    """The remedies at one measured point whose gain intervals overlap the largest gain's,
    largest gain first; among those whose gain is resolved above 1 where any is."""
    helping = point[_helps(point)]
    ordered = (helping if not helping.empty else point).sort_values("gain_vs_none", ascending=False)
    half = ordered["gain_vs_none_ci95"].fillna(0.0)
    top = ordered["gain_vs_none"].iloc[0]
    return ordered[top - ordered["gain_vs_none"] <= half + half.iloc[0]]


def _fidelity(comm: str) -> int:
    """A remedy key's declared fidelity (``powersgd-r2`` -> powersgd's), smaller: closer to
    the exact gradient; a key no declared remedy names is an error (plan.remedies.remedy_of)."""
    return remedy_of(comm).fidelity


def _even(row: dict[str, Any]) -> tuple[float, float]:
    even = row["break_even_global_batch"]
    return (math.inf, math.nan) if pd.isna(even) else (float(even), row[f"{EVEN}_ci95"])


EVEN = "break_even_global_batch"


def _pick(tied: pd.DataFrame) -> tuple[dict[str, Any], str]:
    """Of tied remedies, RANK_RULE's choice after the gain: the smaller break-even batch where
    the intervals separate it, else the remedy that changes the update least; and the words
    for the criterion that decided."""
    rows = tied.to_dict("records")
    if len(rows) == 1:
        return rows[0], ""
    smallest = min((_even(row) for row in rows), key=lambda even: even[0])
    kept = [row for row in rows if intervals_overlap(*_even(row), *smallest)]
    if len(kept) < len(rows):
        chosen = min(kept, key=lambda row: (_even(row)[0], _fidelity(row["comm"])))
        return chosen, "by the smaller break-even batch"
    chosen = min(kept, key=lambda row: (_fidelity(row["comm"]), row["comm"]))
    evens = " and ".join(f"{row['comm']} {break_even_words(*_even(row))}" for row in kept)
    return chosen, (
        f"their break-even batches overlap too: {evens}; so by the one that changes the "
        "update least"
    )


@dataclass(frozen=True)
class Ranking:
    """RANK_RULE's outcome for one layout on one slow network: the pick, the remedies tied
    with it, the one that gains most at the smallest batch where that is another (else None),
    the words for the criterion that decided, and the remedies whose gain is not resolved
    above 1 at the largest batch while another's is."""

    chosen: dict[str, Any]
    tied: pd.DataFrame
    other: dict[str, Any] | None
    why: str
    unresolved: pd.DataFrame

    @property
    def helps(self) -> bool:
        return self.chosen["gain_vs_none"] - _zero_if_nan(self.chosen["gain_vs_none_ci95"]) > 1


def _zero_if_nan(value: float) -> float:
    return 0.0 if pd.isna(value) else float(value)


def ranked(table: pd.DataFrame) -> Iterator[Ranking]:
    """Per strategy, model, slow network and layout: RANK_RULE's Ranking."""
    if table.empty:
        return
    for _, layout in _slow_points(table).groupby(MODE_LAYOUT, sort=True):
        batches = sorted(layout["batch_per_device"].unique())
        largest = layout[layout["batch_per_device"] == batches[-1]]
        tied = _tied_at(largest)
        chosen, why = _pick(tied)
        other = None
        if len(batches) > 1:
            at_smallest = _tied_at(layout[layout["batch_per_device"] == batches[0]])
            if chosen["comm"] not in set(at_smallest["comm"]):
                other = at_smallest.iloc[0].to_dict()
        helps = _helps(largest)
        unresolved = largest[~helps] if helps.any() else largest.iloc[0:0]
        yield Ranking(chosen, tied[tied["comm"] != chosen["comm"]], other, why, unresolved)


def best_remedies(table: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, model, slow network and layout, the remedy RANK_RULE picks, where its
    gain is resolved above 1."""
    if table.empty:
        return table
    return pd.DataFrame([r.chosen for r in ranked(table) if r.helps])


def break_even_words(even: float, half: float = math.nan) -> str:
    """A break-even global batch with its 95% interval in words ("not fitted" when NaN)."""
    if math.isnan(even):
        return "not fitted"
    return batch_words(even) + even_interval(even, half)


def findings_columns(
    findings: pd.DataFrame, table: pd.DataFrame, accuracy: pd.DataFrame
) -> pd.DataFrame:
    """findings.csv's remedy columns: per finding row (strategy, model, network, layout),
    the best remedy, its gain over no remedy and its accuracy delta."""
    best = best_remedies(table)
    out = findings.copy()
    for column in (
        "best_remedy",
        "best_remedy_gain",
        "best_remedy_recovered",
        "best_remedy_accuracy_delta",
    ):
        out[column] = math.nan if column != "best_remedy" else None
    if best.empty or findings.empty:
        return out
    keys = [k for k in (*RUN, NODES, NETWORK, DEVICES_PER_NODE) if k in findings]
    for index, row in out.iterrows():
        match = best[np.logical_and.reduce([best[k] == row[k] for k in keys])]
        if match.empty:
            continue
        top = match.iloc[0]
        out.at[index, "best_remedy"] = top["comm"]
        out.at[index, "best_remedy_gain"] = top["gain_vs_none"]
        out.at[index, "best_remedy_recovered"] = top["fraction_recovered"]
        delta = (
            accuracy[(accuracy["strategy"] == top["strategy"]) & (accuracy["comm"] == top["comm"])]
            if not accuracy.empty
            else accuracy
        )
        if len(delta):
            out.at[index, "best_remedy_accuracy_delta"] = delta["accuracy_delta_vs_none"].iloc[0]
    return out
