"""Figure 3 of the answers: what each communication remedy gains over none and the
fraction of the slow network's loss it recovers, with 95% intervals."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from dpscale.plan.columns import NETWORK, NODES, WORLD_SIZE
from dpscale.render.answer_views import (
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

GAIN = "gain over no remedy"
FRACTION = "fraction recovered"
MEASURE_AXES = {
    GAIN: "img/s with the remedy / without",
    FRACTION: "share of the slow network's loss won back",
}
REMEDIES_TITLE = "Communication remedies against none, per layout and batch (95% intervals)"


def why_no_fraction(nodes: int, network: str, fastest: object) -> str:
    """Why a remedy row has no fraction recovered (analysis.answers.remedy_gains leaves it
    empty)."""
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
    points["group"] = strategy_model(points)
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
        color=colour, opacity=faded(toggle)
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
    pick = group_dropdown(points)
    pair = _remedy_pair(points, comms, alt.datum.group == pick, legend_toggle("comm"))
    pair = pair.add_params(pick)
    return pair.properties(title=REMEDIES_TITLE)
