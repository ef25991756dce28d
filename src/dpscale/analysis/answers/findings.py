"""The answer first: one row per strategy x model x device layout, from the tidy tables.

Every measured number here is read from a table the analysis already wrote (cells, fits,
scaling, break-even, accuracy delta, time to accuracy).  Where a table has no
value for a layout the row says "not measured" (numeric columns stay NaN in the CSV; the
HTML page and the verdict spell it out).  The two predicted columns are the communication
model's (predictions.csv, analysis.laws.commmodel), labelled as predictions with their 95%
intervals and whether they interpolate or extrapolate, or "not predicted" with the reason. The
verdicts' words are analysis.answers.verdicts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.answers.startup import crossover_images
from dpscale.analysis.answers.verdicts import (
    NOT_PREDICTED,
    compression_words,
    predictions_words,
    verdict,
)
from dpscale.analysis.laws.words import is_known
from dpscale.analysis.results.rows import without_remedies
from dpscale.plan.columns import LAYOUT, NODES, RUN, WORLD_SIZE
from dpscale.plan.layout import HOST_NETWORK, Layout

THROUGHPUT_COLUMNS = [
    "batch_per_device",
    "global_batch",
    "speedup",
    "speedup_ci95",
    "efficiency",
    "efficiency_ci95",
    "break_even_global_batch",
    "break_even_global_batch_ci95",
    "b90",
    "b90_1",
]
# a study's image folder (mode folder): its own speed-up over one device reading the same
# folder, at the layout's largest per-device batch; columns only where folder cells scaled
FOLDER_COLUMNS = ["folder_batch_per_device", "folder_speedup", "folder_speedup_ci95"]
PREDICTED_COLUMNS = [
    "predicted_speedup_more_devices",
    "predicted_speedup_other_networks",
    "compression_for_90pct",
]
COST_COLUMNS = [
    "startup_s",
    "startup_reference",
    "startup_extra_s",
    "reference_first_below_images",
    "node_hours_per_1000_images",
    "cost_per_1000_images",
    "node_hours_per_epoch",
    "cost_per_epoch",
    "cost_to_target",
    "currency",
]
# read from cost.csv at the layout's largest per-device batch
PER_LAYOUT_COST = [
    "node_hours_per_1000_images",
    "cost_per_1000_images",
    "node_hours_per_epoch",
    "cost_per_epoch",
    "currency",
]


def with_network(frame: pd.DataFrame) -> pd.DataFrame:
    """The table with a ``network`` column: its own if it has one, else ``host``."""
    frame = frame.copy()
    if "network" not in frame.columns:
        frame["network"] = HOST_NETWORK
    frame["network"] = frame["network"].fillna(HOST_NETWORK)
    return frame


def layouts(cells: pd.DataFrame) -> pd.DataFrame:
    """Every multi-device layout the study asked for, measured or not, with its cell counts."""
    cells = with_network(cells)
    multi = cells[cells["world_size"] > 1]
    if multi.empty:
        return pd.DataFrame(columns=[*LAYOUT, "cells", "cells_ok", "not_ok_reason", "contaminated"])
    rows = []
    for key, group in multi.groupby(LAYOUT, sort=True):
        failed = group[group["status"] != "ok"]
        reasons = sorted({str(r) for r in failed["reason"].dropna()})
        layout = dict(zip(LAYOUT, key, strict=True))
        rows.append(
            {
                **layout,
                "cells": len(group),
                "cells_ok": int((group["status"] == "ok").sum()),
                "not_ok_reason": "; ".join(reasons) if reasons else None,
                "contaminated": contaminated_cells(cells, layout, group),
            }
        )
    return pd.DataFrame(rows)


def contaminated_cells(cells: pd.DataFrame, layout: dict[str, Any], group: pd.DataFrame) -> list:
    """The cell ids of a layout's fits that were left out as contaminated: its own cells
    and the same strategy and model's one-device cells (its baseline)."""
    if "quality" not in cells.columns or "cell_id" not in cells.columns:
        return []
    same = (cells["strategy"] == layout["strategy"]) & (cells["model"] == layout["model"])
    baseline = cells[same & (cells["world_size"] == 1)]
    both = pd.concat([group, baseline])
    return sorted(both.loc[both["quality"] == "contaminated", "cell_id"].astype(str))


def matching_rows(frame: pd.DataFrame, row: dict[str, Any], keys: list[str]) -> pd.DataFrame:
    """The rows of ``frame`` that agree with ``row`` on every key the frame has (a table
    without a ``network`` column holds one network's numbers)."""
    if frame.empty:
        return frame
    mask = np.ones(len(frame), dtype=bool)
    for key in keys:
        if key in frame.columns:
            mask &= (frame[key] == row[key]).to_numpy()
    return frame[mask]


def largest_batch_point(scaling: pd.DataFrame, mode: str, row: dict[str, Any]) -> Any:
    """The layout's scaling point of ``mode`` at its largest per-device batch; None if none."""
    points = matching_rows(scaling[scaling["mode"] == mode], row, LAYOUT)
    return None if points.empty else points.sort_values("batch_per_device").iloc[-1]


def throughput_numbers(
    row: dict[str, Any], scaling: pd.DataFrame, fits: pd.DataFrame, break_even: pd.DataFrame
) -> dict[str, float]:
    """Speedup and efficiency at the largest measured per-device batch, break-even and b90."""
    numbers = dict.fromkeys(THROUGHPUT_COLUMNS, math.nan)
    largest = largest_batch_point(scaling, "synthetic", row)
    if largest is not None:
        numbers.update(
            batch_per_device=float(largest["batch_per_device"]),
            global_batch=float(largest["batch_per_device"] * row["world_size"]),
            speedup=float(largest["speedup"]),
            speedup_ci95=float(largest["speedup_ci95"]),
            efficiency=float(largest["efficiency"]),
            efficiency_ci95=float(largest.get("efficiency_ci95", math.nan)),
        )
    ok_fits = fits[(fits["status"] == "ok") & (fits["mode"] == "synthetic")]
    fit = matching_rows(ok_fits, row, LAYOUT)
    if not fit.empty:
        numbers["b90"] = float(fit.iloc[0]["b90"])
    single = ok_fits[
        (ok_fits["strategy"] == row["strategy"])
        & (ok_fits["model"] == row["model"])
        & (ok_fits["world_size"] == 1)
    ]
    if not single.empty:
        numbers["b90_1"] = float(single.iloc[0]["b90"])
    even = matching_rows(break_even[break_even["mode"] == "synthetic"], row, LAYOUT)
    if not even.empty:
        numbers["break_even_global_batch"] = float(even.iloc[0]["break_even_global_batch"])
        numbers["break_even_global_batch_ci95"] = float(
            even.iloc[0].get("break_even_global_batch_ci95", math.nan)
        )
    return numbers


def folder_numbers(row: dict[str, Any], scaling: pd.DataFrame) -> dict[str, float]:
    """The layout's speed-up reading the user's image folder (mode folder) over one device
    reading it, at its largest per-device batch with a folder speed-up; NaN where none."""
    numbers = dict.fromkeys(FOLDER_COLUMNS, math.nan)
    largest = largest_batch_point(scaling, "folder", row)
    if largest is not None:
        numbers.update(
            folder_batch_per_device=float(largest["batch_per_device"]),
            folder_speedup=float(largest["speedup"]),
            folder_speedup_ci95=float(largest["speedup_ci95"]),
        )
    return numbers


def _largest_batch(frame: pd.DataFrame) -> pd.DataFrame:
    if frame.empty or "batch_per_device" not in frame.columns:
        return frame
    return frame.sort_values("batch_per_device").tail(1)


def accuracy_numbers(
    row: dict[str, Any], deltas: pd.DataFrame, tta: pd.DataFrame, rules: list[str]
) -> dict[str, float]:
    """Final-accuracy delta (with its 95% half-width, the seeds run and the seeds that would
    resolve one point) and time-to-accuracy speedup of this layout under every learning-rate
    rule, at its largest per-device training batch; NaN where that run does not exist. The
    accuracy tables key layouts by world size only."""
    keys = [*RUN, "world_size"]
    numbers: dict[str, float] = {}
    for rule in rules:
        numbers[f"accuracy_delta_{rule}"] = math.nan
        numbers[f"accuracy_delta_{rule}_ci95"] = math.nan
        numbers[f"accuracy_seeds_{rule}"] = math.nan
        numbers[f"accuracy_seeds_for_1pt_{rule}"] = math.nan
        numbers[f"tta_speedup_{rule}"] = math.nan
        delta = deltas if deltas.empty else deltas[deltas["lr_rule"] == rule]
        delta = _largest_batch(matching_rows(delta, row, keys))
        if not delta.empty:
            numbers[f"accuracy_delta_{rule}"] = float(delta.iloc[0]["final_delta"])
            numbers[f"accuracy_delta_{rule}_ci95"] = float(delta.iloc[0]["final_delta_ci95"])
            numbers[f"accuracy_seeds_{rule}"] = float(delta.iloc[0].get("seeds", math.nan))
            needed = delta.iloc[0].get("final_delta_seeds_for_1pt", math.nan)
            numbers[f"accuracy_seeds_for_1pt_{rule}"] = float(needed)
        times = tta if tta.empty else tta[tta["lr_rule"] == rule]
        times = _largest_batch(matching_rows(times, row, keys))
        if not times.empty:
            numbers[f"tta_speedup_{rule}"] = float(times.iloc[0]["speedup"])
    return numbers


def _cost_rows(costs: pd.DataFrame, row: dict[str, Any]) -> pd.DataFrame:
    return _largest_batch(matching_rows(costs, row, LAYOUT))


def startup_reference(row: dict[str, Any], costs: pd.DataFrame) -> pd.DataFrame:
    """What a layout's start-up is compared with: one node with as many devices when the
    layout spans nodes and that was measured, else one device; at the layout's batch."""
    same = costs[
        (costs["strategy"] == row["strategy"])
        & (costs["model"] == row["model"])
        & (costs["batch_per_device"] == row["batch_per_device"])
        & (costs["nodes"] == 1)
    ]
    if row["nodes"] > 1 and (same["world_size"] == row["world_size"]).any():
        return same[same["world_size"] == row["world_size"]]
    return same[same["world_size"] == 1]


def cost_numbers(
    row: dict[str, Any], costs: pd.DataFrame, to_target: pd.DataFrame
) -> dict[str, Any]:
    """Start-up against the reference layout, and node-hours and money at the layout's
    largest measured per-device batch (cost.csv); the cheapest cost to the target accuracy
    over its learning-rate rules (cost_to_target.csv)."""
    numbers: dict[str, Any] = dict.fromkeys(COST_COLUMNS, math.nan)
    numbers["startup_reference"] = numbers["currency"] = None
    mine = _cost_rows(costs, row) if not costs.empty else costs
    if not mine.empty:
        this = mine.iloc[0].to_dict()
        for column in PER_LAYOUT_COST:
            numbers[column] = this[column]
        numbers["startup_s"] = this["startup_paid_s"]
        reference = startup_reference(this, costs)
        if not reference.empty:
            other = reference.iloc[0]
            numbers["startup_reference"] = Layout(
                int(other["nodes"]), int(other["devices_per_node"])
            ).words(other["network"])
            numbers["startup_extra_s"] = this["startup_paid_s"] - other["startup_paid_s"]
            images, longer = crossover_images(
                other["startup_paid_s"], other["img_s"], this["startup_paid_s"], this["img_s"]
            )
            numbers["reference_first_below_images"] = images if longer == "b" else math.inf
    if not to_target.empty:
        keys = [*RUN, WORLD_SIZE, NODES]
        cheapest = _largest_batch(matching_rows(to_target, row, keys))["cost_to_target"].dropna()
        numbers["cost_to_target"] = float(cheapest.min()) if not cheapest.empty else math.nan
    return numbers


# why a column stays "not predicted" when the model predicted this strategy and model
WHY_NONE = dict(
    zip(
        PREDICTED_COLUMNS,
        [
            "no layout with more devices among the predictions",
            "no other network at this layout among the predictions",
            "the model gives no compression at this layout",
        ],
        strict=True,
    )
)


def not_predicted(numbers: dict[str, str], reason: str) -> dict[str, str]:
    """Every column still "not predicted", with the reason (so it never reads as a
    contradiction of a figure that draws the model's predictions elsewhere)."""
    return {
        k: f"{NOT_PREDICTED} ({reason})" if v == NOT_PREDICTED else v for k, v in numbers.items()
    }


def predicted_numbers(row: dict[str, Any], predictions: pd.DataFrame) -> dict[str, str]:
    """The model's speedups (vs 1 device, 95% intervals) at this layout's largest measured
    per-device batch: with more devices (same network, more nodes; or more devices on one
    node), and with this layout on the config's what-if networks (``predict.networks``);
    each labelled as the model's (interpolates, or extrapolates in what), or not predicted
    with the reason."""
    numbers = dict.fromkeys(PREDICTED_COLUMNS, NOT_PREDICTED)
    if row["nodes"] == 1:
        numbers[PREDICTED_COLUMNS[1]] = "one node: no network between its devices"
    if predictions.empty or "speedup" not in predictions.columns:
        return not_predicted(numbers, "the communication model made no prediction")
    batch = row.get("batch_per_device")
    mine = predictions[
        (predictions["strategy"] == row["strategy"])
        & (predictions["model"] == row["model"])
        & (predictions["status"] == "ok")
    ]
    if is_known(batch):
        mine = mine[mine["batch_per_device"] == batch]
    if mine.empty:
        why = " at this batch" if is_known(batch) else "; no throughput measured for this layout"
        return not_predicted(numbers, f"no prediction for this strategy and model{why}")
    nodes, devices = row["nodes"], row["devices_per_node"]
    if nodes == 1:
        more = mine[(mine["nodes"] == 1) & (mine["devices_per_node"] > devices)]
        more = more.drop_duplicates("devices_per_node").sort_values("devices_per_node")
        numbers[PREDICTED_COLUMNS[0]] = predictions_words(
            more, lambda r: f"{r.devices_per_node} devices"
        )
        if more.empty:  # more devices as more such nodes, on the what-if networks
            numbers[PREDICTED_COLUMNS[0]] = predictions_words(
                most_nodes(mine, devices),
                lambda r: Layout(int(r.nodes), int(r.devices_per_node)).words(r.network),
            )
    else:
        more = mine[
            (mine["network"] == row["network"])
            & (mine["devices_per_node"] == devices)
            & (mine["nodes"] > nodes)
        ].sort_values("nodes")
        numbers[PREDICTED_COLUMNS[0]] = predictions_words(more, lambda r: f"{r.nodes} nodes")
        other = mine[
            (mine["network"] != row["network"])
            & (mine["nodes"] == nodes)
            & (mine["devices_per_node"] == devices)
        ].sort_values("bandwidth_Gbit_s")
        numbers[PREDICTED_COLUMNS[1]] = predictions_words(other, lambda r: str(r.network))
    here = mine[
        (mine["network"] == row["network"])
        & (mine["nodes"] == nodes)
        & (mine["devices_per_node"] == devices)
    ]
    if not here.empty and "compression_for_90pct" in here:
        numbers[PREDICTED_COLUMNS[2]] = compression_words(here.iloc[0])
    return {k: not_predicted({k: v}, WHY_NONE[k])[k] for k, v in numbers.items()}


def most_nodes(predictions: pd.DataFrame, devices_per_node: int) -> pd.DataFrame:
    """Per network, the prediction at the most nodes of ``devices_per_node`` devices each
    (what the answer figure draws furthest right), slowest network first."""
    several = predictions[
        (predictions["nodes"] > 1) & (predictions["devices_per_node"] == devices_per_node)
    ]
    if several.empty:
        return several
    largest = several.loc[several.groupby("network")["nodes"].idxmax()]
    return largest.sort_values(["bandwidth_Gbit_s", "network"])


def lr_rules(deltas: pd.DataFrame) -> list[str]:
    if deltas.empty or "lr_rule" not in deltas.columns:
        return []
    return sorted(deltas["lr_rule"].dropna().unique())


def findings_table(
    cells: pd.DataFrame,
    scaling: pd.DataFrame,
    fits: pd.DataFrame,
    break_even: pd.DataFrame,
    deltas: pd.DataFrame | None = None,
    tta: pd.DataFrame | None = None,
    predictions: pd.DataFrame | None = None,
    cells_dir: str = "",
    costs: pd.DataFrame | None = None,
    to_target: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per strategy x model x network x multi-device layout, with a verdict."""
    cells, scaling, fits, break_even = (
        without_remedies(table) for table in (cells, scaling, fits, break_even)
    )
    predictions = predictions if predictions is not None else pd.DataFrame()
    costs = with_network(costs) if costs is not None and not costs.empty else pd.DataFrame()
    to_target, deltas, tta = (
        without_remedies(table) if table is not None else pd.DataFrame()
        for table in (to_target, deltas, tta)
    )
    rules = lr_rules(deltas)
    folder = bool((scaling["mode"] == "folder").any()) if "mode" in scaling else False
    rows = []
    for layout in layouts(cells).to_dict("records"):
        row = {**layout, **throughput_numbers(layout, scaling, fits, break_even)}
        row.update(folder_numbers(layout, scaling) if folder else {})
        row.update(accuracy_numbers(layout, deltas, tta, rules))
        row.update(predicted_numbers(row, predictions))
        row.update(cost_numbers(row, costs, to_target))
        row["verdict"] = verdict(row, rules, cells_dir)
        rows.append(row)
    accuracy_columns = [
        f"{name}_{rule}{suffix}"
        for rule in rules
        for name, suffix in (
            ("accuracy_delta", ""),
            ("accuracy_delta", "_ci95"),
            ("accuracy_seeds", ""),
            ("accuracy_seeds_for_1pt", ""),
            ("tta_speedup", ""),
        )
    ]
    columns = [
        *LAYOUT,
        "cells",
        "cells_ok",
        *THROUGHPUT_COLUMNS,
        *(FOLDER_COLUMNS if folder else []),
        *accuracy_columns,
        *PREDICTED_COLUMNS,
        *COST_COLUMNS,
        "verdict",
    ]
    return pd.DataFrame(rows).reindex(columns=columns)
