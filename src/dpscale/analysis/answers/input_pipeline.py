"""What a user's image folder costs: per layout, the synthetic cell's img/s beside the same
layout reading the folder through its framework's pipeline (mode folder) and that loader
alone, and which binds (the loader, or the training step: device and network)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dpscale.plan.columns import NETWORK, RUN, SPREAD
from dpscale.plan.remedies import NO_REMEDY

LAYOUT_KEY = [*RUN, NETWORK, *SPREAD, "batch_per_device"]
COLUMNS = [
    *LAYOUT_KEY,
    "input_pipeline",
    "synthetic_img_s",
    "folder_img_s",
    "loader_alone_img_s",
    "folder_over_synthetic",
    "binds",
    "images_skipped",
]


def img_s_words(mean: float, half: float) -> str:
    """ "148 [141, 155] img/s"; "not measured" where there is no mean."""
    if not (isinstance(mean, float | int) and math.isfinite(mean)):
        return "not measured"
    if not (isinstance(half, float | int) and math.isfinite(half)):
        return f"{mean:.3g} img/s (no interval)"
    return f"{mean:.3g} [{mean - half:.3g}, {mean + half:.3g}] img/s"


def _ok(cells: pd.DataFrame, mode: str) -> pd.DataFrame:
    return cells[(cells["mode"] == mode) & (cells["status"] == "ok") & (cells["comm"] == NO_REMEDY)]


def _binds(row: Any, tie: bool) -> str:
    """The loader where the loader alone keeps less than 1.2x ahead of training (the cell's
    own verdict), else the training step; a tie with the synthetic cell says the folder
    costs nothing the intervals can tell."""
    if row.bound_by == "loader":
        return "the loader (alone it delivers under 1.2x what training takes)"
    step = "the training step (device and network), not the loader"
    return f"{step}; the folder costs nothing the intervals tell (tie)" if tie else step


def pipeline_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per folder cell that ran, beside the synthetic cell of its layout (where
    measured); every img/s with its 95% interval."""
    if cells.empty or "mode" not in cells or "pipeline_img_s_mean" not in cells:
        return pd.DataFrame(columns=COLUMNS)
    folder = _ok(cells, "folder")
    synthetic = _ok(cells, "synthetic").set_index(LAYOUT_KEY)
    rows = []
    for row in folder.itertuples(index=False):
        key = tuple(getattr(row, column) for column in LAYOUT_KEY)
        base = synthetic.loc[[key]].iloc[0] if key in synthetic.index else None
        s_mean = base["img_s_mean"] if base is not None else math.nan
        s_half = base["img_s_ci95"] if base is not None else math.nan
        f_mean, f_half = row.img_s_mean, row.img_s_ci95
        tie = base is not None and abs(f_mean - s_mean) <= f_half + s_half
        rows.append(
            {
                **dict(zip(LAYOUT_KEY, key, strict=True)),
                "input_pipeline": row.input_pipeline,
                "synthetic_img_s": img_s_words(s_mean, s_half),
                "folder_img_s": img_s_words(f_mean, f_half),
                "loader_alone_img_s": img_s_words(row.pipeline_img_s_mean, row.pipeline_img_s_ci95),
                "folder_over_synthetic": f_mean / s_mean if base is not None else math.nan,
                "binds": _binds(row, tie),
                "images_skipped": row.images_skipped,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
