"""Start-up per layout: launch to the first timed window by phase (runner.startup), and from
which run length a layout that starts later but steps faster finishes first."""

from __future__ import annotations

import math

import pandas as pd

from dpscale.analysis.results.rows import without_remedies
from dpscale.plan.columns import LAYOUT
from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.result import STARTUP_PHASES

PHASE_COLUMNS = [f"startup_{phase}_s" for phase in STARTUP_PHASES]
# what a real run pays before its first step has finished: every phase but dpscale's own
# warm-up steps (a real run's later steps are steps of the run)
PAID_PHASES = PHASE_COLUMNS[:-1]


def measured(cells: pd.DataFrame) -> pd.DataFrame:
    """The ok synthetic cells, with a ``network`` column and the start-up a run pays
    (NaN for results written before start-up was recorded)."""
    ok = cells[(cells["status"] == "ok") & (cells["mode"] == "synthetic")].copy()
    ok["network"] = ok["network"].fillna(HOST_NETWORK) if "network" in ok else HOST_NETWORK
    for column in ("startup_s", *PHASE_COLUMNS):
        if column not in ok.columns:
            ok[column] = math.nan
    ok["startup_paid_s"] = ok[PAID_PHASES].sum(axis=1, min_count=len(PAID_PHASES))
    return ok


def _ci95(values: pd.Series) -> float:
    from scipy import stats  # here: importing scipy.stats takes ~0.5 s of each job

    if len(values) < 2:
        return math.nan
    return float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))


def startup_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per layout: its cells' mean phases, the mean time to the first window and to
    the end of the first step, with 95% intervals over the cells (batch sizes and repeats)."""
    cells = without_remedies(cells)
    ok = measured(cells)
    ok = ok[ok["startup_s"].notna()]
    columns = [*LAYOUT, "cells", *PHASE_COLUMNS, "startup_s", "startup_s_ci95"]
    columns += ["startup_paid_s", "startup_paid_s_ci95"]
    if ok.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for key, group in ok.groupby(LAYOUT, sort=True):
        row = dict(zip(LAYOUT, key, strict=True))
        row["cells"] = len(group)
        row.update({column: float(group[column].mean()) for column in PHASE_COLUMNS})
        for total in ("startup_s", "startup_paid_s"):
            row[total] = float(group[total].mean())
            row[f"{total}_ci95"] = _ci95(group[total])
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=columns)


def crossover_images(
    start_a_s: float, rate_a: float, start_b_s: float, rate_b: float
) -> tuple[float, str]:
    """Run length in images at which layouts a and b (start-up s, img/s) finish together,
    and which finishes first in longer runs: ("a" or "b"); inf when one is never caught up.

    a run of I images takes start + I / rate, so they tie at
    I* = (start_b - start_a) / (1 / rate_a - 1 / rate_b)."""
    per_image_gap = 1 / rate_a - 1 / rate_b  # > 0: b steps faster
    start_gap = start_b_s - start_a_s  # > 0: a starts sooner
    if per_image_gap == 0:
        return math.inf, "a" if start_gap > 0 else "b"
    longer = "b" if per_image_gap > 0 else "a"
    images = start_gap / per_image_gap
    return (images if images > 0 else 0.0), longer


def mean_rate(cells: pd.DataFrame) -> pd.DataFrame:
    """Mean global img/s and paid start-up per layout and per-device batch (over repeats)."""
    ok = measured(cells)
    keys = [*LAYOUT, "batch_per_device"]
    if ok.empty:
        return pd.DataFrame(columns=[*keys, "img_s", "img_s_ci95", "startup_paid_s"])
    grouped = ok.groupby(keys, sort=True)
    table = grouped.agg(
        img_s=("img_s_mean", "mean"),
        img_s_ci95=("img_s_ci95", "mean"),
        startup_paid_s=("startup_paid_s", "mean"),
        accelerator=("accelerator", "first"),
    )
    return table.reset_index()
