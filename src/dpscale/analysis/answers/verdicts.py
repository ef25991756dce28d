"""The findings in words: each layout's verdict (throughput, accuracy, start-up, cost) and
the top findings as sentences."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dpscale.analysis.laws.words import (
    delta_words,
    even_interval,
    is_known,
    percent_words,
    readable_model,
    speedup_words,
)
from dpscale.plan.layout import Layout, plural

NOT_MEASURED = "not measured"
NOT_PREDICTED = "not predicted"
MAX_PREDICTIONS_LISTED = 4
# a value whose 95% half-width exceeds this fraction of it is too wide to tell: unresolved
UNRESOLVED_FRACTION = 0.5


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
            f"{text}; for a run shorter than {plural(below, 'image')} ({plural(steps, 'step')}) "
            f"{reference} finishes first"
        )
    return text


def predictions_words(rows: pd.DataFrame, label: Any) -> str:
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


def folder_verdict(row: dict[str, Any]) -> str | None:
    """'with your input pipeline (mode folder) at per-device batch 32, 2 devices give
    speed-up 1.4x [1.3, 1.5] over 1 device reading the same folder'; None without one."""
    speedup = row.get("folder_speedup", math.nan)
    if not is_known(speedup):
        return None
    half = row.get("folder_speedup_ci95", math.nan)
    if is_known(half) and math.isfinite(half):
        interval = f"{speedup:.2f}x [{speedup - half:.2f}, {speedup + half:.2f}]"
        if half > UNRESOLVED_FRACTION * speedup:
            interval = f"unresolved: {interval}"
    else:
        interval = f"{speedup:.2f}x (no interval)"
    return (
        f"with your input pipeline (mode folder) at per-device batch "
        f"{int(row['folder_batch_per_device'])}, {int(row['world_size'])} devices give "
        f"speed-up {interval} over 1 device reading the same folder"
    )


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
    folder = folder_verdict(row)
    lost = lost_to_contamination(row, cells_dir)
    if throughput is None and accuracy is None and folder is None:
        return f"{NOT_MEASURED}: no 1-device baseline to compare with" + (
            f"; {lost}" if lost else ""
        )
    if throughput is None:
        throughput = f"throughput {NOT_MEASURED} (training runs only)"
    parts = (throughput, folder, accuracy, startup_verdict(row), cost_verdict(row), lost)
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
