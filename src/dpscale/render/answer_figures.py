"""Figures for the answers (0. Findings): predicted speedup against nodes per network, cost
per layout, and what each communication remedy gains.

Each figure is built once by one function and written twice: a static PNG (vl-convert) that
shows every strategy and model at a readable subset, and a self-contained interactive page
(the Vega JavaScript inlined, as in ``render.interactive``) with a dropdown for the strategy
and model and a legend that picks what to show. Every interval drawn is a 95% interval from
the tables.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import altair as alt
import numpy as np
import pandas as pd

from dpscale.analysis.rows import without_remedies
from dpscale.plan.columns import DEVICES_PER_NODE, NETWORK, NODES, RUN, WORLD_SIZE
from dpscale.plan.layout import HOST_NETWORK, Layout, devices_per_node_words
from dpscale.render.interactive import save_inline

View = Literal["static", "interactive"]

MEASURED = "measured (mean, 95% CI)"
PREDICTED_MEASURED = "predicted, layout measured"
PREDICTED_NEW = "predicted, not measured (extrapolated)"
KINDS = [MEASURED, PREDICTED_MEASURED, PREDICTED_NEW]
KIND_SHAPES = ["diamond", "circle", "triangle-up"]
GAIN = "gain over no remedy"
FRACTION = "fraction recovered"
MEASURE_AXES = {
    GAIN: "img/s with the remedy / without",
    FRACTION: "share of the slow network's loss won back",
}
PANEL_WIDTH, PANEL_HEIGHT = 360, 260
PNG_SCALE = 2
SPEEDUP_TITLE = "Speedup over 1 device against nodes, per network (95% intervals)"
REMEDIES_TITLE = "Communication remedies against none, per layout and batch (95% intervals)"
NODES_TITLE = "nodes (networks side by side)"
ONE_NODE_GREY = "#666666"
DODGE = 0.06  # octaves between two networks' points at one node count
GROUP_HEADER = alt.Header(labelOrient="top", labelAnchor="start", labelFontWeight="bold")
OFFSET_STEP = alt.Step(step=16, **{"for": "offset"})  # one dot's row in a layout's band


def _group(frame: pd.DataFrame) -> pd.Series:
    return frame["strategy"].astype(str) + " · " + frame["model"].astype(str)


def layout_label(nodes: int, devices_per_node: int, network: str) -> str:
    """'2 nodes × 1 device, 1gbe': how a layout reads on an axis."""
    return Layout(int(nodes), int(devices_per_node)).axis_label(network)


# -- 1. predicted speedup against nodes, per network ---------------------------------------


def _predicted(predictions: pd.DataFrame) -> pd.DataFrame:
    if predictions.empty or "speedup" not in predictions.columns:
        return pd.DataFrame()
    ok = predictions[(predictions["status"] == "ok") & predictions["speedup"].notna()].copy()
    measured = ok["measured"].astype(str).str.lower() == "true"
    ok["kind"] = np.where(measured, PREDICTED_MEASURED, PREDICTED_NEW)
    ok["low"], ok["high"] = ok["speedup_lo"], ok["speedup_hi"]
    return ok


def _measured(scaling: pd.DataFrame) -> pd.DataFrame:
    if scaling.empty or "speedup" not in scaling.columns:
        return pd.DataFrame()
    rows = without_remedies(scaling)
    if "mode" in rows.columns:
        rows = rows[rows["mode"] == "synthetic"]
    rows = rows[(rows["world_size"] > 1) & rows["speedup"].notna()].copy()
    half = rows["speedup_ci95"].fillna(0.0)
    rows["kind"] = MEASURED
    rows["low"], rows["high"] = rows["speedup"] - half, rows["speedup"] + half
    rows["basis"] = "measured"
    return rows


def _one_node_on_every_network(points: pd.DataFrame) -> pd.DataFrame:
    """A one-node row does not depend on the network: repeat it on each network of its
    strategy and model, so every network's line starts from the same one-node point."""
    one = (points["nodes"] == 1) & (points["network"] == HOST_NETWORK)
    multi = points[~one]
    copies = [multi]
    for (strategy, model), rows in points[one].groupby(["strategy", "model"]):
        mine = multi[(multi["strategy"] == strategy) & (multi["model"] == model)]
        networks = sorted(set(mine["network"])) or [HOST_NETWORK]
        for network in networks:
            copies.append(rows.assign(network=network, one_node=True))
    out = pd.concat(copies, ignore_index=True)
    out["one_node"] = out["one_node"].astype(bool)
    return out


def network_order(points: pd.DataFrame) -> list[str]:
    """Networks from the slowest to the fastest (by the bandwidth the predictions name)."""
    bandwidth = points.groupby("network")["bandwidth_Gbit_s"].max()
    return sorted(bandwidth.index, key=lambda n: (math.isnan(bandwidth[n]), bandwidth[n], n))


def _side_by_side(points: pd.DataFrame) -> pd.Series:
    """Where a point sits on the log2 nodes axis: its networks spread around the node count
    (DODGE octaves apart) so their bars do not hide each other; one-node points stay put."""
    networks = network_order(points)
    index = points["network"].map({n: i for i, n in enumerate(networks)})
    shift = (index - (len(networks) - 1) / 2) * DODGE
    return points["nodes"] * np.exp2(np.where(points["one_node"], 0.0, shift))


def speedup_points(predictions: pd.DataFrame, scaling: pd.DataFrame) -> pd.DataFrame:
    """Predicted speedups (with their 95% prediction interval) and measured ones (mean ± 95%
    CI), one row per point, labelled by ``kind``: measured, predicted where the layout was
    measured, or predicted where it was not (extrapolated)."""
    parts = [p for p in (_predicted(predictions), _measured(scaling)) if not p.empty]
    if not parts:
        return pd.DataFrame()
    points = pd.concat(parts, ignore_index=True)
    points["one_node"] = False
    if "bandwidth_Gbit_s" not in points.columns:
        points["bandwidth_Gbit_s"] = np.nan
    points = _one_node_on_every_network(points)
    points["group"] = _group(points)
    points["batch"] = points["batch_per_device"].astype(int)
    points["devices"] = points["devices_per_node"].map(lambda d: devices_per_node_words(int(d)))
    points["ideal"] = points["world_size"].astype(float)
    points["position"] = _side_by_side(points)
    columns = [
        "group",
        *RUN,
        NETWORK,
        "basis",
        "bandwidth_Gbit_s",
        NODES,
        DEVICES_PER_NODE,
        "devices",
        WORLD_SIZE,
        "batch",
        "kind",
        "speedup",
        "low",
        "high",
        "ideal",
        "one_node",
        "position",
    ]
    return points[columns].sort_values(["group", NETWORK, DEVICES_PER_NODE, NODES])


def largest_batches(points: pd.DataFrame) -> pd.DataFrame:
    """The static view's subset: each strategy and model at its largest per-device batch."""
    top = points.groupby("group")["batch"].transform("max")
    return points[points["batch"] == top]


def legend_toggle(field: str) -> alt.Parameter:
    """Click a legend entry to show it alone (shift-click adds, double-click resets)."""
    return alt.selection_point(fields=[field], bind="legend", name=f"{field}_toggle")


def _faded(toggle: alt.Parameter | None) -> alt.ConditionalValueDefNumberExprRef | alt.ValueDef:
    return alt.condition(toggle, alt.value(1.0), alt.value(0.12)) if toggle else alt.value(1.0)


def _speedup_layers(
    points: pd.DataFrame, networks: list[str], toggle: alt.Parameter | None = None
) -> alt.LayerChart:
    """Lines through the predictions, a 95% bar on every point, measured points as large
    diamonds; the networks sit side by side around each node count (``position``)."""
    margin = 2 ** (DODGE * len(networks) / 2 + 0.1)
    domain = [points["position"].min() / margin, points["position"].max() * margin]
    x_scale = alt.Scale(type="log", base=2, domain=domain, nice=False)
    x = alt.X(
        "position:Q",
        title=NODES_TITLE,
        scale=x_scale,
        axis=alt.Axis(values=[1, 2, 4, 8, 16, 32, 64]),
    )
    y_scale = alt.Scale(type="log", base=2)
    colour = alt.Color(
        "network:N",
        title="network" + (" (click to pick)" if toggle else ""),
        scale=alt.Scale(domain=networks),
        legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=3, labelLimit=320, titleLimit=320),
    )
    faded = _faded(toggle)
    # one node has no network: its points are grey, where every network's line starts
    one_node = alt.condition(alt.datum.one_node, alt.value(ONE_NODE_GREY), colour)
    base = alt.Chart().encode(x=x, color=one_node, opacity=faded)
    predicted = alt.FieldOneOfPredicate(field="kind", oneOf=[PREDICTED_MEASURED, PREDICTED_NEW])
    line = (
        base.transform_filter(predicted)
        .mark_line(strokeWidth=1.5)
        .encode(
            color=colour,
            y=alt.Y("speedup:Q", scale=y_scale, title="speedup over 1 device (95% interval)"),
            detail="network:N",
        )
    )
    bars = base.mark_rule().encode(
        y=alt.Y("low:Q", scale=y_scale),
        y2="high:Q",
        strokeWidth=alt.condition(alt.datum.kind == MEASURED, alt.value(3), alt.value(1.2)),
    )
    marks = base.mark_point(filled=True, stroke="black", strokeWidth=0.6).encode(
        y=alt.Y("speedup:Q", scale=y_scale),
        shape=alt.Shape(
            "kind:N",
            title="point",
            scale=alt.Scale(domain=KINDS, range=KIND_SHAPES),
            legend=alt.Legend(labelLimit=320),
        ),
        size=alt.condition(alt.datum.kind == MEASURED, alt.value(140), alt.value(45)),
        tooltip=[
            "group:N",
            "kind:N",
            "network:N",
            "nodes:Q",
            "devices_per_node:Q",
            "world_size:Q",
            "batch:Q",
            alt.Tooltip("speedup:Q", format=".2f"),
            alt.Tooltip("low:Q", format=".2f", title="95% low"),
            alt.Tooltip("high:Q", format=".2f", title="95% high"),
            "basis:N",
        ],
    )
    if toggle is not None:  # on the legend's own layer (the first coloured one), or it is inert
        line = line.add_params(toggle)
    ideal = (
        alt.Chart()
        .mark_line(color="grey", strokeDash=[4, 4], strokeWidth=1)
        .encode(
            x=alt.X("nodes:Q", scale=x_scale, title=NODES_TITLE),
            y=alt.Y("ideal:Q", scale=y_scale),
        )
    )
    return alt.layer(ideal, line, bars, marks, data=points)


def _batch_words(shown: pd.DataFrame) -> str:
    batches = sorted(shown["batch"].unique())
    if len(batches) == 1:
        return f"per-device batch {batches[0]} (the largest)"
    return "each at its largest per-device batch"


def speedup_chart(
    predictions: pd.DataFrame, scaling: pd.DataFrame, view: View
) -> alt.TopLevelMixin:
    """Predicted speedup against nodes, one colour per network, one panel per devices per
    node; static: every strategy and model (rows) at its largest batch; interactive: a
    dropdown for the strategy and model and one for the batch."""
    points = speedup_points(predictions, scaling)
    if points.empty:
        return message_chart("Nothing to show: no predicted or measured multi-device speedup.")
    networks = network_order(points)
    if view == "static":
        shown = largest_batches(points)
        layers = _speedup_layers(shown, networks).properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)
        return layers.facet(
            row=alt.Row("group:N", title=None),
            column=alt.Column("devices:N", title=None),
            title=f"{SPEEDUP_TITLE}, {_batch_words(shown)}",
        )
    batches = sorted(points["batch"].unique())
    group = _group_dropdown(points)
    batch = alt.param(
        name="batch",
        value=int(batches[-1]),
        bind=alt.binding_select(options=[int(b) for b in batches], name="per-device batch "),
    )
    layers = _speedup_layers(points, networks, legend_toggle("network"))
    layers = layers.properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)
    return (
        layers.facet(column=alt.Column("devices:N", title=None), title=SPEEDUP_TITLE)
        .transform_filter((alt.datum.group == group) & (alt.datum.batch == batch))
        .add_params(group, batch)
    )


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
    rows["group"] = _group(rows)
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


def _cost_layers(
    points: pd.DataFrame, title: str, layouts: list[str], toggle: alt.Parameter | None = None
) -> alt.LayerChart:
    y = alt.Y("layout:N", title=None, sort=layouts)
    offset = alt.YOffset("batch:N")
    colour = alt.Color(
        "batch:O",
        title="per-device batch" + (" (click to pick)" if toggle else ""),
        scale=alt.Scale(scheme="viridis"),
    )
    base = alt.Chart().encode(y=y, yOffset=offset, color=colour, opacity=_faded(toggle))
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
        layers = _cost_layers(points, title, layouts).properties(**size)
        panels = alt.Facet("group:N", title=None, header=GROUP_HEADER)
        chart = layers.facet(facet=panels, columns=2, title=heading)
        # one cost scale for all, but each panel its own layouts and its own axis to read
        return chart.resolve_scale(y="independent").resolve_axis(x="independent")
    layers = _cost_layers(points, title, layouts, legend_toggle("batch")).properties(**size)
    pick = _group_dropdown(points)
    chart = layers.transform_filter(alt.datum.group == pick).add_params(pick)
    return chart.properties(title=heading)


def _group_dropdown(points: pd.DataFrame) -> alt.Parameter:
    groups = sorted(points["group"].unique())
    return alt.param(
        name="group",
        value=groups[0],
        bind=alt.binding_select(options=groups, name="strategy · model "),
    )


# -- 3. remedies: gain over none and fraction recovered ---------------------------------------


def why_no_fraction(nodes: int, network: str, fastest: object) -> str:
    """Why a remedy row has no fraction recovered (analysis.remedy_gains leaves it empty)."""
    if int(nodes) == 1:
        return "one node: no network to recover from"
    if isinstance(fastest, str) and network == fastest:
        return "the fastest network measured: the reference"
    return "no faster network measured for this layout"


def _remedy_measure(remedies: pd.DataFrame, measure: str, column: str) -> pd.DataFrame:
    rows = remedies.copy()
    half = rows[f"{column}_ci95"].fillna(0.0)
    rows["measure"], rows["value"] = measure, rows[column]
    rows["low"], rows["high"] = rows[column] - half, rows[column] + half
    fastest = rows.get("fastest_network", pd.Series(np.nan, index=rows.index))
    rows["note"] = [
        "" if np.isfinite(v) else why_no_fraction(n, w, f)
        for v, n, w, f in zip(rows["value"], rows["nodes"], rows["network"], fastest, strict=True)
    ]
    return rows


def remedy_points(remedies: pd.DataFrame) -> pd.DataFrame:
    """Each remedy's gain over no remedy and the fraction of the slow network's loss it
    recovers, one row per measure with its 95% interval (value ± ci95). Where the fraction
    is not defined (one node, the fastest network) the row stays, empty, with a ``note``."""
    if remedies.empty or "gain_vs_none" not in remedies.columns:
        return pd.DataFrame()
    gain = _remedy_measure(remedies, GAIN, "gain_vs_none")
    fraction = _remedy_measure(remedies, FRACTION, "fraction_recovered")
    points = pd.concat([gain[gain["value"].notna()], fraction], ignore_index=True)
    points["group"] = _group(points)
    points["batch"] = points["batch_per_device"].astype(int)
    points["layout"] = [
        f"{layout_label(n, d, w)}, b={b}"
        for n, d, w, b in zip(
            points["nodes"],
            points["devices_per_node"],
            points["network"],
            points["batch"],
            strict=True,
        )
    ]
    points = points.sort_values(["group", WORLD_SIZE, NODES, NETWORK, "batch", "comm"])
    repeated = points.duplicated(["group", "measure", "layout"])
    points.loc[repeated, "note"] = ""  # one note per layout, not one per remedy
    columns = [
        "group",
        "measure",
        "layout",
        "comm",
        "network",
        "batch",
        "value",
        "low",
        "high",
        "note",
    ]
    return points[columns].reset_index(drop=True)


def _remedy_panel(
    points: pd.DataFrame,
    measure: str,
    comms: list[str],
    where: alt.Predicate | None,
    toggle: alt.Parameter | None,
) -> alt.LayerChart:
    keep = alt.datum.measure == measure
    keep = keep if where is None else keep & where
    first = measure == GAIN  # the second panel shares the first's rows: no labels again
    layouts = list(dict.fromkeys(points["layout"]))
    y = alt.Y("layout:N", title=None, sort=layouts, axis=alt.Axis(labels=first, ticks=first))
    colour = alt.Color(
        "comm:N",
        title="remedy (comm)" + (", click to pick" if toggle else ""),
        scale=alt.Scale(domain=comms),
    )
    offset = alt.YOffset("comm:N", scale=alt.Scale(domain=comms))
    base = alt.Chart().encode(y=y, yOffset=offset).transform_filter(keep)
    valid = base.transform_filter("isValid(datum.value)").encode(
        color=colour, opacity=_faded(toggle)
    )
    bars = valid.mark_rule(strokeWidth=2).encode(
        x=alt.X(
            "low:Q", title=f"{MEASURE_AXES[measure]} (95% interval)", scale=alt.Scale(zero=False)
        ),
        x2="high:Q",
    )
    dots = valid.mark_point(filled=True, size=60).encode(
        x="value:Q",
        tooltip=[
            "group:N",
            "layout:N",
            "comm:N",
            alt.Tooltip("value:Q", format=".2f", title=measure),
            alt.Tooltip("low:Q", format=".2f", title="95% low"),
            alt.Tooltip("high:Q", format=".2f", title="95% high"),
        ],
    )
    notes = (
        alt.Chart()
        .transform_filter(keep)
        .transform_filter(alt.datum.note != "")
        .mark_text(align="left", dx=4, color="grey", fontStyle="italic")
        .encode(y=y, x=alt.value(0), text="note:N")
    )
    if toggle is not None and first:  # defined once, on the legend's layer; fades both panels
        bars = bars.add_params(toggle)
    one = alt.Chart().mark_rule(color="black", strokeDash=[4, 3]).encode(x=alt.datum(1))
    return alt.layer(one, bars, dots, notes, data=points).properties(
        title=measure, width=PANEL_WIDTH, height=OFFSET_STEP
    )


def _remedy_pair(
    points: pd.DataFrame,
    comms: list[str],
    where: alt.Predicate | None = None,
    toggle: alt.Parameter | None = None,
) -> alt.HConcatChart:
    panels = [_remedy_panel(points, m, comms, where, toggle) for m in (GAIN, FRACTION)]
    return alt.hconcat(*panels).resolve_scale(y="shared")


def remedies_chart(remedies: pd.DataFrame, view: View) -> alt.TopLevelMixin:
    """Gain over no remedy and fraction recovered, side by side, a reference line at 1 in
    each; static: every strategy and model (stacked); interactive: a dropdown for them."""
    points = remedy_points(remedies)
    if points.empty:
        return message_chart(
            "Nothing to show: no communication remedy was measured beside none "
            "(the study's comm lists none, or no remedy cell succeeded)."
        )
    comms = sorted(points["comm"].unique())
    if view == "static":
        groups = sorted(points["group"].unique())
        rows = [
            _remedy_pair(points[points["group"] == g], comms).properties(title=g) for g in groups
        ]
        return alt.vconcat(*rows).properties(title=REMEDIES_TITLE)
    pick = _group_dropdown(points)
    pair = _remedy_pair(points, comms, alt.datum.group == pick, legend_toggle("comm"))
    pair = pair.add_params(pick)
    return pair.properties(title=REMEDIES_TITLE)


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
