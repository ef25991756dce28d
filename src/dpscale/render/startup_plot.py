"""Start-up per layout: one stacked bar per strategy, model, layout and network, a segment
per phase (mean over the layout's cells), its 95% interval on the total."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.analysis.answers.startup import PHASE_COLUMNS  # noqa: E402
from dpscale.analysis.laws.words import readable_model  # noqa: E402
from dpscale.plan.columns import NODES, WORLD_SIZE  # noqa: E402
from dpscale.plan.layout import Layout  # noqa: E402
from dpscale.render.plots import empty_figure  # noqa: E402


def layout_label(row: pd.Series) -> str:
    return f"{row['strategy']}, {Layout.from_row(row).bar_label(row['network'])}"


def startup_figure(table: pd.DataFrame, path: Path) -> None:
    if table.empty:
        empty_figure(path, "no ok synthetic cell recorded its start-up")
        return
    table = table.sort_values(["model", "strategy", NODES, WORLD_SIZE])
    figure, axis = plt.subplots(figsize=(10, 1.8 + 0.5 * len(table)), layout="constrained")
    labels = [f"{layout_label(row)}\n{readable_model(row['model'])}" for _, row in table.iterrows()]
    left = pd.Series(0.0, index=table.index)
    colours = plt.get_cmap("tab10").colors
    for index, column in enumerate(PHASE_COLUMNS):
        phase = column.removeprefix("startup_").removesuffix("_s")
        axis.barh(labels, table[column], left=left, label=phase, color=colours[index])
        left += table[column]
    axis.errorbar(
        table["startup_s"], labels, xerr=table["startup_s_ci95"], fmt="none", color="black"
    )
    axis.invert_yaxis()
    axis.set_xlabel("seconds from the launch to the first timed window (mean over cells)")
    figure.legend(ncols=7, fontsize="small", loc="outside upper center")
    figure.savefig(path, dpi=100)
    plt.close(figure)
