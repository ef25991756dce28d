"""The answer first: one row per strategy x model x device layout, from the tidy tables.

Every number here is read from a table the analysis already wrote (cells, fits, scaling,
break-even, accuracy delta, time to accuracy); nothing is extrapolated.  Where a table has no
value for a layout the row says "not measured" (numeric columns stay NaN in the CSV; the
HTML page and the verdict spell it out).  The two predicted columns are the communication
model's (predictions.csv, analysis.commmodel), labelled as predictions with their 95% intervals,
or "not predicted" where the model was not fitted.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.again import again_sentence
from dpscale.analysis.rows import without_remedies
from dpscale.analysis.startup import crossover_images
from dpscale.analysis.words import (
    delta_words,
    even_interval,
    is_known,
    percent_words,
    readable_model,
    speedup_words,
)
from dpscale.plan.columns import LAYOUT, NODES, RUN, WORLD_SIZE
from dpscale.plan.layout import HOST_NETWORK, Layout

NOT_MEASURED = "not measured"
NOT_PREDICTED = "not predicted"
MAX_PREDICTIONS_LISTED = 4
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
        f"; {len(over)} cells ran more ranks than CPUs (oversubscribed){most}: "
        f"{kept} network-bound and kept, {len(over) - kept} left out"
    )


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


def throughput_numbers(
    row: dict[str, Any], scaling: pd.DataFrame, fits: pd.DataFrame, break_even: pd.DataFrame
) -> dict[str, float]:
    """Speedup and efficiency at the largest measured per-device batch, break-even and b90."""
    numbers = dict.fromkeys(THROUGHPUT_COLUMNS, math.nan)
    points = matching_rows(scaling[scaling["mode"] == "synthetic"], row, LAYOUT)
    if not points.empty:
        largest = points.sort_values("batch_per_device").iloc[-1]
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


def startup_verdict(row: dict[str, Any]) -> str | None:
    """'start-up (launch to first step) 4.1 s longer than on 1 node x 2 devices; for a run
    shorter than 9,000 images (...) 1 node x 2 devices finishes first'."""
    extra, reference = row.get("startup_extra_s"), row.get("startup_reference")
    if not reference or not is_known(extra):
        return None
    sense = "longer" if extra >= 0 else "shorter"
    text = f"start-up (launch to first step) {abs(extra):.1f} s {sense} than on {reference}"
    below = row.get("reference_first_below_images")
    if is_known(below) and math.isinf(below):
        return f"{text}; {reference} finishes first at any run length"
    if is_known(below) and below > 0:
        steps = below / (row["batch_per_device"] * row["world_size"])
        return (
            f"{text}; for a run shorter than {below:,.0f} images ({steps:,.0f} steps) "
            f"{reference} finishes first"
        )
    return text


def _speedup_words(rows: pd.DataFrame, label: Any) -> str:
    """'4 nodes 2.9x [2.1, 3.8] (interpolates, held-out error 4%); 8 nodes 5.1x [3.5, 7.4]
    (extrapolates in ranks, not validated)' from prediction rows."""
    parts = []
    for row in rows.head(MAX_PREDICTIONS_LISTED).itertuples(index=False):
        parts.append(
            f"{label(row)} {row.speedup:.2g}x [{row.speedup_lo:.2g}, {row.speedup_hi:.2g}]"
            f"{_kind_words(row)}"
        )
    return "; ".join(parts) if parts else NOT_PREDICTED


def _kind_words(row: Any) -> str:
    """' (extrapolates in ranks, held-out error 14%)': what the prediction is and how well
    that kind was checked ('' for tables written before predictions said so)."""
    kind = getattr(row, "kind", None)
    if not isinstance(kind, str):
        return ""
    if kind == "measured":  # predictions are for separate machines; emulated nodes share one
        return " (layout measured; the model's value on separate machines)"
    error = getattr(row, "validated_median_abs_error", math.nan)
    checked = f"held-out error {error:.0%}" if is_known(error) else "not validated"
    return f" ({kind}, {checked})"


def predicted_numbers(row: dict[str, Any], predictions: pd.DataFrame) -> dict[str, str]:
    """The model's speedups (vs 1 device, 95% intervals) at this layout's largest measured
    per-device batch: with more devices (same network, more nodes; or more devices on one
    node), and with this layout on the config's what-if networks (``predict.networks``)."""
    numbers = dict.fromkeys(PREDICTED_COLUMNS, NOT_PREDICTED)
    if row["nodes"] == 1:
        numbers[PREDICTED_COLUMNS[1]] = "one node: no network between its devices"
    if predictions.empty or "speedup" not in predictions.columns:
        return numbers
    batch = row.get("batch_per_device")
    mine = predictions[
        (predictions["strategy"] == row["strategy"])
        & (predictions["model"] == row["model"])
        & (predictions["status"] == "ok")
    ]
    if is_known(batch):
        mine = mine[mine["batch_per_device"] == batch]
    if mine.empty:
        return numbers
    nodes, devices = row["nodes"], row["devices_per_node"]
    if nodes == 1:
        more = mine[(mine["nodes"] == 1) & (mine["devices_per_node"] > devices)]
        more = more.drop_duplicates("devices_per_node").sort_values("devices_per_node")
        numbers[PREDICTED_COLUMNS[0]] = _speedup_words(
            more, lambda r: f"{r.devices_per_node} devices"
        )
    else:
        more = mine[
            (mine["network"] == row["network"])
            & (mine["devices_per_node"] == devices)
            & (mine["nodes"] > nodes)
        ].sort_values("nodes")
        numbers[PREDICTED_COLUMNS[0]] = _speedup_words(more, lambda r: f"{r.nodes} nodes")
        other = mine[
            (mine["network"] != row["network"])
            & (mine["nodes"] == nodes)
            & (mine["devices_per_node"] == devices)
        ].sort_values("bandwidth_Gbit_s")
        numbers[PREDICTED_COLUMNS[1]] = _speedup_words(other, lambda r: str(r.network))
    here = mine[
        (mine["network"] == row["network"])
        & (mine["nodes"] == nodes)
        & (mine["devices_per_node"] == devices)
    ]
    if not here.empty and "compression_for_90pct" in here:
        numbers[PREDICTED_COLUMNS[2]] = compression_words(here.iloc[0])
    return numbers


def _efficiency_interval(row: pd.Series) -> str:
    """' [41%, 49%]': the speedup's 95% interval over the rank count, where the row has it."""
    ranks = row.get("world_size", math.nan)
    low, high = row.get("speedup_lo", math.nan), row.get("speedup_hi", math.nan)
    if not (is_known(ranks) and is_known(low) and is_known(high)):
        return ""
    return f" [{low / ranks:.0%}, {high / ranks:.0%}]"


def compression_words(row: pd.Series) -> str:
    """By how much the bytes sent must shrink for 90% efficiency on this network (model),
    with its 95% interval: '3.3x [2.3x, 15x]', '1x (none) [1x, unbounded]', 'out of reach'."""
    ratio = row["compression_for_90pct"]
    if not is_known(ratio):
        return NOT_PREDICTED
    if math.isinf(ratio):
        value = "out of reach"
    else:
        value = "1x (none)" if ratio <= 1.0 else f"{ratio:.2g}x"
    low, high = row["compression_for_90pct_lo"], row["compression_for_90pct_hi"]
    if is_known(low) and is_known(high):
        top = "unbounded" if math.isinf(high) else f"{high:.2g}x"
        bottom = "unbounded" if math.isinf(low) else f"{low:.2g}x"
        value += f" [{bottom}, {top}]"
    efficiency = f"{row['efficiency_uncompressed']:.0%}{_efficiency_interval(row)}"
    words = f"{value}; {efficiency} efficient uncompressed"
    if math.isinf(ratio):
        words += f", {row['efficiency_nothing_sent']:.0%} with nothing to send"
    where = "model, separate machines" if row.get("nodes", 2) > 1 else "model"
    return f"{words} ({where})"


def throughput_verdict(row: dict[str, Any]) -> str | None:
    """What the throughput measurements say about this layout, in words (None: nothing)."""
    n = int(row["world_size"])
    even, speedup = row["break_even_global_batch"], row["speedup"]
    parts = []
    if is_known(even) and math.isinf(even):
        parts.append(f"{n} devices never beat 1 at any global batch (fitted laws)")
    elif is_known(even) and even <= 0:
        parts.append(f"{n} devices beat 1 at every global batch (fitted laws)")
    elif is_known(even):
        interval = even_interval(even, row.get("break_even_global_batch_ci95", math.nan))
        parts.append(
            f"{n} devices beat 1 from global batch {math.ceil(even)}{interval}; below that, "
            "one device running the whole global batch is faster"
        )
    if is_known(speedup):
        batch = int(row["batch_per_device"])
        parts.append(
            f"at per-device batch {batch} (global {batch * n}) {n} devices are "
            f"{speedup_words(speedup, row.get('speedup_ci95', math.nan))} as fast as 1 "
            f"device at batch {batch} "
            f"(efficiency {percent_words(row['efficiency'], row.get('efficiency_ci95', math.nan))}"
            f"{_slower(speedup, row.get('speedup_ci95', math.nan))})"
        )
    return "; ".join(parts) if parts else None


def _slower(speedup: float, half: float) -> str:
    """Said only where the whole interval lies below 1."""
    return ", slower than one device" if speedup + (half if is_known(half) else 0) < 1 else ""


def accuracy_verdict(row: dict[str, Any], rules: list[str]) -> str | None:
    """What the training runs say about accuracy and time to accuracy, in words."""
    parts = []
    for rule in rules:
        delta = row.get(f"accuracy_delta_{rule}", math.nan)
        if not is_known(delta):
            continue
        half = row.get(f"accuracy_delta_{rule}_ci95", math.nan)
        seeds = row.get(f"accuracy_seeds_{rule}", math.nan)
        needed = row.get(f"accuracy_seeds_for_1pt_{rule}", math.nan)
        text = delta_words(100 * delta, 100 * half, seeds, needed)
        tta = row.get(f"tta_speedup_{rule}", math.nan)
        if is_known(tta):
            text += f", reaches the target {tta:.2f}x as fast"
        parts.append(f"lr rule {rule}: {text}")
    return "; ".join(parts) if parts else None


def verdict(row: dict[str, Any], rules: list[str], cells_dir: str = "") -> str:
    if row["cells_ok"] == 0:
        reason = row.get("not_ok_reason") or "no cell ran"
        return f"{NOT_MEASURED}: {reason}"
    throughput, accuracy = throughput_verdict(row), accuracy_verdict(row, rules)
    lost = lost_to_contamination(row, cells_dir)
    if throughput is None and accuracy is None:
        return f"{NOT_MEASURED}: no 1-device baseline to compare with" + (
            f"; {lost}" if lost else ""
        )
    if throughput is None:
        throughput = f"throughput {NOT_MEASURED} (training runs only)"
    parts = (throughput, accuracy, startup_verdict(row), cost_verdict(row), lost)
    return "; ".join(p for p in parts if p) + "."


def cost_verdict(row: dict[str, Any]) -> str | None:
    """'per epoch 0.10 node-hours, 0.0087 USD' (or per 1,000 images without an epoch size;
    "no price given" without prices)."""
    currency = row.get("currency")
    per_epoch, per_1000 = row.get("node_hours_per_epoch"), row.get("node_hours_per_1000_images")
    if is_known(per_epoch):
        hours, money, unit = per_epoch, row.get("cost_per_epoch"), "per epoch"
    elif is_known(per_1000):
        hours, money, unit = per_1000, row.get("cost_per_1000_images"), "per 1,000 images"
    else:
        return None
    priced = f"{money:.2g} {currency}" if is_known(money) else "no price given"
    return f"{unit} {hours:.2g} node-hours, {priced}"


def lost_to_contamination(row: dict[str, Any], cells_dir: str) -> str | None:
    """When the break-even is missing and contaminated cells were left out of its fits:
    which, and the command that measures them again."""
    ids = row.get("contaminated") or []
    if not ids or is_known(row.get("break_even_global_batch")):
        return None
    files = " ".join(f"{cells_dir.rstrip('/') + '/' if cells_dir else ''}{i}.json" for i in ids)
    return (
        f"the break-even batch is not fitted: {len(ids)} cell(s) were contaminated (other "
        f"processes used the CPU) and left out of the fits; measure them again on a quiet "
        f"machine: snakemake --forcerun {files}"
    )


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
    rows = []
    for layout in layouts(cells).to_dict("records"):
        row = {**layout, **throughput_numbers(layout, scaling, fits, break_even)}
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
        *accuracy_columns,
        *PREDICTED_COLUMNS,
        *COST_COLUMNS,
        "verdict",
    ]
    return pd.DataFrame(rows).reindex(columns=columns)


def top_findings(findings: pd.DataFrame, limit: int = 5) -> list[str]:
    """The verdicts worth reading first: measured layouts, then the rest, as sentences."""
    if findings.empty:
        return ["No multi-device layout in this study: nothing to compare with one device."]
    measured = findings["cells_ok"] > 0
    ordered = pd.concat([findings[measured], findings[~measured]])
    lines = []
    for row in ordered.head(limit).itertuples(index=False):
        where = Layout.from_row(row).words(row.network)
        lines.append(f"{row.strategy}, {readable_model(row.model)}, {where}: {row.verdict}")
    return lines
