"""Report figures of the training mode: accuracy curves and epoch time vs devices."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.analysis.results.rows import without_remedies  # noqa: E402
from dpscale.render.canvas import empty_figure  # noqa: E402


def accuracy_curves(epochs: pd.DataFrame, path: Path) -> None:
    """Validation accuracy per epoch: mean over seeds with its range, 1 vs N devices per rule."""
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    epochs = without_remedies(epochs)
    if epochs.empty:
        empty_figure(path, "No training cells in this study (add 'train' to modes).")
        return
    sns.set_theme(style="whitegrid")
    data = epochs.assign(
        configuration=epochs["world_size"].astype(str)
        + " dev, b="
        + epochs["global_batch"].astype(str)
        + ", lr "
        + epochs["lr_rule"]
    )
    grid = sns.relplot(
        data=data,
        x="epoch",
        y="val_accuracy",
        hue="configuration",
        col="strategy",
        row="model",
        kind="line",
        errorbar=("pi", 100),
        marker="o",
        height=3.2,
        aspect=1.2,
        facet_kws={"sharey": True},
    )
    grid.set_axis_labels("epoch", "validation accuracy")
    grid.set_titles(row_template="{row_name}", col_template="{col_name}")
    grid.figure.savefig(path, dpi=100)
    plt.close(grid.figure)


def epoch_time_figure(runs: pd.DataFrame, path: Path) -> None:
    """Mean training time per epoch against device count, one line per per-device batch."""
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    runs = without_remedies(runs)
    ok = runs[runs["status"] == "ok"]
    if ok.empty:
        empty_figure(path, "No training cells in this study (add 'train' to modes).")
        return
    sns.set_theme(style="whitegrid")
    data = ok.assign(batch=ok["batch_per_device"].astype(str))
    grid = sns.relplot(
        data=data,
        x="world_size",
        y="mean_epoch_train_s",
        hue="batch",
        style="strategy",
        col="model",
        kind="line",
        marker="o",
        errorbar=("pi", 100),
        height=3.5,
        aspect=1.2,
    )
    grid.set_axis_labels("devices (world size)", "training seconds per epoch")
    grid.set_titles(col_template="{col_name}")
    for axis in grid.axes.flat:
        axis.set_xticks(sorted(ok["world_size"].unique()))
        axis.set_ylim(bottom=0)
    grid.figure.savefig(path, dpi=100)
    plt.close(grid.figure)
