"""Model FLOPs utilisation per cell: achieved training FLOP/s per device over the device's
measured dense matmul peak (cells.csv ``mfu``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.analysis.results.rows import without_remedies  # noqa: E402
from dpscale.plan.layout import devices_words  # noqa: E402
from dpscale.render.canvas import legend_below, save_with_legends  # noqa: E402
from dpscale.render.palette import strategy_colours  # noqa: E402

NO_PEAK = (
    "MFU not measured: these results carry no matmul peak (system.matmul_peak);\n"
    "rerun the cells with a dpscale that measures it."
)


def _message(path: Path, text: str) -> None:
    figure, axis = plt.subplots(figsize=(6, 1.6))
    axis.axis("off")
    axis.text(0.5, 0.5, text, ha="center", va="center")
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)


def mfu_points(cells: pd.DataFrame) -> pd.DataFrame:
    if "mfu" not in cells.columns:
        return pd.DataFrame()
    ok = cells[(cells["status"] == "ok") & (cells["mode"] == "synthetic")]
    return ok[ok["mfu"].notna()]


def mfu_figure(cells: pd.DataFrame, path: Path, known: Sequence[str] = ()) -> None:
    """MFU (%) against per-device batch: one panel per model, colour = strategy (the
    colour it has in every figure: render.palette), marker = device count."""
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    cells = without_remedies(cells)
    points = mfu_points(cells)
    if points.empty:
        _message(path, NO_PEAK)
        return
    sns.set_theme(style="whitegrid")
    points = points.assign(
        mfu_pct=100 * points["mfu"], devices=points["world_size"].map(devices_words)
    )
    models = sorted(points["model"].unique())
    figure, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 3.2), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        sns.lineplot(
            data=points[points["model"] == model],
            x="batch_per_device",
            y="mfu_pct",
            hue="strategy",
            palette=strategy_colours(list(known), points["strategy"].unique()),
            style="devices",
            markers=True,
            ax=axis,
        )
        axis.set_xscale("log", base=2)
        axis.set_ylim(bottom=0)
        axis.set_title(model)
        axis.set_xlabel("per-device batch")
        axis.set_ylabel("MFU (% of measured matmul peak)")
        legend_below(axis)
    save_with_legends(figure, path)
