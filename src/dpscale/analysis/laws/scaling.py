"""Scaling tables from the cells and their windows: throughput-law fits, run-to-run
repeatability, weak-scaling speedup and the strong-scaling break-even batch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.laws import fits
from dpscale.analysis.results.rows import with_comm
from dpscale.plan import controls, ring
from dpscale.plan.columns import FIT_GROUP, POINT

# the modes whose cells time training steps: the study's scaling table holds each on its own
# (a folder cell reads the user's images through its framework's pipeline; never pooled with
# synthetic)
THROUGHPUT_MODES = ("synthetic", "folder")

SCALING_COLUMNS = [
    *POINT,
    "img_s",
    "img_s_ci95",
    "baseline_img_s",
    "speedup",
    "speedup_ci95",
    "efficiency",
    "efficiency_ci95",
    "scaling",
]
BREAK_EVEN_COLUMNS = [
    *FIT_GROUP,
    "t_c_1",
    "t_c_n",
    "extra_constant_s",
    "break_even_global_batch",
    "break_even_global_batch_ci95",
    "gradient_bytes",
    "effective_bus_bandwidth_GB_s",
]


def fits_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One throughput-law fit per (strategy, model, mode, layout), over every timed window
    except those of contaminated cells (other work took CPU from them); ``excluded_points``
    counts the windows left out. Drift probes' windows trace the machine, not the law, and
    control cells' a layout with part of its work taken away (plan.controls)."""
    windows = with_comm(windows)
    rows = []
    if "mode" in windows:
        modes = windows["mode"].astype(str)
        windows = windows[(modes != "drift") & ~modes.str.startswith(controls.MODE_PREFIX)]
    quality = windows["quality"] if "quality" in windows else pd.Series("", index=windows.index)
    windows = windows.assign(contaminated=quality.eq("contaminated"))
    for key, everything in windows.groupby(FIT_GROUP, sort=True):
        row: dict[str, Any] = dict(zip(FIT_GROUP, key, strict=True))
        group = everything[~everything["contaminated"]]
        row["excluded_points"] = int(everything["contaminated"].sum())
        try:
            fit = fits.fit_throughput_law(group["batch_per_device"], group["step_time_s"])
        except ValueError as error:
            row.update(status="not fitted", reason=str(error))
        else:
            row.update(status="ok", reason=None, **fit.as_dict())
            row["ceiling_img_s"] = fit.v0 * row["world_size"]
        rows.append(row)
    columns = [
        *FIT_GROUP,
        "status",
        "reason",
        "v0",
        "v0_se",
        "t_c",
        "t_c_se",
        "r2",
        "points",
        "batches",
        "b90",
        "b90_se",
        "slope_t_c_cov",
        "ceiling_img_s",
        "excluded_points",
    ]
    return pd.DataFrame(rows).reindex(columns=columns)


REPEATABILITY_COLUMNS = [
    *POINT,
    "repeats",
    "img_s_mean",
    "img_s_sd",
    "img_s_cv",
    "qualities",
]


def repeatability_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Run-to-run variation: per configuration measured ``measure.repeats`` > 1 times (ok
    throughput cells), the mean, sd and coefficient of variation of the repeats' mean img/s."""
    cells = with_comm(cells)
    if cells.empty:
        return pd.DataFrame(columns=REPEATABILITY_COLUMNS)
    ok = cells[(cells["status"] == "ok") & (cells["mode"] == "synthetic")]
    rows = []
    for key, group in ok.groupby(POINT, sort=True):
        if len(group) < 2:
            continue
        rates = group["img_s_mean"].astype(float)
        quality = group["quality"] if "quality" in group else pd.Series(dtype=object)
        rows.append(
            {
                **dict(zip(POINT, key, strict=True)),
                "repeats": len(group),
                "img_s_mean": rates.mean(),
                "img_s_sd": rates.std(ddof=1),
                "img_s_cv": rates.std(ddof=1) / rates.mean(),
                "qualities": ";".join(str(q) for q in quality.fillna("unknown")),
            }
        )
    return pd.DataFrame(rows).reindex(columns=REPEATABILITY_COLUMNS)


def point_means(cells: pd.DataFrame, mode: str | tuple[str, ...] = "synthetic") -> pd.DataFrame:
    """Mean img/s per configuration over repeats (ok throughput cells of ``mode``: synthetic,
    or folder where a user's images fed the steps, or several, each its own point), with a
    95% half-width."""
    cells = with_comm(cells)
    modes = (mode,) if isinstance(mode, str) else mode
    ok = cells[(cells["status"] == "ok") & cells["mode"].isin(modes)]
    if ok.empty:
        return pd.DataFrame(columns=[*POINT, "img_s", "img_s_ci95"])
    grouped = ok.groupby(POINT, sort=True)
    means = grouped.agg(
        img_s=("img_s_mean", "mean"),
        img_s_ci95=("img_s_ci95", lambda s: float(np.sqrt((s**2).sum())) / len(s)),
    )
    return means.reset_index()


def scaling_table(cells: pd.DataFrame, mode: str | tuple[str, ...] = "synthetic") -> pd.DataFrame:
    """Weak-scaling speedup and efficiency against the 1-device cell of the same strategy,
    model and mode at the same per-device batch (the cells of ``mode`` only: the study's
    table holds every mode in THROUGHPUT_MODES, a folder layout against one device reading
    the same folder; a small run calibrating folder training its folder ones)."""
    points = point_means(cells, mode)
    base = points[points["world_size"] == 1].set_index(
        ["strategy", "model", "mode", "batch_per_device"]
    )
    rows = []
    for row in points.itertuples(index=False):
        key = (row.strategy, row.model, row.mode, row.batch_per_device)
        if key not in base.index:
            continue
        ref = base.loc[key]
        speedup = row.img_s / ref["img_s"]
        speedup_ci95 = fits.ratio_ci95(row.img_s, row.img_s_ci95, ref["img_s"], ref["img_s_ci95"])
        rows.append(
            {
                **row._asdict(),
                "baseline_img_s": ref["img_s"],
                "speedup": speedup,
                "speedup_ci95": speedup_ci95,
                "efficiency": speedup / row.world_size,
                "efficiency_ci95": speedup_ci95 / row.world_size,
                "scaling": "weak (per-device batch fixed)",
            }
        )
    return pd.DataFrame(rows).reindex(columns=SCALING_COLUMNS)


def _law(fit: Any) -> fits.LawEstimate:
    """A fits.csv row as the break-even interval reads it (a table written before the
    covariance column counts it as zero)."""
    cov = fit.get("slope_t_c_cov", math.nan)
    return fits.LawEstimate.from_fit(
        fit["v0"], fit["v0_se"], fit["t_c"], fit["t_c_se"], 0.0 if pd.isna(cov) else cov
    )


def break_even_table(fit_table: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Global batch from which N devices beat one (strong scaling), from the fitted laws,
    and the ring all-reduce bandwidth that would explain the extra constant time."""
    ok = fit_table[fit_table["status"] == "ok"]
    params = (
        cells.groupby("model")["trainable_params"].first().dropna()  # null: never built
        if not cells.empty
        else pd.Series(dtype=int)
    )
    rows = []
    for (strategy, model, mode), group in ok.groupby(["strategy", "model", "mode"]):
        single = group[group["world_size"] == 1]
        if single.empty:
            continue
        one = single.iloc[0]
        for multi in group[group["world_size"] > 1].itertuples(index=False):
            message = ring.gradient_bytes(int(params.get(model, 0)))
            rows.append(
                {
                    "strategy": strategy,
                    "model": model,
                    "mode": mode,
                    "nodes": multi.nodes,
                    "network": multi.network,
                    "comm": multi.comm,
                    "devices_per_node": multi.devices_per_node,
                    "world_size": multi.world_size,
                    "t_c_1": one["t_c"],
                    "t_c_n": multi.t_c,
                    "extra_constant_s": multi.t_c - one["t_c"],
                    "break_even_global_batch": fits.break_even_global_batch(
                        one["v0"], one["t_c"], multi.v0, multi.t_c, multi.world_size
                    ),
                    "break_even_global_batch_ci95": fits.break_even_ci95(
                        _law(one), _law(multi._asdict()), multi.world_size
                    ),
                    "gradient_bytes": message,
                    "effective_bus_bandwidth_GB_s": ring.effective_bandwidth(
                        message, multi.world_size, multi.t_c - one["t_c"]
                    )
                    / 1e9,
                }
            )
    return pd.DataFrame(rows).reindex(columns=BREAK_EVEN_COLUMNS)
