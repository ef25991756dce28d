"""Where each layout's lost efficiency goes: one waterfall per layout, from one device's 100%
down term by term (analysis.results.loss_breakdown) to the layout's efficiency, each step
with its 95% interval; a term not measured is left out and says so in the panel."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.analysis.laws.words import readable_model  # noqa: E402
from dpscale.analysis.results.loss_breakdown import TERM_WORDS, TERMS  # noqa: E402
from dpscale.plan.columns import NODES, WORLD_SIZE  # noqa: E402
from dpscale.plan.layout import Layout  # noqa: E402
from dpscale.render.canvas import empty_figure  # noqa: E402

COLUMNS_OF_PANELS = 3
# the axis' short names of the terms (the caption and the page say each in full)
SHORT = {
    "contention": "contention",
    "waiting": "waiting",
    "exposed_comm": "exchange",
    "input_pipeline": "input",
    "left": "not split",
}
TERM_COLOURS = dict(
    zip(TERMS, ("#4c72b0", "#dd8452", "#c44e52", "#8172b3", "#937860"), strict=True)
)
KEPT_COLOUR = "#55a868"


def panel_title(row: pd.Series) -> str:
    where = Layout.from_row(row).bar_label(row["network"])
    data = "your images" if row["mode"] == "folder" else "synthetic"
    return (
        f"{row['strategy']}, {where}, b={int(row['batch_per_device'])} ({data})\n"
        f"{readable_model(row['model'])}"
    )


def draw_waterfall(axis: plt.Axes, row: pd.Series) -> None:
    """100% for one device, then each measured term as a bar down from where the last ended,
    then the layout's efficiency; every bar with its 95% interval."""
    level, labels, position = 100.0, ["one device"], 0
    axis.bar(position, level, color=KEPT_COLOUR)
    skipped = []
    for term in TERMS:
        points, half = row[f"{term}_points"], row[f"{term}_points_ci95"]
        if points != points:
            skipped.append(TERM_WORDS[term])
            continue
        if term == "left" and abs(points) < 1e-9:
            continue
        position += 1
        axis.bar(position, -points, bottom=level, color=TERM_COLOURS[term])
        axis.errorbar(
            position,
            level - points,
            yerr=0 if math.isnan(half) else half,
            fmt="none",
            ecolor="black",
            capsize=3,
        )
        level -= points
        labels.append(SHORT[term])
    position += 1
    efficiency, half = 100 * row["efficiency"], 100 * row["efficiency_ci95"]
    axis.bar(position, efficiency, color=KEPT_COLOUR)
    axis.errorbar(
        position,
        efficiency,
        yerr=0 if math.isnan(half) else half,
        fmt="none",
        ecolor="black",
        capsize=3,
    )
    labels.append("this layout")
    axis.set_xticks(range(len(labels)), labels, fontsize="small", rotation=30, ha="right")
    axis.set_ylim(0, max(105.0, level + 5))
    axis.set_ylabel("efficiency, % of one device per device")
    axis.set_title(panel_title(row), fontsize="small")
    axis.grid(axis="y", alpha=0.3)
    if skipped:
        axis.text(
            0.99,
            0.98,
            "not measured: " + "; ".join(skipped),
            transform=axis.transAxes,
            ha="right",
            va="top",
            fontsize="xx-small",
            wrap=True,
        )


def loss_figure(breakdown: pd.DataFrame, path: Path) -> None:
    """One panel per breakdown row, in the table's layout order."""
    if breakdown.empty:
        empty_figure(path, "No layout ran its control cells: no loss to split (config controls).")
        return
    rows = breakdown.sort_values(["model", "strategy", NODES, WORLD_SIZE, "batch_per_device"])
    count = len(rows)
    across = min(COLUMNS_OF_PANELS, count)
    down = -(-count // across)
    figure, axes = plt.subplots(
        down, across, figsize=(4.2 * across, 3.6 * down), squeeze=False, layout="constrained"
    )
    for axis, (_, row) in zip(axes.flat, rows.iterrows(), strict=False):
        draw_waterfall(axis, row)
    for axis in list(axes.flat)[count:]:
        axis.set_visible(False)
    figure.savefig(path, dpi=100)
    plt.close(figure)
