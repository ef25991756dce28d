"""The report's figures of a study too large to draw each series or panel apart (issue 78,
render.bounds): they pool layouts, batches or windows into a median line, a box or a bar
with its spread, and say how in their titles. plots draws a figure whole while it fits
within MARK_LIMIT, ROW_LIMIT and PANEL_LIMIT and hands it here above them."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.plan.columns import NETWORK, NODES, WORLD_SIZE  # noqa: E402
from dpscale.plan.layout import devices_words  # noqa: E402
from dpscale.render.bounds import MARK_LIMIT, ROW_LIMIT  # noqa: E402
from dpscale.render.canvas import LINESTYLES, MARKERS, save_with_legends  # noqa: E402
from dpscale.render.palette import strategy_colours  # noqa: E402


def most_series(frame: pd.DataFrame, keys: Sequence[str]) -> int:
    """The most series one panel would draw: distinct ``keys`` (the first one the panel's)."""
    if frame.empty:
        return 0
    return int(frame.drop_duplicates(list(keys)).groupby(keys[0]).size().max())


def _grid(models: list[str], height: float = 3.4):
    """A pooled figure's panels, one per model, three a row (smaller than a panel drawn
    apart: the report embeds every pixel, and a pooled panel has fewer lines to tell)."""
    columns = min(3, len(models))
    rows = -(-len(models) // columns)
    size = (6.4 * columns, height * rows)
    figure, axes = plt.subplots(rows, columns, figsize=size, squeeze=False)
    for axis in axes.flat[len(models) :]:
        axis.set_visible(False)
    figure.subplots_adjust(hspace=0.45)  # a row's x label clear of the next row's titles
    return figure, dict(zip(models, axes.flat, strict=False))


def pooled_throughput_figure(ok: pd.DataFrame, path: Path, known: Sequence[str] = ()) -> None:
    """The throughput figure of a study with more layouts than a panel shows apart
    (render.bounds.MARK_LIMIT): a line per strategy and device count, the median img/s over
    its layouts (nodes, networks) at each per-device batch, shaded from their min to max."""
    colours = strategy_colours(list(known), ok["strategy"].unique())
    worlds = sorted(ok[WORLD_SIZE].unique())
    styles = {
        w: (LINESTYLES[i % len(LINESTYLES)], MARKERS[i % len(MARKERS)])
        for i, w in enumerate(worlds)
    }
    figure, panels = _grid(sorted(ok["model"].unique()))
    most = most_series(ok, ["model", "strategy", WORLD_SIZE, NODES, NETWORK])
    spread = (
        ok.groupby(["model", "strategy", WORLD_SIZE, "batch_per_device"])["img_s_mean"]
        .agg(["median", "min", "max"])
        .reset_index()
    )
    for (model, strategy, world), group in spread.groupby(["model", "strategy", WORLD_SIZE]):
        axis, colour = panels[model], colours[strategy]
        linestyle, marker = styles[world]
        axis.fill_between(
            group["batch_per_device"], group["min"], group["max"], color=colour, alpha=0.12
        )
        axis.plot(
            group["batch_per_device"],
            group["median"],
            color=colour,
            linestyle=linestyle,
            marker=marker,
            label=f"{strategy}, {devices_words(world)}",
        )
    for model, axis in panels.items():
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_title(model)
        axis.set_xlabel("per-device batch")
        axis.set_ylabel("global images/s (cells' means)")
    figure.suptitle(
        f"Up to {most:,} layouts a panel, more than {MARK_LIMIT} drawn apart: the median img/s "
        "over nodes and networks per strategy and device count (shaded: min to max)"
    )
    one_legend(figure)
    save_with_legends(figure, path)


def one_legend(figure) -> None:
    """A pooled figure's one legend under its panels (their series are the same): a legend
    under each panel would repeat it, and the report embeds every pixel."""
    entries: dict[str, object] = {}
    for axis in figure.axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    figure.legend(
        list(entries.values()),
        list(entries),
        fontsize="small",
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(4, len(entries)) or 1,
        frameon=False,
    )


def pooled_speedup_figure(scaling: pd.DataFrame, path: Path, colours: dict) -> None:
    """The speedup figure of a study with more lines than a panel shows apart
    (render.bounds.MARK_LIMIT): a line per strategy and network, the median speedup over
    its per-device batches at each device count, shaded from their min to max."""
    figure, panels = _grid(sorted(scaling["model"].unique()))
    lines = most_series(scaling, ["model", "strategy", "batch_per_device", "over"])
    spread = (
        scaling.groupby(["model", "strategy", "over", WORLD_SIZE])["speedup"]
        .agg(["median", "min", "max"])
        .reset_index()
    )
    overs = sorted(spread["over"].unique(), key=lambda over: (over != "one node", over))
    styles = dict(zip(overs, itertools.cycle(LINESTYLES), strict=False))
    markers = dict(zip(overs, itertools.cycle(MARKERS), strict=False))
    for (model, strategy, over), group in spread.groupby(["model", "strategy", "over"]):
        axis, colour = panels[model], colours[strategy]
        axis.fill_between(group[WORLD_SIZE], group["min"], group["max"], color=colour, alpha=0.12)
        axis.plot(
            group[WORLD_SIZE],
            group["median"],
            color=colour,
            linestyle=styles[over],
            marker=markers[over],
            label=f"{strategy}" + ("" if over == "one node" else f", nodes over {over}"),
        )
    top = spread[WORLD_SIZE].max()
    for model, axis in panels.items():
        axis.plot([1, top], [1, top], color="grey", linestyle="--", label="ideal")
        axis.set_ylim(bottom=0)
        axis.set_title(model)
        axis.set_xlabel("devices (world size)")
        axis.set_ylabel("speedup vs 1 device (weak scaling)")
        axis.set_xticks(sorted(spread[WORLD_SIZE].unique()))
    figure.suptitle(
        f"Up to {lines:,} lines a panel, more than {MARK_LIMIT} drawn apart: the median speedup "
        "over per-device batches per strategy and network (shaded: min to max)"
    )
    one_legend(figure)
    save_with_legends(figure, path)


def pooled_residuals_figure(merged: pd.DataFrame, path: Path, known: Sequence[str] = ()) -> None:
    """The residuals of a study with more windows in a panel than a table shows rows
    (render.bounds.ROW_LIMIT): a box per strategy at each per-device batch, every device
    count's windows in it (whiskers: 5th to 95th percentile), instead of a dot per window."""
    import seaborn as sns

    models = sorted(merged["model"].unique())
    figure, panels = _grid(models, height=3.2)
    colours = strategy_colours(list(known), merged["strategy"].unique())
    colours = {name: colours[name] for name in sorted(merged["strategy"].unique())}
    most = int(merged.groupby("model").size().max())
    for model, axis in panels.items():
        with warnings.catch_warnings():  # seaborn's boxplot passes matplotlib's old vert=
            warnings.filterwarnings("ignore", message="vert: bool", category=DeprecationWarning)
            sns.boxplot(
                data=merged[merged["model"] == model],
                x="batch_per_device",
                y="residual_pct",
                hue="strategy",
                hue_order=sorted(colours),
                palette=colours,
                whis=(5, 95),
                showfliers=False,
                linewidth=0.8,
                ax=axis,
            )
        axis.axhline(0, color="grey", linewidth=1)
        if axis.get_legend() is not None:
            axis.get_legend().remove()
        axis.set_title(model)
        axis.set_xlabel("per-device batch")
        axis.set_ylabel("measured / fitted step time - 1 (%)")
    figure.suptitle(
        f"Up to {most:,} windows a panel, more than {ROW_LIMIT:,} drawn apart: a box per "
        "strategy and batch, every device count's windows (whiskers: 5th to 95th percentile)"
    )
    one_legend(figure)
    save_with_legends(figure, path)


def pooled_frameworks_figure(
    points: pd.DataFrame,
    path: Path,
    colours: dict,
    strategies: list[str],
    models: list[str],
    layout_count: int,
) -> None:
    """The frameworks figure of a study with more panels than it draws apart
    (render.bounds.PANEL_LIMIT): a panel per model, a group of bars per device count and
    node count, one bar per strategy: its peak img/s (the best per-device batch), the
    median over networks, whiskers from their min to max."""
    peak = points.groupby(["model", "strategy", WORLD_SIZE, NODES, NETWORK])["img_s"].max()
    spread = (
        peak.reset_index()
        .groupby(["model", "strategy", WORLD_SIZE, NODES])["img_s"]
        .agg(["median", "min", "max"])
        .reset_index()
    )
    places = sorted(set(zip(spread[WORLD_SIZE], spread[NODES], strict=True)))
    width = 0.8 / len(strategies)
    figure, axes = plt.subplots(
        len(models),
        1,
        figsize=(max(6.0, 1.5 + 0.25 * len(places) * len(strategies)), 3.2 * len(models)),
        squeeze=False,
    )
    for row, model in enumerate(models):
        axis = axes[row][0]
        here = spread[spread["model"] == model].set_index([WORLD_SIZE, NODES])
        for index, strategy in enumerate(strategies):
            bars = here[here["strategy"] == strategy]
            offset = (index - (len(strategies) - 1) / 2) * width
            median = [bars["median"].get(place, np.nan) for place in places]
            low = [
                m - bars["min"].get(place, np.nan) for m, place in zip(median, places, strict=True)
            ]
            high = [
                bars["max"].get(place, np.nan) - m for m, place in zip(median, places, strict=True)
            ]
            axis.bar(
                [i + offset for i in range(len(places))],
                median,
                width,
                yerr=[low, high],
                capsize=2,
                color=colours[strategy],
            )
        labels = [
            f"{world} dev.\n{nodes} node{'s' if nodes > 1 else ''}" for world, nodes in places
        ]
        axis.set_xticks(range(len(places)), labels, fontsize="small")
        axis.set_ylabel("peak global images/s")
        axis.set_title(
            f"{model}: {layout_count:,} layouts, too many for a panel each: each strategy's peak "
            "img/s (best per-device batch), median over networks, whiskers min to max",
            fontsize="medium",
        )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[s]) for s in strategies]
    figure.legend(handles, strategies, loc="upper center", ncol=len(strategies), frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (3.2 * len(models))))
    figure.savefig(path, dpi=100)
    plt.close(figure)
