"""Interactive report figures (Vega-Lite through Altair): tooltips on every point, a legend
that toggles strategies, and self-contained HTML.

The Snakemake report must work offline, so every page inlines the Vega, Vega-Lite and
vega-embed JavaScript that vl-convert bundles (``inline=True``): no request leaves the file.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from dpscale.analysis.laws import fits
from dpscale.analysis.results.rows import without_remedies
from dpscale.plan.layout import devices_words

EMBED_OPTIONS = {"actions": False, "renderer": "svg"}
WIDTH, HEIGHT = 420, 300


def _strategy_toggle() -> alt.Parameter:
    return alt.selection_point(fields=["strategy"], bind="legend", name="strategy_toggle")


def _faded(toggle: alt.Parameter) -> alt.ConditionalValueDefNumberExprRef:
    return alt.condition(toggle, alt.value(1.0), alt.value(0.12))


def throughput_points(cells: pd.DataFrame) -> pd.DataFrame:
    ok = cells[(cells["status"] == "ok") & (cells["mode"] == "synthetic")].copy()
    if ok.empty:
        return ok
    ok["devices"] = ok["world_size"].map(devices_words)
    ok["low"] = ok["img_s_mean"] - ok["img_s_ci95"]
    ok["high"] = ok["img_s_mean"] + ok["img_s_ci95"]
    return ok[
        [
            "strategy",
            "model",
            "world_size",
            "devices",
            "batch_per_device",
            "global_batch",
            "img_s_mean",
            "img_s_ci95",
            "low",
            "high",
        ]
    ]


def law_curves(points: pd.DataFrame, fit_table: pd.DataFrame, samples: int = 60) -> pd.DataFrame:
    """The fitted law T(b) = b/v0 + t_c as global img/s over the measured batch range (x0.5..2)."""
    fitted = fit_table[(fit_table["status"] == "ok") & (fit_table["mode"] == "synthetic")]
    rows = []
    for fit in fitted.itertuples(index=False):
        here = points[
            (points["strategy"] == fit.strategy)
            & (points["model"] == fit.model)
            & (points["world_size"] == fit.world_size)
        ]
        if here.empty:
            continue
        low, high = here["batch_per_device"].min() / 2, here["batch_per_device"].max() * 2
        for batch in np.geomspace(low, high, samples):
            rows.append(
                {
                    "strategy": fit.strategy,
                    "model": fit.model,
                    "devices": devices_words(fit.world_size),
                    "batch_per_device": float(batch),
                    "fitted_img_s": float(fits.throughput(batch, fit.v0, fit.t_c, fit.world_size)),
                    "v0": fit.v0,
                    "t_c": fit.t_c,
                    "b90": fit.b90,
                }
            )
    columns = ["strategy", "model", "devices", "batch_per_device", "fitted_img_s", "v0", "t_c"]
    return pd.DataFrame(rows, columns=[*columns, "b90"])


def _throughput_panel(points: pd.DataFrame, curves: pd.DataFrame, model: str) -> alt.LayerChart:
    toggle = _strategy_toggle()
    x = alt.X("batch_per_device:Q", scale=alt.Scale(type="log", base=2), title="per-device batch")
    colour = alt.Color("strategy:N", title="strategy (click to toggle)")
    dash = alt.StrokeDash("devices:N", title="devices")
    measured = alt.Chart(points[points["model"] == model])
    marks = measured.mark_point(filled=True, size=50).encode(
        x=x,
        y=alt.Y("img_s_mean:Q", title="global images/s (mean, 95% CI)"),
        color=colour,
        shape=alt.Shape("devices:N", title="devices"),
        opacity=_faded(toggle),
        tooltip=[
            "strategy",
            "devices",
            "batch_per_device",
            "global_batch",
            alt.Tooltip("img_s_mean:Q", format=".1f", title="img/s"),
            alt.Tooltip("img_s_ci95:Q", format=".1f", title="± 95% CI"),
        ],
    )
    bars = measured.mark_rule().encode(
        x=x, y="low:Q", y2="high:Q", color=colour, opacity=_faded(toggle)
    )
    layers = [marks.add_params(toggle), bars]
    here = curves[curves["model"] == model]
    if not here.empty:
        layers.append(
            alt.Chart(here)
            .mark_line()
            .encode(
                x=x,
                y="fitted_img_s:Q",
                color=colour,
                strokeDash=dash,
                opacity=_faded(toggle),
                tooltip=[
                    "strategy",
                    "devices",
                    alt.Tooltip("v0:Q", format=".1f", title="v0 (img/s per device)"),
                    alt.Tooltip("t_c:Q", format=".4f", title="t_c (s)"),
                    alt.Tooltip("b90:Q", format=".1f", title="b90"),
                ],
            )
        )
    return alt.layer(*layers).properties(title=model, width=WIDTH, height=HEIGHT)


def throughput_chart(cells: pd.DataFrame, fit_table: pd.DataFrame) -> alt.TopLevelMixin:
    cells, fit_table = without_remedies(cells), without_remedies(fit_table)
    points = throughput_points(cells)
    if points.empty:
        return _message_chart("No successful throughput cells to plot.")
    curves = law_curves(points, fit_table)
    panels = [_throughput_panel(points, curves, m) for m in sorted(points["model"].unique())]
    return alt.hconcat(*panels).resolve_scale(color="shared")


def _speedup_panel(data: pd.DataFrame, model: str, top: int) -> alt.LayerChart:
    toggle = _strategy_toggle()
    colour = alt.Color("strategy:N", title="strategy (click to toggle)")
    x = alt.X("world_size:Q", title="devices (world size)", scale=alt.Scale(domain=[1, top]))
    base = alt.Chart(data[data["model"] == model]).encode(x=x, color=colour, opacity=_faded(toggle))
    lines = base.mark_line(point=True).encode(
        y=alt.Y("speedup:Q", title="speedup vs 1 device (weak scaling)"),
        detail="batch:N",
        tooltip=[
            "strategy",
            "world_size",
            "batch_per_device",
            alt.Tooltip("speedup:Q", format=".2f"),
            alt.Tooltip("speedup_ci95:Q", format=".2f", title="± 95% CI"),
            alt.Tooltip("efficiency:Q", format=".0%"),
        ],
    )
    bars = base.mark_rule().encode(y="low:Q", y2="high:Q")
    ideal = pd.DataFrame({"world_size": [1, top], "speedup": [1, top]})
    ideal_line = (
        alt.Chart(ideal).mark_line(strokeDash=[4, 4], color="grey").encode(x=x, y="speedup:Q")
    )
    layer = alt.layer(lines.add_params(toggle), bars, ideal_line)
    return layer.properties(title=model, width=WIDTH, height=HEIGHT)


def speedup_chart(scaling: pd.DataFrame) -> alt.TopLevelMixin:
    """Weak-scaling speedup vs devices, one line per strategy and per-device batch."""
    scaling = without_remedies(scaling)
    data = scaling[scaling["world_size"] > 1]
    if data.empty:
        return _message_chart("No multi-device cells with a 1-device baseline.")
    data = scaling.copy()
    data["low"] = data["speedup"] - data["speedup_ci95"].fillna(0)
    data["high"] = data["speedup"] + data["speedup_ci95"].fillna(0)
    data["batch"] = "b=" + data["batch_per_device"].astype(str)
    top = int(data["world_size"].max())
    panels = [_speedup_panel(data, m, top) for m in sorted(data["model"].unique())]
    return alt.hconcat(*panels).resolve_scale(color="shared")


def _message_chart(message: str) -> alt.Chart:
    return (
        alt.Chart(pd.DataFrame({"text": [message]}))
        .mark_text(size=14)
        .encode(text="text:N")
        .properties(width=WIDTH, height=60)
    )


def save_inline(chart: alt.TopLevelMixin, path: Path) -> None:
    """Self-contained HTML: the Vega JavaScript is inlined, nothing is fetched."""
    chart.save(str(path), format="html", inline=True, embed_options=EMBED_OPTIONS)
