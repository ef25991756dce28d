"""Model FLOPs utilisation: per cell against the device's measured matmul peak, and at
each fitted throughput ceiling."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dpscale.analysis.results.rows import with_comm
from dpscale.plan.columns import FIT_GROUP


def matmul_peak(system: dict[str, Any]) -> dict[str, Any]:
    """The device's measured dense matmul peak (system.matmul_peak), {} when not measured."""
    peak = system.get("matmul_peak") or {}
    return peak if peak.get("tflop_s") else {}


def mfu_columns(system: dict[str, Any], achieved_tflop_s: float, world_size: int) -> dict[str, Any]:
    """Model FLOPs utilisation: achieved training TFLOP/s per device over the device's measured
    matmul peak. ``achieved_tflop_s`` is global (all devices), hence the division by world size;
    NaN without a measured peak."""
    peak = matmul_peak(system)
    tflop_s = float(peak["tflop_s"]) if peak else math.nan
    return {
        "peak_tflop_s": tflop_s,
        "peak_tflop_s_ci95": float(peak.get("ci95", math.nan)) if peak else math.nan,
        "peak_dtype": peak.get("dtype"),
        "mfu": achieved_tflop_s / world_size / tflop_s,
    }


def add_fit_mfu(fit_table: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """MFU at the throughput ceiling: v0 (per device) x training FLOPs per sample over the
    measured peak of the group's cells (their median); NaN without a measured peak."""
    cells = with_comm(cells)
    table = fit_table.copy()
    table["peak_tflop_s"] = math.nan
    table["mfu_ceiling"] = math.nan
    if table.empty or cells.empty or "peak_tflop_s" not in cells.columns:
        return table
    per_group = cells.groupby(FIT_GROUP).agg(
        peak_tflop_s=("peak_tflop_s", "median"), flops=("train_flops_per_sample", "first")
    )
    for index, row in table.iterrows():
        key = tuple(row[k] for k in FIT_GROUP)
        if key not in per_group.index:
            continue
        peak, flops = per_group.loc[key, "peak_tflop_s"], per_group.loc[key, "flops"]
        table.loc[index, "peak_tflop_s"] = peak
        table.loc[index, "mfu_ceiling"] = row["v0"] * flops / 1e12 / peak
    return table
