"""Your image folder against synthetic data: per layout and per-device batch, the synthetic,
folder and loader-alone img/s with their 95% intervals (analysis.answers.input_pipeline's
points), on a log axis: a loader alone can run far ahead of training."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.analysis.answers.input_pipeline import RATES  # noqa: E402
from dpscale.analysis.laws.words import readable_model  # noqa: E402
from dpscale.plan.columns import NODES, WORLD_SIZE  # noqa: E402
from dpscale.plan.layout import Layout  # noqa: E402
from dpscale.render.canvas import empty_figure  # noqa: E402

SHOWN = dict(zip(RATES, ("synthetic data", "your folder", "the loader alone"), strict=True))
MARKS = dict(zip(RATES, "os^", strict=True))


def _label(row: pd.Series) -> str:
    where = Layout.from_row(row).bar_label(row["network"])
    return f"{row['strategy']}, {where}, b={int(row['batch_per_device'])}\n" + readable_model(
        row["model"]
    )


def pipeline_figure(points: pd.DataFrame, path: Path) -> None:
    """One row per point, the three img/s as marks with interval bars, offset so they never
    hide one another; a rate not measured is left out."""
    if points.empty:
        empty_figure(path, "No folder cell ran: nothing to set against synthetic data.")
        return
    points = points.sort_values(["model", "strategy", NODES, WORLD_SIZE, "batch_per_device"])
    labels = [_label(row) for _, row in points.iterrows()]
    figure, axis = plt.subplots(figsize=(9, 1.6 + 0.6 * len(points)), layout="constrained")
    rows = np.arange(len(points))
    for offset, name in zip((-0.2, 0.0, 0.2), RATES, strict=True):
        mean = points[f"{name}_img_s"].astype(float)
        half = points[f"{name}_ci95"].astype(float).fillna(0.0)
        known = mean.notna().to_numpy()
        axis.errorbar(
            mean[known],
            rows[known] + offset,
            xerr=half[known],
            fmt=MARKS[name],
            capsize=3,
            label=SHOWN[name],
        )
    axis.set_yticks(rows, labels, fontsize="small")
    axis.invert_yaxis()
    axis.set_xscale("log")
    axis.grid(axis="x", which="both", alpha=0.3)
    axis.set_xlabel("img/s over all devices (mean, 95% interval; log scale)")
    figure.legend(ncols=3, fontsize="small", loc="outside upper center")
    figure.savefig(path, dpi=100)
    plt.close(figure)
