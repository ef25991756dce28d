"""Figures for the answers (render.answer_speedup, answer_cost, answer_remedies): the points
each figure draws, their 95% intervals and labels, the encodings and layers of both views,
and empty tables."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd
import pytest

from dpscale.render import answer_cost, answer_remedies, answer_speedup
from dpscale.steps.findings import answer_figures, remedies_figure

GROUP = "torch-ddp · resnet18"


def prediction(nodes: int, devices: int, network: str, batch: int, speedup: float, **extra):
    bandwidth = {"host": math.nan, "1gbe": 1.0, "10g": 10.0}[network]
    return {
        "strategy": "torch-ddp",
        "model": "resnet18",
        "network": network,
        "basis": "test",
        "bandwidth_Gbit_s": bandwidth,
        "nodes": nodes,
        "devices_per_node": devices,
        "world_size": nodes * devices,
        "batch_per_device": batch,
        "measured": False,
        "speedup": speedup,
        "speedup_lo": speedup * 0.9,
        "speedup_hi": speedup * 1.1,
        "status": "ok",
        "reason": None,
        **extra,
    }


@pytest.fixture
def predictions() -> pd.DataFrame:
    rows = [
        prediction(1, 2, "host", 16, 1.8, measured=True),
        prediction(2, 1, "1gbe", 16, 1.2, measured=True),
        prediction(4, 1, "1gbe", 16, 2.0),
        prediction(2, 1, "10g", 16, 1.9),
        prediction(4, 1, "10g", 16, 3.6),
        prediction(2, 1, "10g", 4, 1.5),
        prediction(8, 1, "10g", 16, math.nan, status="not predicted", reason="no link"),
    ]
    return pd.DataFrame(rows)


def scaling_row(nodes: int, devices: int, network: str, speedup: float, comm: str = "none"):
    return {
        "strategy": "torch-ddp",
        "model": "resnet18",
        "mode": "synthetic",
        "nodes": nodes,
        "network": network,
        "comm": comm,
        "devices_per_node": devices,
        "world_size": nodes * devices,
        "batch_per_device": 16,
        "speedup": speedup,
        "speedup_ci95": 0.1,
    }


@pytest.fixture
def scaling() -> pd.DataFrame:
    return pd.DataFrame(
        [
            scaling_row(1, 1, "host", 1.0),  # the baseline: not a point
            scaling_row(1, 2, "host", 1.7),
            scaling_row(2, 1, "1gbe", 1.1),
            scaling_row(2, 1, "1gbe", 1.6, comm="fp16"),  # a remedy: not the plain speedup
        ]
    )


def test_speedup_points_label_measured_and_predicted_with_intervals(predictions, scaling):
    points = answer_speedup.speedup_points(predictions, scaling)
    assert (points["low"] <= points["speedup"]).all() and (
        points["speedup"] <= points["high"]
    ).all()
    measured = points[points["kind"] == answer_speedup.MEASURED]
    assert sorted(measured["speedup"].unique()) == [1.1, 1.7]  # no baseline, no remedy
    two_nodes = points[(points["nodes"] == 2) & (points["network"] == "1gbe")]
    assert set(two_nodes["kind"]) == {answer_speedup.MEASURED, answer_speedup.PREDICTED_MEASURED}
    four = points[(points["nodes"] == 4)]
    assert set(four["kind"]) == {answer_speedup.PREDICTED_NEW}  # not measured: extrapolated
    assert not (points["speedup"].isna()).any()  # "not predicted" rows are left out


def test_both_views_label_the_predictions_at_unmeasured_layouts_extrapolated(predictions, scaling):
    """The figure that draws 16 devices says, in its own legend, that those are extrapolated."""
    for view in ("static", "interactive"):
        text = json.dumps(answer_speedup.speedup_chart(predictions, scaling, view).to_dict())
        assert "predicted, not measured (extrapolated)" in text, view


def test_one_node_points_start_every_network_line(predictions, scaling):
    points = answer_speedup.speedup_points(predictions, scaling)
    one = points[points["one_node"]]
    assert set(one["network"]) == {"1gbe", "10g"}  # the host row on each network
    assert (one["nodes"] == 1).all()
    assert answer_speedup.network_order(points) == ["1gbe", "10g"]


def test_every_point_sits_at_its_own_node_count_and_the_row_labels_read_level(predictions, scaling):
    """No offset per network: on a log axis one would lift a network's line above another's
    that predicts the same; the strategy · model labels are level and large."""
    spec = answer_speedup.speedup_chart(predictions, scaling, "static").to_dict()
    assert fields(spec, "x") == {"nodes"}
    header = spec["facet"]["header"]
    assert header.get("labelAngle", 0) == 0 and header["labelFontSize"] >= 12
    points = answer_speedup.speedup_points(predictions, scaling)
    assert "position" not in points.columns


def test_a_compute_only_prediction_has_its_own_mark(predictions, scaling):
    from dpscale.analysis.laws.commmodel.prediction import COMPUTE_ONLY

    same = [
        prediction(8, 1, network, 16, 8.0, basis=f"x; {COMPUTE_ONLY} (hidden)")
        | {"speedup_lo": 8.0, "speedup_hi": 8.0}
        for network in ("1gbe", "10g")
    ]
    points = answer_speedup.speedup_points(pd.concat([predictions, pd.DataFrame(same)]), scaling)
    eight = points[points["nodes"] == 8]
    assert set(eight["kind"]) == {answer_speedup.PREDICTED_COMPUTE}
    text = json.dumps(answer_speedup.speedup_chart(predictions, scaling, "static").to_dict())
    assert answer_speedup.PREDICTED_COMPUTE in text  # in the legend, with its shape


def test_static_speedup_shows_the_largest_batch(predictions, scaling):
    points = answer_speedup.largest_batches(answer_speedup.speedup_points(predictions, scaling))
    assert set(points["batch"]) == {16}


def encodings(spec: Any) -> list[dict]:
    """Every encoding block in a Vega-Lite spec, however nested."""
    found = []
    if isinstance(spec, dict):
        if isinstance(spec.get("encoding"), dict):
            found.append(spec["encoding"])
        for value in spec.values():
            found += encodings(value)
    elif isinstance(spec, list):
        for value in spec:
            found += encodings(value)
    return found


def fields(spec: dict, channel: str) -> set[str]:
    out = set()
    for encoding in encodings(spec):
        value = encoding.get(channel)
        if isinstance(value, dict) and "field" in value:
            out.add(value["field"])
    return out


def test_speedup_static_view_facets_and_draws_intervals(predictions, scaling):
    spec = answer_speedup.speedup_chart(predictions, scaling, "static").to_dict()
    # one panel per strategy · model and devices per node, named by both, only where drawn
    assert spec["facet"]["field"] == "panel" and spec["columns"] == 2
    panels = {row["panel"] for row in spec["datasets"][next(iter(spec["datasets"]))]}
    assert panels == {f"{GROUP} | 1 device per node", f"{GROUP} | 2 devices per node"}
    assert {"low"} <= fields(spec, "y") and "high" in fields(spec, "y2")  # the 95% bars
    assert "kind" in fields(spec, "shape") and "network" in fields(spec, "color")
    shape = next(e["shape"] for e in encodings(spec) if "shape" in e)
    assert shape["scale"]["domain"] == answer_speedup.KINDS
    assert "ideal" in fields(spec, "y")
    assert "batch 16" in json.dumps(spec["title"])
    assert "params" not in json.dumps(spec)  # no dropdowns in a PNG


def test_speedup_interactive_view_has_dropdowns_and_a_legend_toggle(predictions, scaling):
    text = json.dumps(answer_speedup.speedup_chart(predictions, scaling, "interactive").to_dict())
    assert '"input": "select"' in text and '"name": "group"' in text and '"name": "batch"' in text
    assert '"bind": "legend"' in text and '"fields": ["network"]' in text
    assert '"tooltip"' in text


COST = pd.DataFrame(
    {
        "strategy": "torch-ddp",
        "model": "resnet18",
        "network": ["host", "host", "1gbe"],
        "nodes": [1, 1, 2],
        "devices_per_node": [1, 2, 1],
        "world_size": [1, 2, 2],
        "batch_per_device": 16,
        "global_batch": [16, 32, 32],
        "img_s": [10.0, 20.0, 4.0],
        "img_s_ci95": [1.0, 2.0, 5.0],
        "node_hours_per_1000_images": [1000 / 10 / 3600, 1000 / 20 / 3600, 2000 / 4 / 3600],
        "cost_per_1000_images": math.nan,
        "currency": "no price given",
    }
)


def test_cost_points_use_node_hours_without_a_price_and_carry_intervals():
    points, title = answer_cost.cost_points(COST)
    assert "node-hours" in title and "no price given" in title
    one = points.iloc[0]
    assert one["low"] == pytest.approx(one["value"] * 10 / 11)  # 1/img_s at its faster end
    assert one["high"] == pytest.approx(one["value"] * 10 / 9)
    slow = points[points["network"] == "1gbe"].iloc[0]
    assert math.isnan(slow["high"])  # the interval reaches 0 img/s: no upper bound
    assert list(points["layout"]) == [
        "1 node × 1 device, host",
        "1 node × 2 devices, host",
        "2 nodes × 1 device, 1gbe",
    ]


def test_cost_points_use_money_when_every_layout_is_priced():
    priced = COST.assign(cost_per_1000_images=[0.1, 0.2, 0.3], currency="EUR")
    points, title = answer_cost.cost_points(priced)
    assert title == "cost per 1,000 images (EUR)"
    assert list(points["value"]) == [0.1, 0.2, 0.3]


@pytest.mark.parametrize("view", ["static", "interactive"])
def test_cost_chart_draws_intervals_per_layout(view):
    spec = answer_cost.cost_chart(COST, view).to_dict()
    assert "layout" in fields(spec, "y") and "batch" in fields(spec, "yOffset")
    assert "low" in fields(spec, "x") and "high" in fields(spec, "x2")
    assert ('"input": "select"' in json.dumps(spec)) == (view == "interactive")


REMEDIES = pd.DataFrame(
    {
        "strategy": "torch-ddp",
        "model": "resnet18",
        "nodes": [1, 2, 2],
        "network": ["host", "10gbe", "1gbe"],
        "devices_per_node": [2, 1, 1],
        "world_size": 2,
        "batch_per_device": 16,
        "comm": "fp16",
        "gain_vs_none": [1.1, 0.9, 1.5],
        "gain_vs_none_ci95": [0.1, 0.1, 0.2],
        "fastest_network": [math.nan, "10gbe", "10gbe"],
        "fraction_recovered": [math.nan, math.nan, 0.75],
        "fraction_recovered_ci95": [math.nan, math.nan, 0.25],
    }
)


def test_remedy_points_carry_both_measures_and_say_why_a_fraction_is_missing():
    points = answer_remedies.remedy_points(REMEDIES)
    gain = points[points["measure"] == answer_remedies.GAIN]
    assert len(gain) == 3 and (gain["high"] - gain["low"]).round(6).tolist() == [0.2, 0.2, 0.4]
    fraction = points[points["measure"] == answer_remedies.FRACTION].set_index("network")
    assert fraction.loc["1gbe", "low"] == pytest.approx(0.5)
    assert fraction.loc["1gbe", "note"] == ""
    assert "one node" in fraction.loc["host", "note"]
    assert "fastest network" in fraction.loc["10gbe", "note"]


@pytest.mark.parametrize("view", ["static", "interactive"])
def test_remedies_chart_has_reference_lines_at_one(view):
    spec = answer_remedies.remedies_chart(REMEDIES, view).to_dict()
    references = [e for e in encodings(spec) if e.get("x") == {"datum": 1}]
    assert len(references) == 2  # gain 1 and fraction 1
    assert "comm" in fields(spec, "color") and "high" in fields(spec, "x2")


@pytest.mark.parametrize("view", ["static", "interactive"])
def test_no_remedies_says_nothing_to_show(view):
    empty = pd.DataFrame(columns=list(REMEDIES.columns))
    assert answer_remedies.remedy_points(empty).empty
    text = json.dumps(answer_remedies.remedies_chart(empty, view).to_dict())
    assert "Nothing to show" in text


def test_the_steps_write_a_png_and_a_self_contained_page_per_figure(tmp_path, predictions, scaling):
    inputs = {name: tmp_path / f"{name}.csv" for name in ("predictions", "scaling", "cost")}
    inputs["remedies"] = tmp_path / "remedies.csv"
    predictions.to_csv(inputs["predictions"], index=False)
    scaling.to_csv(inputs["scaling"], index=False)
    COST.to_csv(inputs["cost"], index=False)
    pd.DataFrame(columns=list(REMEDIES.columns)).to_csv(inputs["remedies"], index=False)
    outputs = {}
    for name in ("speedup", "cost", "remedies"):
        outputs[f"{name}_static"] = tmp_path / "figures" / f"{name}.png"
        outputs[f"{name}_interactive"] = tmp_path / "figures" / f"{name}_interactive.html"
    answer_figures(inputs, outputs, {})
    remedies_figure(inputs, outputs, {})
    for name in ("speedup", "cost", "remedies"):
        assert outputs[f"{name}_static"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        page = outputs[f"{name}_interactive"].read_text()
        assert "vegaEmbed" in page and "<script src=" not in page
    assert "Nothing to show" in json.dumps(spec_of(outputs["remedies_interactive"].read_text()))


def spec_of(page: str) -> dict:
    """The Vega-Lite specification embedded in an Altair page."""
    match = re.search(r"(?:const|var) spec = (\{.*?\});\n", page, re.S)
    assert match, "no Vega-Lite spec found in the page"
    return json.loads(match.group(1))


def layers_of(spec: Any) -> list[list[dict]]:
    """Every list of layers in a Vega-Lite spec, however nested."""
    found = []
    if isinstance(spec, dict):
        if isinstance(spec.get("layer"), list):
            found.append(spec["layer"])
        for value in spec.values():
            found += layers_of(value)
    elif isinstance(spec, list):
        for value in spec:
            found += layers_of(value)
    return found


def charts(predictions: pd.DataFrame, scaling: pd.DataFrame) -> dict[str, Any]:
    return {
        "speedup": answer_speedup.speedup_chart(predictions, scaling, "interactive"),
        "cost": answer_cost.cost_chart(COST, "interactive"),
        "remedies": answer_remedies.remedies_chart(REMEDIES, "interactive"),
    }


@pytest.mark.parametrize("name", ["speedup", "cost", "remedies"])
def test_the_legend_toggle_sits_on_the_first_coloured_layer(predictions, scaling, name):
    """Vega-Lite gives a layered chart's legend to its first coloured layer; a legend-bound
    selection on a later layer draws but does nothing when clicked (found in a browser)."""
    spec = charts(predictions, scaling)[name].to_dict()
    toggles = [p for p in spec.get("params", []) if p.get("bind") == "legend"]
    assert len(toggles) == 1
    (view,) = toggles[0]["views"]  # Altair names the layer that defines it
    firsts = []
    for layers in layers_of(spec):
        coloured = [x for x in layers if "field" in x.get("encoding", {}).get("color", {})]
        if any(x.get("name") == view for x in layers):
            firsts.append(coloured[0].get("name"))
    assert firsts == [view]


def test_no_speedup_or_cost_to_draw_says_so(scaling):
    baseline_only = scaling[scaling["world_size"] == 1]
    speedup = answer_speedup.speedup_chart(pd.DataFrame(), baseline_only, "static")
    assert "Nothing to show" in json.dumps(speedup.to_dict())
    cost = answer_cost.cost_chart(COST.iloc[0:0], "interactive")
    assert "Nothing to show" in json.dumps(cost.to_dict())
