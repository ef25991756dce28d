"""One answer first: the study's question answered in a short paragraph per model, from the
tables the findings already read (cost.csv, findings rows, cells.csv)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.answers.cost import Prices, cheapest, money
from dpscale.analysis.answers.findings import matching_rows
from dpscale.analysis.laws.fits import intervals_overlap
from dpscale.analysis.laws.words import (
    batch_words,
    delta_words,
    even_interval,
    is_known,
    readable_model,
)
from dpscale.plan.columns import DEVICES_PER_NODE, LAYOUT, NETWORK, NODES
from dpscale.plan.layout import Layout

TIE_RULE = (
    "the smaller break-even batch, then fewer nodes, then fewer devices, then fewer node-hours "
    "per 1,000 images; never a name"
)


def _tied(costs: pd.DataFrame) -> pd.DataFrame:
    """The layouts at the largest per-device batch measured whose img/s 95% intervals
    overlap the fastest's, fastest first."""
    largest = costs[costs["batch_per_device"] == costs["batch_per_device"].max()]
    ordered = largest.sort_values("img_s", ascending=False)
    top = ordered.iloc[0]
    half = ordered["img_s_ci95"].fillna(0.0)
    overlaps = top["img_s"] - ordered["img_s"] <= half + (half.iloc[0])
    return ordered[overlaps]


def _break_even(row: dict[str, Any], findings: pd.DataFrame) -> tuple[float, float]:
    """The global batch from which this layout beats one device and its 95% half-width:
    0 for one device itself, infinite where unknown (a tie rule must not prefer what was
    not measured)."""
    if row["world_size"] == 1:
        return 0.0, 0.0
    finding = _finding(findings, row) or {}
    even = finding.get("break_even_global_batch", math.nan)
    if not is_known(even):
        return math.inf, math.nan
    return float(even), float(finding.get("break_even_global_batch_ci95", math.nan))


def _where(row: dict[str, Any]) -> str:
    return Layout(int(row["nodes"]), int(row["devices_per_node"])).words(row["network"])


def _even_words(row: dict[str, Any], findings: pd.DataFrame) -> str:
    even, half = _break_even(row, findings)
    return _batch(even) + even_interval(even, half)


def _by_break_even(
    tied: list[dict[str, Any]], findings: pd.DataFrame
) -> tuple[list[dict[str, Any]], str]:
    """The tied layouts whose break-even interval overlaps the smallest one's, and the words
    for what the criterion decided ("" where it separated none)."""
    evens = [_break_even(row, findings) for row in tied]
    best = min(range(len(tied)), key=lambda i: evens[i][0])
    kept = [row for row, e in zip(tied, evens, strict=True) if intervals_overlap(*e, *evens[best])]
    dropped = [row for row in tied if row not in kept]
    if not dropped:
        return kept, ""
    if all(row["world_size"] == 1 for row in kept):
        return kept, "one device needs no break-even batch"
    mine = " and ".join(_even_words(row, findings) for row in kept)
    against = ", ".join(_even_words(row, findings) for row in dropped)
    return kept, (f"it beats one device from the smaller global batch: {mine} against {against}")


def _by_fewer(rows: list[dict[str, Any]], key: str, words: str) -> tuple[list[dict[str, Any]], str]:
    fewest = min(row[key] for row in rows)
    kept = [row for row in rows if row[key] == fewest]
    return kept, (words if len(kept) < len(rows) else "")


def _decide(tied: list[dict[str, Any]], findings: pd.DataFrame) -> tuple[dict[str, Any], str]:
    """TIE_RULE's criteria in order, each keeping the layouts it cannot separate; the words
    say which criteria decided, and that the break-even batches tie where they do."""
    kept, why = _by_break_even(tied, findings)
    reasons = [why] if why else []
    if len(kept) > 1:
        evens = " and ".join(_even_words(row, findings) for row in kept)
        overlap = f"their break-even global batches overlap: {evens}; so "
        for key, words in (
            ("nodes", "the layout with fewer nodes"),
            ("world_size", "fewer devices"),
        ):
            kept, why = _by_fewer(kept, key, overlap + words)
            if why:
                reasons.append(why)
                break
    if len(kept) > 1:
        kept, why = _by_node_hours(kept)
        reasons.append(why)
    return kept[0], "; ".join(reasons)


def _by_node_hours(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The rule's last criterion: fewer node-hours per 1,000 images (their means, as their
    intervals overlap); where even those are equal, every one of ``rows`` is named and the
    choice is any of them (the fastest mean is shown), never one picked by its name."""
    names = " and ".join(f"{row['strategy']} on {_where(row)}" for row in rows)
    hours = [float(row["node_hours_per_1000_images"]) for row in rows]
    fewest = min(hours)
    if sum(math.isclose(h, fewest, rel_tol=1e-9) for h in hours) > 1:
        return rows, f"the tie rule cannot separate {names}: either serves equally"
    best = rows[hours.index(fewest)]
    against = ", ".join(f"{h:.3g}" for h, row in zip(hours, rows, strict=True) if row is not best)
    return [best], (
        f"the tie rule's earlier criteria cannot separate {names}, so the one with fewer "
        f"node-hours per 1,000 images (means, within each other's intervals): "
        f"{fewest:.3g} against {against}"
    )


def _tie_words(tied: list[dict[str, Any]], chosen: dict[str, Any], why: str) -> str:
    """Who tied, with their numbers, and which the tie rule picks and why."""
    batch = int(chosen["batch_per_device"])
    named = " and ".join(
        f"{row['strategy']} on {_where(row)} ({row['img_s']:.0f} ±{row['img_s_ci95']:.0f} img/s)"
        for row in tied
    )
    return (
        f"{named} tie at per-device batch {batch} (their 95% intervals overlap); "
        f"by the rule for a tie ({TIE_RULE}), choose {chosen['strategy']} on "
        f"{_where(chosen)}: {why}"
    )


def _pick(costs: pd.DataFrame, findings: pd.DataFrame) -> tuple[dict[str, Any], str]:
    """The layout to recommend and the words that name it: the fastest at the largest
    per-device batch, or, where intervals overlap, the tied layout the tie rule picks."""
    tied = _tied(costs).to_dict("records")
    if len(tied) == 1:
        multi = bool((costs["world_size"] > 1).any())
        return tied[0], _choice(tied[0], _finding(findings, tied[0]), multi)
    chosen, why = _decide(tied, findings)
    return chosen, _tie_words(tied, chosen, why)


def chosen_layouts(findings: pd.DataFrame, costs: pd.DataFrame) -> list[dict[str, Any]]:
    """Per model, the layout the answer chooses (its LAYOUT columns and more)."""
    if costs.empty:
        return []
    return [_pick(mine, findings)[0] for _, mine in costs.groupby("model", sort=True)]


def _finding(findings: pd.DataFrame, row: dict[str, Any]) -> dict[str, Any] | None:
    mine = matching_rows(findings, row, LAYOUT)
    return mine.iloc[0].to_dict() if not mine.empty else None


def _choice(row: dict[str, Any], finding: dict[str, Any] | None, multi: bool = True) -> str:
    """The recommendation; a single device is "faster" only where several were measured."""
    batch = int(row["batch_per_device"])
    text = (
        f"choose {row['strategy']} on {_where(row)}: {row['img_s']:.0f} img/s "
        f"(±{row['img_s_ci95']:.0f}) at per-device batch {batch} "
        f"(global {batch * int(row['world_size'])})"
    )
    if row["world_size"] == 1:
        return text + (", faster than every multi-device layout measured" if multi else "")
    return text + _beats(row, finding)


def _beats(row: dict[str, Any], finding: dict[str, Any] | None) -> str:
    if row["world_size"] == 1:
        return ""
    even = finding.get("break_even_global_batch") if finding else math.nan
    if is_known(even) and math.isinf(even):
        return "; by the fitted laws it never beats one device at the same global batch"
    if is_known(even):
        half = finding.get("break_even_global_batch_ci95", math.nan) if finding else math.nan
        return f"; it beats one device from global batch {_batch(even)}{even_interval(even, half)}"
    return ""


def _batch(even: float) -> str:
    """A break-even global batch as the batch to run: the next whole one, at least 1."""
    return batch_words(even) if math.isinf(even) else str(max(math.ceil(even), 1))


def _cost(row: dict[str, Any], costs: pd.DataFrame, prices: Prices | None) -> str:
    if prices is None:
        return (
            f"{row['node_hours_per_1000_images']:.2g} node-hours per 1,000 images; "
            "money: no price given (add a cost section to the config)"
        )
    text = f"{money(row['cost_per_1000_images'], prices)} per 1,000 images"
    if is_known(row["cost_per_epoch"]):
        text += f", {money(row['cost_per_epoch'], prices)} per epoch"
    best = cheapest(costs, prices)
    deadline = f" within {prices.deadline_hours:g} h" if prices.deadline_hours else ""
    same = ["strategy", NETWORK, NODES, DEVICES_PER_NODE, "batch_per_device"]
    if best and all(best[k] == row[k] for k in same):
        text += (
            f"; a run of {prices.run_epochs:g} epochs, start-up included, takes "
            f"{best['run_s'] / 60:.1f} min for {money(best['run_cost'], prices)}, the cheapest "
            f"run of any layout{deadline}"
        )
    elif best:
        where = Layout(int(best["nodes"]), int(best["devices_per_node"])).words(best["network"])
        text += (
            f"; the cheapest run of {prices.run_epochs:g} epochs{deadline}, start-up included, is "
            f"{best['strategy']} on {where} at per-device batch {int(best['batch_per_device'])}: "
            f"{money(best['run_cost'], prices)} in {best['run_s'] / 60:.1f} min"
        )
    elif best == {}:
        text += (
            f"; no layout finishes {prices.run_epochs:g} epochs within {prices.deadline_hours} h"
        )
    return text + f" (prices: {prices.source}, {prices.date})"


def _accuracy_of(finding: dict[str, Any]) -> str | None:
    """Every learning-rate rule's accuracy delta of this finding, in words (None if none)."""
    parts = []
    for rule in sorted(_rules(finding)):
        delta = finding.get(f"accuracy_delta_{rule}", math.nan)
        if is_known(delta):
            words = delta_words(
                100 * delta,
                100 * finding.get(f"accuracy_delta_{rule}_ci95", math.nan),
                finding.get(f"accuracy_seeds_{rule}", math.nan),
                finding.get(f"accuracy_seeds_for_1pt_{rule}", math.nan),
            )
            parts.append(f"under the {rule} learning-rate rule, {words}")
    return "; ".join(parts) or None


def _rules(finding: dict[str, Any]) -> set[str]:
    prefix = "accuracy_delta_"
    return {
        key.removeprefix(prefix)
        for key in finding
        if key.startswith(prefix) and not key.endswith("_ci95")
    }


def _accuracy(row: dict[str, Any], findings: pd.DataFrame) -> str:
    """The chosen layout's accuracy cost: from its own model's training runs, else from the
    same strategy training another model on as many devices (synchronous data parallelism
    computes the same update wherever the devices are; the sentence names what was trained)."""
    own = _finding(findings, row)
    words = _accuracy_of(own) if own else None
    if words:
        return f"its accuracy cost: {words}"
    others = matching_rows(findings, row, ["strategy", "world_size"])
    if others.empty:
        return "its accuracy cost is not measured (no training runs with this strategy)"
    same_place = np.logical_and.reduce([others[k] == row[k] for k in LAYOUT[2:]])
    for other in others.assign(_elsewhere=~same_place).sort_values("_elsewhere").to_dict("records"):
        words = _accuracy_of(other)
        if words:
            where = (
                f" on {_where(other)} ({int(row['world_size'])} devices as well)"
                if other["_elsewhere"]
                else " and layout"
            )
            return (
                f"its accuracy cost, measured by training {readable_model(other['model'])} "
                f"with the same strategy{where}: {words}"
            )
    return "its accuracy cost is not measured (no training runs with this strategy and layout)"


def model_coverage(cells: pd.DataFrame) -> str:
    """Where the strategies did not all measure the same models (a zoo model is built by its
    own framework's strategies only): which measured which, said once. Every comparison of
    strategies is made within one model, so only on a model they all measured."""
    if cells.empty or not {"strategy", "model", "status"} <= set(cells.columns):
        return ""
    measured = cells[cells["status"] == "ok"]
    everyone = set(measured["strategy"])
    partial = [
        f"{model} by {' and '.join(sorted(set(mine['strategy'])))} only"
        for model, mine in measured.groupby("model", sort=True)
        if set(mine["strategy"]) != everyone
    ]
    if not partial:
        return ""
    return (
        f"Not every strategy measured every model: {'; '.join(partial)}. Each model's "
        "answer compares only the strategies that measured it."
    )


def answer_paragraph(
    findings: pd.DataFrame, costs: pd.DataFrame, prices: Prices | None, quality: str
) -> str:
    """Per model: which layout to choose and from which global batch, what it costs, what it
    costs in accuracy; then how much to trust it (the cells' measurement quality)."""
    if costs.empty:
        return f"No cell was measured, so there is no answer yet. {quality}"
    sentences = []
    for model, mine in costs.groupby("model", sort=True):
        row, choice = _pick(mine, findings)
        sentences.append(
            f"For {readable_model(model)}, {choice}. It costs "
            f"{_cost(row, mine, prices)}; {_accuracy(row, findings)}."
        )
    return " ".join(sentences) + f" {quality}"


def landing_notes(
    findings: pd.DataFrame, costs: pd.DataFrame, prices: Prices | None, quality: str
) -> list[str]:
    """What the landing page's answer table cannot say: per model, why that layout (the tie
    rule's steps where intervals overlap), that money needs prices, how the cells went."""
    if costs.empty:
        return [f"No throughput cell was measured, so no layout is chosen. {quality}"]
    notes = []
    for model, mine in costs.groupby("model", sort=True):
        _, choice = _pick(mine, findings)
        notes.append(f"For {readable_model(model)}, {choice}.")
    if prices is None:
        notes.append("Cost is in node-hours: no price given (add a cost section to the config).")
    return [*notes, quality]
