"""Report figures, drawn from the tidy tables (never from anything else): throughput,
speedup, residuals, frameworks and collectives, each series and panel apart. A study above
render.bounds' limits gets the pooled figure of pooled_plots instead."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.analysis.laws import fits  # noqa: E402
from dpscale.analysis.results.collectives import MEASURED  # noqa: E402
from dpscale.analysis.results.rows import without_remedies  # noqa: E402
from dpscale.plan import ring  # noqa: E402
from dpscale.plan.columns import MODE_LAYOUT, NETWORK, NODES, WORLD_SIZE  # noqa: E402
from dpscale.plan.layout import HOST_NETWORK, Layout  # noqa: E402
from dpscale.render.bounds import too_many_marks, too_many_panels, too_many_rows  # noqa: E402
from dpscale.render.canvas import (  # noqa: E402
    LINESTYLES,
    MARKERS,
    empty_figure,
    legend_below,
    save_with_legends,
)
from dpscale.render.palette import strategy_colours  # noqa: E402
from dpscale.render.pooled_plots import (  # noqa: E402
    most_series,
    pooled_frameworks_figure,
    pooled_residuals_figure,
    pooled_speedup_figure,
    pooled_throughput_figure,
)


def synthetic(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of synthetic-data cells: the figures drawn from fits, windows and scaling show
    those; a folder cell's rows (the same layout reading the user's images) are the input
    pipeline's page, never drawn over the synthetic ones."""
    return frame[frame["mode"] == "synthetic"] if "mode" in frame.columns else frame


def _panels(models: list[str], height: float = 4.0):
    figure, axes = plt.subplots(1, len(models), figsize=(8 * len(models), height), squeeze=False)
    return figure, dict(zip(models, axes[0], strict=True))


def _style_keys(
    frame: pd.DataFrame, known: Sequence[str] = ()
) -> tuple[dict[str, tuple], dict[int, tuple[str, str]]]:
    """Colour per strategy; (line style, marker) per device count.

    ``known``: every registered strategy, so one strategy has the same colour in every
    figure of every study."""
    colours = strategy_colours(list(known), frame["strategy"].unique())
    styles = {
        layout: (LINESTYLES[i % len(LINESTYLES)], MARKERS[i % len(MARKERS)])
        for i, layout in enumerate(layouts(frame))
    }
    return colours, styles


def layouts(frame: pd.DataFrame) -> list[tuple[int, int, str]]:
    """(world size, nodes, network) of every layout in the frame, small to large."""
    network = frame["network"] if "network" in frame else pd.Series(HOST_NETWORK, index=frame.index)
    return sorted(set(zip(frame["world_size"], frame["nodes"], network, strict=True)))


def layout_label(world: int, nodes: int, network: str) -> str:
    return Layout.of_world(world, nodes).legend(network)


EXTRAPOLATED = "fitted law beyond the measured batches (extrapolated)"
OUTSIDE = "#f2f2f2"  # the shade of the batches no cell of the panel measured
JITTER_SEED = 0  # the strip plot's jitter: any fixed seed, so that a rerun draws the same figure


def law_segments(low: float, high: float, samples: int = 100) -> dict[str, np.ndarray]:
    """The batches a fitted law is drawn over, in three parts: below the smallest batch
    measured (to half of it), the measured range, and above the largest (to twice it). Only
    the middle one rests on measurements; the outer two are the law extrapolated."""
    return {
        "below": np.geomspace(low / 2, low, samples // 4),
        "measured": np.geomspace(low, high, samples),
        "above": np.geomspace(high, high * 2, samples // 4),
    }


def throughput_figure(
    cells: pd.DataFrame, fit_table: pd.DataFrame, path: Path, known: Sequence[str] = ()
) -> None:
    """Global img/s vs per-device batch, with the fitted law and its N*v0 ceiling. The law is
    drawn in the layout's line style over the batches measured; beyond them it is a thin faded
    line over a shaded background, labelled extrapolated, with no marker where no cell ran."""
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    cells, fit_table = synthetic(without_remedies(cells)), synthetic(without_remedies(fit_table))
    ok = cells[cells["status"] == "ok"]
    if ok.empty:
        empty_figure(path, "No successful throughput cells to plot.")
        return
    sns.set_theme(style="whitegrid")
    keys = ["model", "strategy", WORLD_SIZE, NODES, NETWORK]
    if too_many_marks(most_series(ok, keys)):
        pooled_throughput_figure(ok, path, known)
        return
    colours, styles = _style_keys(ok, known)
    figure, panels = _panels(sorted(ok["model"].unique()))
    fitted = fit_table[fit_table["status"] == "ok"].set_index(keys)
    extrapolated = set()
    for (model, strategy, world, nodes, network), group in ok.groupby(keys):
        axis, colour = panels[model], colours[strategy]
        linestyle, marker = styles[(world, nodes, network)]
        axis.errorbar(
            group["batch_per_device"],
            group["img_s_mean"],
            yerr=group["img_s_ci95"],
            fmt=marker,
            color=colour,
            capsize=3,
        )
        label = f"{strategy}, {layout_label(world, nodes, network)}"
        if (model, strategy, world, nodes, network) not in fitted.index:
            axis.plot([], [], marker=marker, color=colour, linestyle="none", label=label)
            continue
        fit = fitted.loc[(model, strategy, world, nodes, network)]
        parts = law_segments(group["batch_per_device"].min(), group["batch_per_device"].max())
        for name, batches in parts.items():
            curve = fits.throughput(batches, fit["v0"], fit["t_c"], world)
            if name == "measured":
                axis.plot(batches, curve, color=colour, linestyle=linestyle)
            else:
                axis.plot(batches, curve, color=colour, linestyle=":", linewidth=1, alpha=0.6)
                extrapolated.add(model)
        # the legend's entry: the layout's marker (measured points) on its line style
        axis.plot([], [], color=colour, linestyle=linestyle, marker=marker, label=label)
        axis.axhline(fit["v0"] * world, color=colour, linestyle=linestyle, alpha=0.35, linewidth=1)
    for model, axis in panels.items():
        measured = ok.loc[ok["model"] == model, "batch_per_device"]
        if model in extrapolated:
            axis.axvspan(measured.min() / 2, measured.min(), color=OUTSIDE, zorder=0)
            axis.axvspan(measured.max(), measured.max() * 2, color=OUTSIDE, zorder=0)
            axis.plot([], [], color="grey", linestyle=":", linewidth=1, label=EXTRAPOLATED)
        axis.set_xscale("log", base=2)
        axis.set_title(model)
        axis.set_xlabel("per-device batch (shaded: not measured)")
        axis.set_ylabel("global images/s (mean, 95% CI)")
        legend_below(axis)
    save_with_legends(figure, path)


def speedup_figure(scaling: pd.DataFrame, path: Path, known: Sequence[str] = ()) -> None:
    """Weak-scaling speedup vs device count with the ideal line."""
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    scaling = synthetic(without_remedies(scaling))
    layouts = scaling.groupby(["model", "strategy"])["world_size"].transform("nunique")
    scaling = scaling[layouts > 1]
    if scaling.empty:
        empty_figure(path, "No multi-device cells with a 1-device baseline: no speedup to plot.")
        return
    sns.set_theme(style="whitegrid")
    colours, _ = _style_keys(scaling, known)
    scaling = scaling.assign(over=np.where(scaling["nodes"] > 1, scaling["network"], "one node"))
    if too_many_marks(most_series(scaling, ["model", "strategy", "batch_per_device", "over"])):
        pooled_speedup_figure(scaling, path, colours)
        return
    figure, panels = _panels(sorted(scaling["model"].unique()))
    batches = sorted(scaling["batch_per_device"].unique())
    markers = dict(zip(batches, "osD^v<>ph*", strict=False))
    for (model, strategy, batch, over), group in scaling.groupby(
        ["model", "strategy", "batch_per_device", "over"]
    ):
        group = group.sort_values("world_size")
        panels[model].errorbar(
            group["world_size"],
            group["speedup"],
            yerr=group["speedup_ci95"],
            color=colours[strategy],
            marker=markers.get(batch, "o"),
            linestyle="-" if over == "one node" else ":",
            capsize=3,
            label=f"{strategy}, b={batch}" + ("" if over == "one node" else f", nodes over {over}"),
        )
    top = scaling["world_size"].max()
    for model, axis in panels.items():
        axis.plot([1, top], [1, top], color="grey", linestyle="--", label="ideal")
        axis.set_ylim(bottom=0)
        axis.set_title(model)
        axis.set_xlabel("devices (world size)")
        axis.set_ylabel("speedup vs 1 device (weak scaling)")
        axis.set_xticks(sorted(scaling["world_size"].unique()))
        legend_below(axis)
    save_with_legends(figure, path)


def residuals_figure(
    windows: pd.DataFrame, fit_table: pd.DataFrame, path: Path, known: Sequence[str] = ()
) -> None:
    """Measured step time relative to the fitted law, per window (``known``: the registered
    strategies, their colours in a study of more windows than a panel draws apart)."""
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    windows, fit_table = (
        synthetic(without_remedies(windows)),
        synthetic(without_remedies(fit_table)),
    )
    fitted = fit_table[fit_table["status"] == "ok"]
    if windows.empty or fitted.empty:
        empty_figure(path, "No fitted groups: residuals need at least two batch sizes.")
        return
    merged = windows.merge(fitted[[*MODE_LAYOUT, "v0", "t_c"]], on=MODE_LAYOUT)
    predicted = fits.step_time(merged["batch_per_device"], merged["v0"], merged["t_c"])
    merged["residual_pct"] = 100 * (merged["step_time_s"] / predicted - 1)
    merged["group"] = merged["strategy"] + ", " + merged["world_size"].astype(str) + " dev"
    sns.set_theme(style="whitegrid")
    if too_many_rows(int(merged.groupby("model").size().max())):
        pooled_residuals_figure(merged, path, known)
        return
    figure, panels = _panels(sorted(merged["model"].unique()), height=3.5)
    for model, axis in panels.items():
        data = merged[merged["model"] == model]
        with same_jitter_every_run():
            sns.stripplot(
                data=data,
                x="batch_per_device",
                y="residual_pct",
                hue="group",
                dodge=True,
                ax=axis,
                size=4,
            )
        axis.axhline(0, color="grey", linewidth=1)
        axis.set_title(model)
        axis.set_xlabel("per-device batch")
        axis.set_ylabel("measured / fitted step time - 1 (%)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


@contextmanager
def same_jitter_every_run() -> Iterator[None]:
    """seaborn's strip plot jitters its points with numpy's global generator: seeded here
    (and restored after), the same windows draw the same figure, byte for byte, on a rerun."""
    state = np.random.get_state()
    np.random.seed(JITTER_SEED)
    try:
        yield
    finally:
        np.random.set_state(state)


def framework_figure(cells: pd.DataFrame, path: Path, known: Sequence[str] = ()) -> None:
    """Global img/s of every strategy on the same cells: one panel per model and device
    layout, per-device batch on the x axis, one bar per strategy (mean, 95% CI)."""
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    cells = without_remedies(cells)
    from dpscale.analysis.laws.scaling import point_means

    points = point_means(cells[cells["mode"] == "synthetic"])
    if points.empty:
        empty_figure(path, "No successful throughput cells to compare.")
        return
    sns.set_theme(style="whitegrid")
    colours, _ = _style_keys(points, known)
    strategies = sorted(points["strategy"].unique())
    batches = sorted(points["batch_per_device"].unique())
    models = sorted(points["model"].unique())
    shown = layouts(points)
    if too_many_panels(len(models) * len(shown)):
        pooled_frameworks_figure(points, path, colours, strategies, models, len(shown))
        return
    panel_width = max(4.5, 1.5 + 0.3 * len(batches) * len(strategies))
    figure, axes = plt.subplots(
        len(models),
        len(shown),
        figsize=(panel_width * len(shown), 3.8 * len(models)),
        squeeze=False,
    )
    width = 0.8 / len(strategies)
    for (row, model), (column, (world, nodes, network)) in itertools.product(
        enumerate(models), enumerate(shown)
    ):
        axis = axes[row][column]
        here = points[
            (points["model"] == model)
            & (points["world_size"] == world)
            & (points["nodes"] == nodes)
            & (points["network"] == network)
        ]
        for index, strategy in enumerate(strategies):
            bars = here[here["strategy"] == strategy].set_index("batch_per_device")
            offset = (index - (len(strategies) - 1) / 2) * width
            axis.bar(
                [i + offset for i in range(len(batches))],
                [bars["img_s"].get(b, np.nan) for b in batches],
                width,
                yerr=[bars["img_s_ci95"].get(b, np.nan) for b in batches],
                capsize=2,
                color=colours[strategy],
            )
        axis.set_xticks(range(len(batches)), [str(b) for b in batches])
        axis.set_xlabel("per-device batch")
        axis.set_ylabel("global images/s (mean, 95% CI)")
        axis.set_title(f"{model}, {layout_label(world, nodes, network)}")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[s]) for s in strategies]
    figure.legend(handles, strategies, loc="upper center", ncol=len(strategies), frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.35 / (3.8 * len(models))))
    figure.savefig(path, dpi=100)
    plt.close(figure)


def collectives_figure(
    table: pd.DataFrame, comm_fits: pd.DataFrame, path: Path, known: Sequence[str] = ()
) -> None:
    """All-reduce bus bandwidth vs message size (log-log): a panel per network, a colour per
    strategy, a line style per layout; bars from the 10th to the 90th percentile window, the
    fitted ring model (alpha, beta) as a thin line. An imported log is a line of its own,
    labelled with its source."""
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    table, comm_fits = without_remedies(table), without_remedies(comm_fits)
    if table.empty:
        empty_figure(path, "No collective cells in this study (mode collectives).")
        return
    sns.set_theme(style="whitegrid")
    colours, styles = _style_keys(table, known)
    figure, panels = _panels(sorted(table["network"].unique()))
    keys = [NETWORK, "strategy", WORLD_SIZE, NODES, "source"]
    table, comm_fits = (
        f if "source" in f else f.assign(source=MEASURED) for f in (table, comm_fits)
    )
    fitted = comm_fits[comm_fits["status"] == "ok"].set_index(keys)
    for (network, strategy, world, nodes, source), group in table.groupby(keys):
        axis, colour = panels[network], colours[strategy]
        linestyle, marker = styles[(world, nodes, network)]
        group = group.sort_values("message_bytes")
        # an imported log prints one time per size: no bars
        spread = [(group["busbw_GB_s"] - group["busbw_lo_GB_s"]).fillna(0)]
        spread.append((group["busbw_hi_GB_s"] - group["busbw_GB_s"]).fillna(0))
        label = f"{strategy}, {layout_label(world, nodes, network)}"
        if source != MEASURED:  # the panel names the network; the source names the log
            label = (
                f"imported: {source.split(':', 2)[-1]} ({Layout.of_world(world, nodes).counts()})"
            )
        axis.errorbar(
            group["message_bytes"],
            group["busbw_GB_s"],
            yerr=spread,
            color=colour,
            linestyle=linestyle,
            marker=marker,
            capsize=3,
            label=label,
        )
        if (network, strategy, world, nodes, source) in fitted.index:
            fit = fitted.loc[(network, strategy, world, nodes, source)]
            sizes = np.geomspace(group["message_bytes"].min(), group["message_bytes"].max(), 100)
            seconds = [
                ring.ring_allreduce_seconds(s, world, fit["beta_GB_s"] * 1e9, fit["alpha_s"])
                for s in sizes
            ]
            model = sizes / np.array(seconds) * 2 * (world - 1) / world / 1e9
            axis.plot(sizes, model, color=colour, linewidth=1, alpha=0.5)
    for network, axis in panels.items():
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_title(f"network: {network}")
        axis.set_xlabel("message size (bytes, float32)")
        axis.set_ylabel("bus bandwidth GB/s (median, p10-p90)")
        legend_below(axis)
    save_with_legends(figure, path)
