"""Figure 2 of the answers: cost per 1,000 images per layout, a dot per per-device batch
with its 95% interval."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from dpscale.plan.columns import NETWORK, NODES, WORLD_SIZE
from dpscale.render.answer_views import (
    GROUP_HEADER,
    OFFSET_STEP,
    PANEL_WIDTH,
    View,
    faded,
    group_dropdown,
    layout_label,
    legend_toggle,
    message_chart,
    strategy_model,
)
from dpscale.render.bounds import too_many_marks


def cost_points(cost: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Each layout's cost per 1,000 images at each per-device batch with a 95% interval from
    img_s_ci95 (cost is proportional to 1/img/s), and the axis title. Money where every row
    has a price, node-hours per 1,000 images otherwise (the config gave no price)."""
    if cost.empty or "img_s" not in cost.columns:
        return pd.DataFrame(), ""
    rows = cost[cost["img_s"].notna() & (cost["img_s"] > 0)].copy()
    priced = rows["cost_per_1000_images"].notna().all() and rows["currency"].nunique() == 1
    if priced and not rows.empty:
        column, title = (
            "cost_per_1000_images",
            f"cost per 1,000 images ({rows['currency'].iloc[0]})",
        )
    else:
        column, title = "node_hours_per_1000_images", "node-hours per 1,000 images (no price given)"
    half = rows["img_s_ci95"].fillna(0.0)
    rows["value"] = rows[column]
    rows["low"] = rows[column] * rows["img_s"] / (rows["img_s"] + half)
    slower = rows["img_s"] - half
    rows["high"] = np.where(
        slower > 0, rows[column] * rows["img_s"] / slower.clip(lower=1e-12), np.nan
    )
    rows["group"] = strategy_model(rows)
    rows["layout"] = [
        layout_label(n, d, w)
        for n, d, w in zip(rows["nodes"], rows["devices_per_node"], rows["network"], strict=True)
    ]
    rows["batch"] = rows["batch_per_device"].astype(int)
    rows = rows.sort_values(["group", WORLD_SIZE, NODES, NETWORK, "batch"])
    columns = [
        "group",
        "layout",
        WORLD_SIZE,
        NODES,
        NETWORK,
        "batch",
        "global_batch",
        "img_s",
        "img_s_ci95",
        "value",
        "low",
        "high",
    ]
    return rows[columns].reset_index(drop=True), title


def cheapest(points: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The static view's dots: every layout at every per-device batch; above MARK_LIMIT dots
    in a panel (render.bounds), each layout at its cheapest batch, then, if still above, each
    device and node count at its cheapest network and batch; and the title's words."""
    most = points.groupby("group").size().max() if not points.empty else 0
    if not too_many_marks(most):
        return points, ""
    shown = points.loc[points.groupby(["group", "layout"])["value"].idxmin().dropna()]
    words = "each layout at its cheapest per-device batch"
    if too_many_marks(shown.groupby("group").size().max()):
        shown = shown.loc[shown.groupby(["group", WORLD_SIZE, NODES])["value"].idxmin().dropna()]
        words = "each device and node count at its cheapest network and per-device batch"
    shown = shown.sort_index()  # cost_points' order: group, layout, batch
    return shown, f"{words} ({len(shown):,} of {len(points):,} dots, 95% intervals)"


def _cost_layers(
    points: pd.DataFrame,
    title: str,
    layouts: list[str],
    toggle: alt.Parameter | None = None,
    offsets: bool = True,
) -> alt.LayerChart:
    y = alt.Y("layout:N", title=None, sort=layouts)
    offset = alt.YOffset("batch:N")
    colour = alt.Color(
        "batch:O",
        title="per-device batch" + (" (click to pick)" if toggle else ""),
        scale=alt.Scale(scheme="viridis"),
    )
    # offsets: a row per batch in each layout's band; pooled (one dot a layout), none
    by_batch = {"yOffset": offset} if offsets else {}
    base = alt.Chart().encode(y=y, color=colour, opacity=faded(toggle), **by_batch)
    axis = alt.Axis(format="~g", tickCount=6, labelOverlap=True)
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("low:Q", title=f"{title}, 95% interval", axis=axis), x2="high:Q"
    )
    dots = base.mark_point(filled=True, size=60).encode(
        x="value:Q",
        tooltip=[
            "group:N",
            "layout:N",
            "batch:Q",
            "global_batch:Q",
            alt.Tooltip("img_s:Q", format=".1f", title="img/s"),
            alt.Tooltip("img_s_ci95:Q", format=".1f", title="img/s ± 95% CI"),
            alt.Tooltip("value:Q", format=".4g", title=title),
            alt.Tooltip("low:Q", format=".4g", title="95% low"),
            alt.Tooltip("high:Q", format=".4g", title="95% high"),
        ],
    )
    if toggle is not None:  # on the legend's own layer (the first coloured one), or it is inert
        bars = bars.add_params(toggle)
    return alt.layer(bars, dots, data=points)


def cost_chart(cost: pd.DataFrame, view: View) -> alt.TopLevelMixin:
    """Cost per 1,000 images per layout, a dot per per-device batch with its 95% interval;
    static: every strategy and model (panels, two a row); interactive: a dropdown for them."""
    points, title = cost_points(cost)
    if points.empty:
        return message_chart("Nothing to show: no layout with a measured img/s to cost.")
    layouts = list(dict.fromkeys(points["layout"]))
    size = {"width": PANEL_WIDTH + 120, "height": OFFSET_STEP}
    heading = "Cost per 1,000 images per layout, at each per-device batch (95% intervals)"
    if view == "static":
        points, pooled = cheapest(points)
        if pooled:
            # each panel its own networks: the layouts by device and node count, then network
            by_size = points.sort_values([WORLD_SIZE, NODES, NETWORK], kind="stable")
            layouts = list(dict.fromkeys(by_size["layout"]))
            heading = f"Cost per 1,000 images: {pooled}"
            size["height"] = alt.Step(16)
        layers = _cost_layers(points, title, layouts, offsets=not pooled).properties(**size)
        panels = alt.Facet("group:N", title=None, header=GROUP_HEADER)
        chart = layers.facet(facet=panels, columns=2, title=heading)
        # one cost scale for all, but each panel its own layouts and its own axis to read
        return chart.resolve_scale(y="independent").resolve_axis(x="independent")
    layers = _cost_layers(points, title, layouts, legend_toggle("batch")).properties(**size)
    pick = group_dropdown(points)
    chart = layers.transform_filter(alt.datum.group == pick).add_params(pick)
    return chart.properties(title=heading)
