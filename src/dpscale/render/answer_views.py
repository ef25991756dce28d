"""What the answer figures share: the two views (a static PNG and a self-contained
interactive page), panel sizes, the strategy · model dropdown and legend toggles, saving.

The report embeds the static view; the interactive page stays beside it in figures/ (every
page inlines the Vega, Vega-Lite and vega-embed JavaScript that vl-convert bundles, 0.9 MB,
so that it works offline: docs/decisions/report-pages-with-data.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import altair as alt
import pandas as pd

from dpscale.plan.layout import Layout

View = Literal["static", "interactive"]

PANEL_WIDTH, PANEL_HEIGHT = 360, 260
# pixels per CSS pixel: the landing page shows the figure at about its CSS width, and scale
# 1.5 cost twice the bytes in a report that must stay under 4 MB
PNG_SCALE = 1.0
EMBED_OPTIONS = {"actions": False, "renderer": "svg"}
GROUP_HEADER = alt.Header(labelOrient="top", labelAnchor="start", labelFontWeight="bold")
OFFSET_STEP = alt.Step(step=16, **{"for": "offset"})  # one dot's row in a layout's band


def strategy_model(frame: pd.DataFrame) -> pd.Series:
    return frame["strategy"].astype(str) + " · " + frame["model"].astype(str)


def layout_label(nodes: int, devices_per_node: int, network: str) -> str:
    """'2 nodes × 1 device, 1gbe': how a layout reads on an axis."""
    return Layout(int(nodes), int(devices_per_node)).axis_label(network)


def legend_toggle(field: str) -> alt.Parameter:
    """Click a legend entry to show it alone (shift-click adds, double-click resets)."""
    return alt.selection_point(fields=[field], bind="legend", name=f"{field}_toggle")


def faded(toggle: alt.Parameter | None) -> alt.ConditionalValueDefNumberExprRef | alt.ValueDef:
    return alt.condition(toggle, alt.value(1.0), alt.value(0.12)) if toggle else alt.value(1.0)


def group_dropdown(points: pd.DataFrame) -> alt.Parameter:
    groups = sorted(points["group"].unique())
    return alt.param(
        name="group",
        value=groups[0],
        bind=alt.binding_select(options=groups, name="strategy · model "),
    )


def message_chart(message: str) -> alt.Chart:
    """A figure that says why there is nothing to plot (both views)."""
    return (
        alt.Chart(pd.DataFrame({"text": [message]}))
        .mark_text(size=14)
        .encode(text="text:N")
        .properties(width=PANEL_WIDTH * 2, height=60)
    )


def save_view(chart: alt.TopLevelMixin, path: Path, view: View) -> None:
    """The static view as PNG (vl-convert), the interactive one as self-contained HTML."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if view == "static":
        chart.save(str(path), format="png", scale_factor=PNG_SCALE)
    else:
        save_inline(chart, path)


def save_inline(chart: alt.TopLevelMixin, path: Path) -> None:
    """Self-contained HTML: the Vega JavaScript is inlined, nothing is fetched."""
    chart.save(str(path), format="html", inline=True, embed_options=EMBED_OPTIONS)
