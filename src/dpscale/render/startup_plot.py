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
from dpscale.plan.columns import DEVICES_PER_NODE, NETWORK, NODES, WORLD_SIZE  # noqa: E402
from dpscale.plan.layout import Layout  # noqa: E402
from dpscale.render.bounds import MARK_LIMIT, too_many_marks  # noqa: E402
from dpscale.render.canvas import empty_figure  # noqa: E402


def layout_label(row: pd.Series) -> str:
    return f"{row['strategy']}, {Layout.from_row(row).bar_label(row['network'])}"


# the bars pooled, in turn, where a study has more layouts than MARK_LIMIT: over networks,
# then over models too, then over node counts too (a bar per strategy and device count)
POOLINGS = (
    ("strategy", "model", NODES, DEVICES_PER_NODE),
    ("strategy", NODES, DEVICES_PER_NODE),
    ("strategy", WORLD_SIZE),
)


def pooled(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The layouts' start-up as the figure draws it: a bar each, or, above MARK_LIMIT bars,
    the mean of each phase over the first POOLINGS keys that give at most MARK_LIMIT bars,
    ``startup_s_ci95`` then half the range of their totals; and the title's words."""
    if not too_many_marks(len(table)):
        return table, ""
    for keys in POOLINGS:
        if not too_many_marks(len(table.drop_duplicates(list(keys)))):
            break
    keys = list(keys)
    grouped = table.groupby(keys)
    bars = grouped[[*PHASE_COLUMNS, "startup_s"]].mean()
    bars["startup_s_ci95"] = (grouped["startup_s"].max() - grouped["startup_s"].min()) / 2
    bars["layouts"] = grouped.size()
    bars = bars.reset_index()
    if NODES not in bars:
        bars[NODES] = 1
    if DEVICES_PER_NODE not in bars:
        bars[DEVICES_PER_NODE] = bars[WORLD_SIZE] // bars[NODES]
    if WORLD_SIZE not in bars:
        bars[WORLD_SIZE] = bars[NODES] * bars[DEVICES_PER_NODE]
    over = [name for name in ("model", NETWORK, NODES) if name not in keys]
    words = (
        f"{len(table):,} layouts, more than {MARK_LIMIT} bars: the mean of each phase over\n"
        f"{', '.join('node count' if name == NODES else name + 's' for name in over)} "
        "(whiskers: half the range of their totals)"
    )
    return bars, words


def _label(row: pd.Series, keys_words: str) -> str:
    if keys_words:  # pooled: no network; a model where the bars keep it
        where = f"{row['strategy']}, {row[WORLD_SIZE]} dev."
        where += f" on {row[NODES]} node{'s' if row[NODES] > 1 else ''}" if row[NODES] > 1 else ""
        return f"{where}\n{readable_model(row['model'])}" if "model" in row else where
    return f"{layout_label(row)}\n{readable_model(row['model'])}"


def startup_figure(table: pd.DataFrame, path: Path) -> None:
    if table.empty:
        empty_figure(path, "no ok synthetic cell recorded its start-up")
        return
    table, words = pooled(table)
    table = table.sort_values([c for c in ("model", "strategy", NODES, WORLD_SIZE) if c in table])
    figure, axis = plt.subplots(figsize=(10, 1.8 + 0.5 * len(table)), layout="constrained")
    labels = [_label(row, words) for _, row in table.iterrows()]
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
    if words:
        axis.set_title(words, fontsize="medium")
    figure.legend(ncols=7, fontsize="small", loc="outside upper center")
    figure.savefig(path, dpi=100)
    plt.close(figure)
