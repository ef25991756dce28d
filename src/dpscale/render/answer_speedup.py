"""Figure 1 of the answers: predicted (and measured) speedup against nodes, one colour per
network, every interval a 95% one from the tables. Every point sits at its own node count
(no offsets: an offset on a log axis lifts one network's line above another's); a
prediction that stands on compute alone has a mark of its own."""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from dpscale.analysis.laws.commmodel.prediction import COMPUTE_ONLY
from dpscale.analysis.results.rows import without_remedies
from dpscale.plan.columns import DEVICES_PER_NODE, NETWORK, NODES, RUN, WORLD_SIZE
from dpscale.plan.layout import HOST_NETWORK, devices_per_node_words
from dpscale.render.answer_views import (
    PANEL_HEIGHT,
    PANEL_WIDTH,
    View,
    faded,
    group_dropdown,
    legend_toggle,
    message_chart,
    strategy_model,
)
from dpscale.render.bounds import PANEL_LIMIT, too_many_panels

MEASURED = "measured (mean, 95% CI)"
PREDICTED_MEASURED = "predicted, layout measured"
PREDICTED_NEW = "predicted, not measured (extrapolated)"
PREDICTED_COMPUTE = "predicted from compute only (no communication term)"
KINDS = [MEASURED, PREDICTED_MEASURED, PREDICTED_NEW, PREDICTED_COMPUTE]
KIND_SHAPES = ["diamond", "circle", "triangle-up", "square"]
PREDICTED_KINDS = [PREDICTED_MEASURED, PREDICTED_NEW, PREDICTED_COMPUTE]
SPEEDUP_TITLE = "Speedup over 1 device against nodes, per network (95% intervals)"
NODES_TITLE = "nodes"
ONE_NODE_GREY = "#666666"
# each panel's name above it, level and large: its strategy · model, then its devices per node
PANEL_HEADER = alt.Header(
    labelAngle=0,
    labelExpr="split(datum.label, ' | ')",
    labelFontSize=14,
    labelFontWeight="bold",
    labelLimit=PANEL_WIDTH,
    labelPadding=6,
)
COLUMN_HEADER = alt.Header(labelFontSize=14, labelFontWeight="bold")


def _predicted(predictions: pd.DataFrame) -> pd.DataFrame:
    if predictions.empty or "speedup" not in predictions.columns:
        return pd.DataFrame()
    ok = predictions[(predictions["status"] == "ok") & predictions["speedup"].notna()].copy()
    measured = ok["measured"].astype(str).str.lower() == "true"
    compute = ok["basis"].astype(str).str.contains(COMPUTE_ONLY, regex=False)
    ok["kind"] = np.where(
        compute & ~measured,
        PREDICTED_COMPUTE,
        np.where(measured, PREDICTED_MEASURED, PREDICTED_NEW),
    )
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
    points["group"] = strategy_model(points)
    points["batch"] = points["batch_per_device"].astype(int)
    points["devices"] = points["devices_per_node"].map(lambda d: devices_per_node_words(int(d)))
    points["ideal"] = points["world_size"].astype(float)
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
    ]
    return points[columns].sort_values(["group", NETWORK, DEVICES_PER_NODE, NODES])


def largest_batches(points: pd.DataFrame) -> pd.DataFrame:
    """The static view's subset: each strategy and model at its largest per-device batch."""
    top = points.groupby("group")["batch"].transform("max")
    return points[points["batch"] == top]


def most_devices(points: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The static view's panels: one per strategy and model and devices per node; above
    PANEL_LIMIT (render.bounds), one per strategy and model, at its most devices per node
    (every count in the interactive page and predictions.csv); and the title's words."""
    panels = len(points.drop_duplicates(["group", DEVICES_PER_NODE]))
    if not too_many_panels(panels):
        return points, ""
    top = points.groupby("group")[DEVICES_PER_NODE].transform("max")
    shown = points[points[DEVICES_PER_NODE] == top]
    kept = shown["group"].nunique()
    return shown, (
        f"; {panels:,} panels, more than {PANEL_LIMIT}: the {kept:,} of each strategy and "
        "model's most devices per node (every count: predictions.csv)"
    )


def _speedup_layers(
    points: pd.DataFrame, networks: list[str], toggle: alt.Parameter | None = None
) -> alt.LayerChart:
    """Lines through the predictions, a 95% bar on every point, measured points as large
    diamonds, every point at its own node count (networks that predict alike overlap)."""
    margin = 2**0.25
    domain = [points["nodes"].min() / margin, points["nodes"].max() * margin]
    x_scale = alt.Scale(type="log", base=2, domain=domain, nice=False)
    x = alt.X(
        "nodes:Q",
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
    opacity = faded(toggle)
    # one node has no network: its points are grey, where every network's line starts
    one_node = alt.condition(alt.datum.one_node, alt.value(ONE_NODE_GREY), colour)
    base = alt.Chart().encode(x=x, color=one_node, opacity=opacity)
    predicted = alt.FieldOneOfPredicate(field="kind", oneOf=PREDICTED_KINDS)
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
        shown, most = most_devices(largest_batches(points))
        # only the panels with a point: a strategy that ran one layout is one panel
        shown = shown.assign(panel=shown["group"] + " | " + shown["devices"])
        layers = _speedup_layers(shown, networks).properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)
        return layers.facet(
            facet=alt.Facet("panel:N", title=None, header=PANEL_HEADER),
            columns=2,
            title=f"{SPEEDUP_TITLE}, {_batch_words(shown)}{most}",
        )
    batches = sorted(points["batch"].unique())
    group = group_dropdown(points)
    batch = alt.param(
        name="batch",
        value=int(batches[-1]),
        bind=alt.binding_select(options=[int(b) for b in batches], name="per-device batch "),
    )
    layers = _speedup_layers(points, networks, legend_toggle("network"))
    layers = layers.properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)
    return (
        layers.facet(
            column=alt.Column("devices:N", title=None, header=COLUMN_HEADER), title=SPEEDUP_TITLE
        )
        .transform_filter((alt.datum.group == group) & (alt.datum.batch == batch))
        .add_params(group, batch)
    )
