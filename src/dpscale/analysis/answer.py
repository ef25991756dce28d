"""One answer first: the study's question answered in a short paragraph per model, from the
tables the findings already read (cost.csv, findings rows, cells.csv)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dpscale.analysis.cost import Prices, cheapest, money
from dpscale.analysis.findings import matching_rows
from dpscale.analysis.words import delta_words, is_known, layout_words, readable_model
from dpscale.plan.columns import LAYOUT


def _fastest(costs: pd.DataFrame) -> dict[str, Any]:
    """The layout with the most img/s at the largest per-device batch measured."""
    largest = costs[costs["batch_per_device"] == costs["batch_per_device"].max()]
    return largest.sort_values("img_s", ascending=False).iloc[0].to_dict()


def _finding(findings: pd.DataFrame, row: dict[str, Any]) -> dict[str, Any] | None:
    mine = matching_rows(findings, row, LAYOUT)
    return mine.iloc[0].to_dict() if not mine.empty else None


def _choice(row: dict[str, Any], finding: dict[str, Any] | None) -> str:
    where = layout_words(int(row["nodes"]), int(row["devices_per_node"]), row["network"])
    batch = int(row["batch_per_device"])
    text = (
        f"choose {row['strategy']} on {where}: {row['img_s']:.0f} img/s "
        f"(±{row['img_s_ci95']:.0f}) at per-device batch {batch} "
        f"(global {batch * int(row['world_size'])})"
    )
    if row["world_size"] == 1:
        return text + ", faster than every multi-device layout measured"
    even = finding.get("break_even_global_batch") if finding else math.nan
    if is_known(even) and math.isinf(even):
        return text + "; by the fitted laws it never beats one device at the same global batch"
    if is_known(even):
        return text + f"; it beats one device from global batch {max(math.ceil(even), 1)}"
    return text


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
    same = ["strategy", "network", "nodes", "devices_per_node", "batch_per_device"]
    if best and all(best[k] == row[k] for k in same):
        text += (
            f"; a run of {prices.run_epochs:g} epochs, start-up included, takes "
            f"{best['run_s'] / 60:.1f} min for {money(best['run_cost'], prices)}, the cheapest "
            f"run of any layout{deadline}"
        )
    elif best:
        where = layout_words(int(best["nodes"]), int(best["devices_per_node"]), best["network"])
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


def _accuracy(finding: dict[str, Any] | None) -> str:
    if not finding:
        return "its accuracy cost is not measured (no training runs)"
    deltas = [k for k in finding if k.startswith("accuracy_delta_") and not k.endswith("ci95")]
    for key in deltas:
        if is_known(finding[key]):
            half = finding.get(f"{key}_ci95", math.nan)
            return f"{delta_words(100 * finding[key], 100 * half)} ({key.split('_')[-1]} rule)"
    return "its accuracy cost is not measured (no training runs)"


def answer_paragraph(
    findings: pd.DataFrame, costs: pd.DataFrame, prices: Prices | None, quality: str
) -> str:
    """Per model: which layout to choose and from which global batch, what it costs, what it
    costs in accuracy; then how much to trust it (the cells' measurement quality)."""
    if costs.empty:
        return f"No cell was measured, so there is no answer yet. {quality}"
    sentences = []
    for model, mine in costs.groupby("model", sort=True):
        row = _fastest(mine)
        finding = _finding(findings, row)
        sentences.append(
            f"For {readable_model(model)}, {_choice(row, finding)}. It costs "
            f"{_cost(row, mine, prices)}; {_accuracy(finding)}."
        )
    return " ".join(sentences) + f" {quality}"
