"""Figures of the communication model: predicted vs measured, and throughput against batch
per network with the model's curves."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

from dpscale.analysis.laws import commmodel  # noqa: E402
from dpscale.plan.layout import Layout  # noqa: E402
from dpscale.render.canvas import empty_figure  # noqa: E402
from dpscale.render.plots import OUTSIDE  # noqa: E402

# one panel per kind of check: the cells held out (one at a time, or in folds in a large
# group: a study can have both), the networks left out, the fewest ranks fitted
PANELS = (
    commmodel.CELL_SCHEMES,
    (commmodel.LEAVE_ONE_NETWORK_OUT,),
    (commmodel.FEWEST_RANKS,),
)
MODEL_EXTRAPOLATED = "model beyond the measured batches (extrapolated)"


def _network_colours(names: list[str]) -> dict[str, tuple]:
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    names = sorted(set(names))
    return dict(zip(names, sns.color_palette("colorblind", len(names)), strict=True))


def validation_figure(validation: pd.DataFrame, path: Path) -> None:
    """Held-out predicted against measured step time (log-log), y = x and a +-10% band,
    colour per network, one panel per validation scheme: the chosen overlap form, or where it
    could not be fitted on a scheme's cells, the fitted form with the smallest error."""
    panels = [
        (_scheme_words(rows), rows)
        for schemes in PANELS
        if not (rows := _panel_rows(validation, schemes)).empty
    ]
    if not panels:
        empty_figure(path, "not enough data: no multi-rank configuration could be predicted")
        return
    shown = pd.concat([rows for _, rows in panels])
    colours = _network_colours(["one node", *shown.loc[shown["nodes"] > 1, "network"].astype(str)])
    figure, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 5), squeeze=False)
    values = pd.concat([shown["measured"], shown["predicted"]]).astype(float)
    values = values[np.isfinite(values) & (values > 0)]
    low, high = values.min() / 2, values.max() * 2  # bars beyond are cut at the edge
    line = np.geomspace(low, high, 50)
    for axis, (scheme, rows) in zip(axes[0], panels, strict=True):
        axis.fill_between(line, line * 0.9, line * 1.1, color="0.88", label="±10%")
        axis.plot(line, line, color="0.3", lw=1, label="y = x")
        links = np.where(rows["nodes"] == 1, "one node", rows["network"].astype(str))
        for network, group in rows.groupby(links):
            axis.errorbar(
                group["measured"],
                group["predicted"],
                yerr=_bars(group, low, high),
                fmt="o",
                ms=5,
                capsize=2,
                color=colours[network],
                label=network,
            )
        errors = rows["relative_error"].abs()
        form = "" if rows["chosen"].astype(bool).all() else f" ({rows['overlap'].iloc[0]} form)"
        axis.set(
            xscale="log",
            yscale="log",
            xlim=(low, high),
            ylim=(low, high),
            xlabel="measured step time (s)",
            ylabel="predicted step time (s), held out",
            title=f"{scheme}{form}:\nmedian |error| {errors.median():.1%} (n = {len(rows)})",
        )
        axis.xaxis.set_minor_formatter(NullFormatter())  # their labels overlap
        axis.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _scheme_words(rows: pd.DataFrame) -> str:
    """The schemes a panel's rows were held out by, in the order PANELS names them."""
    present = set(rows["scheme"])
    return " and ".join(s for schemes in PANELS for s in schemes if s in present)


def _panel_rows(validation: pd.DataFrame, schemes: tuple[str, ...]) -> pd.DataFrame:
    """The schemes' predicted rows of the chosen form, else of their best-fitting other
    form."""
    ok = validation[(validation["status"] == "ok") & validation["scheme"].isin(schemes)]
    chosen = ok[ok["chosen"].astype(bool)]
    if not chosen.empty or ok.empty:
        return chosen
    errors = ok.groupby("overlap")["relative_error"].apply(lambda e: e.abs().median())
    return ok[ok["overlap"] == errors.idxmin()]


def _bars(rows: pd.DataFrame, low: float, high: float) -> list[np.ndarray]:
    """Error bar lengths, cut at the panel's edges; an unbounded side (NaN or inf: a
    parameter the data do not inform) reaches the edge."""
    bottom = rows["lo"].fillna(0).clip(lower=low)
    top = rows["hi"].fillna(np.inf).clip(upper=high)
    lower = (rows["predicted"] - bottom).to_numpy(dtype=float)
    upper = (top - rows["predicted"]).to_numpy(dtype=float)
    return [np.maximum(lower, 0), np.maximum(upper, 0)]


def _measured_points(windows: pd.DataFrame) -> pd.DataFrame:
    frame = windows[windows["mode"] == "synthetic"] if "mode" in windows else windows
    if "quality" in frame:
        frame = frame[frame["quality"].fillna("") != "contaminated"]
    keys = ["strategy", "model", *commmodel.OBS_COLUMNS[2:]]
    grouped = frame.groupby(keys)["img_s"]
    points = grouped.agg(img_s="mean", sd="std", n="size").reset_index()
    points["ci95"] = 1.96 * points["sd"].fillna(0) / np.sqrt(points["n"])
    return points


def throughput_figure(
    windows: pd.DataFrame, groups: list[commmodel.GroupModel], path: Path
) -> None:
    """img/s against per-device batch, one panel per link (one node, each network) and one
    row per strategy and model (past MAX_ROWS pairs, one per strategy: :func:`_shown_groups`):
    measured means with 95% intervals, the model's curves (fitted to every configuration,
    chosen overlap form), the 1-rank law in grey."""
    fitted = [g for g in groups if g.chosen is not None]
    if not fitted or windows.empty:
        empty_figure(path, "not enough data: no model fitted (needs 1-rank and multi-rank cells)")
        return
    shown = _shown_groups(fitted)
    points = _measured_points(windows)
    panels = [commmodel.INTRA, *sorted(set(points.loc[points["nodes"] > 1, "network"]))]
    figure, axes = plt.subplots(
        len(shown), len(panels), figsize=(5 * len(panels), 4 * len(shown)), squeeze=False
    )
    for row, group in zip(axes, shown, strict=True):
        mine = points[(points["strategy"] == group.strategy) & (points["model"] == group.model)]
        batches = np.geomspace(
            max(mine["batch_per_device"].min() / 2, 0.5), mine["batch_per_device"].max() * 2, 60
        )
        curves = commmodel.model_curves(group, batches)
        for axis, panel in zip(row, panels, strict=True):
            _shade_unmeasured(axis, batches, mine["batch_per_device"])
            _throughput_panel(axis, mine, curves, panel)
            axis.set_title(
                f"{group.strategy} {group.model}\n"
                f"{'one node' if panel == commmodel.INTRA else 'network ' + panel}"
                f" (model: {group.chosen})",
                fontsize=9,
            )
    if len(shown) < len(fitted):
        figure.suptitle(
            f"{len(shown)} of {len(fitted)} strategy and model pairs: each strategy's model with "
            "the most configurations (every pair's parameters: comm_model.csv)",
            fontsize=10,
        )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


# rows of the throughput figure: past this many strategy and model pairs (a study of many
# models), one row per strategy, so that the figure stays readable and takes seconds to draw
MAX_ROWS = 6


def _shown_groups(fitted: list[commmodel.GroupModel]) -> list[commmodel.GroupModel]:
    """Every fitted pair up to MAX_ROWS; above, each strategy's model with the most
    configurations (ties: the first by name), at most MAX_ROWS strategies."""
    if len(fitted) <= MAX_ROWS:
        return fitted
    best: dict[str, commmodel.GroupModel] = {}
    for group in sorted(fitted, key=lambda g: (g.strategy, g.model)):
        mine = best.get(group.strategy)
        if mine is None or len(group.obs) > len(mine.obs):
            best[group.strategy] = group
    return [best[strategy] for strategy in sorted(best)][:MAX_ROWS]


def _shade_unmeasured(axis, drawn: np.ndarray, measured: pd.Series) -> None:
    """The batches the curves reach but no cell measured, shaded and labelled extrapolated
    (as the throughput figure marks its fitted laws)."""
    low, high = float(measured.min()), float(measured.max())
    axis.axvspan(drawn.min(), low, color=OUTSIDE, zorder=0, label=MODEL_EXTRAPOLATED)
    axis.axvspan(high, drawn.max(), color=OUTSIDE, zorder=0)


def _throughput_panel(axis, points: pd.DataFrame, curves: pd.DataFrame, panel: str) -> None:
    import seaborn as sns  # here: it imports scipy.stats, ~0.5 s of every job

    def in_panel(frame: pd.DataFrame) -> pd.Series:
        if panel == commmodel.INTRA:
            return frame["nodes"] == 1
        return (frame["nodes"] > 1) & (frame["network"] == panel)

    single_points = points[points["world_size"] == 1]
    single_curve = curves[curves["world_size"] == 1]
    axis.plot(single_curve["batch_per_device"], single_curve["img_s"], color="0.6", lw=1)
    axis.errorbar(
        single_points["batch_per_device"],
        single_points["img_s"],
        yerr=single_points["ci95"],
        fmt="s",
        color="0.6",
        ms=4,
        label="1 rank",
    )
    mine = points[in_panel(points) & (points["world_size"] > 1)]
    lines = curves[in_panel(curves) & (curves["world_size"] > 1)]
    layouts = sorted(set(zip(mine["nodes"], mine["devices_per_node"], strict=True)))
    palette = sns.color_palette("colorblind", max(len(layouts), 1))
    for colour, (nodes, devices) in zip(palette, layouts, strict=False):
        measured = mine[(mine["nodes"] == nodes) & (mine["devices_per_node"] == devices)]
        curve = lines[(lines["nodes"] == nodes) & (lines["devices_per_node"] == devices)]
        axis.plot(curve["batch_per_device"], curve["img_s"], color=colour, lw=1.5)
        axis.errorbar(
            measured["batch_per_device"],
            measured["img_s"],
            yerr=measured["ci95"],
            fmt="o",
            color=colour,
            ms=5,
            label=Layout(nodes, devices).model_legend(),
        )
    axis.set(
        xscale="log", xlabel="per-device batch (shaded: not measured)", ylabel="img/s (all ranks)"
    )
    axis.legend(fontsize=8)
