"""The predictions page shows a reader's columns first (configuration, speed-up with its
interval, kind, what it stands on, how that kind was checked) and names the CSV that holds
the rest; a prediction with no communication term says so instead of a bare point."""

from __future__ import annotations

import math

import pandas as pd

from dpscale.analysis.laws.commmodel.prediction import COMPUTE_ONLY, PREDICTION_COLUMNS
from dpscale.render import predictions_page as pp


def predictions() -> pd.DataFrame:
    base = dict.fromkeys(PREDICTION_COLUMNS, math.nan) | {
        "strategy": "mxnet-dist",
        "model": "resnet18-imagenet64-c10",
        "network": "10g",
        "bandwidth_Gbit_s": 10.0,
        "nodes": 8,
        "devices_per_node": 1,
        "world_size": 8,
        "batch_per_device": 32,
        "status": "ok",
        "kind": "extrapolates in ranks, bandwidth",
        "validated_by": "ranks: not validated; bandwidth: 12% (leave one network out)",
    }
    return pd.DataFrame(
        [
            base
            | {"basis": "predict.networks", "speedup": 6.62, "speedup_lo": 6.29}
            | {"speedup_hi": 6.98},
            base
            | {"basis": f"predict.networks; {COMPUTE_ONLY} (the fitted overlap hides it)"}
            | {"speedup": 8.0, "speedup_lo": 8.0, "speedup_hi": 8.0},
            base
            | {"basis": "predict.networks", "status": "not predicted"}
            | {"reason": "link 'x' was not measured"},
        ]
    )


def test_the_page_shows_the_readers_columns_and_names_the_csv_for_the_rest():
    table = predictions()
    shown = pp.display_table(table)
    assert list(shown.columns) == pp.SHOWN and len(pp.SHOWN) < len(table.columns) / 4
    first = shown.iloc[0]
    assert first[pp.CONFIGURATION] == (
        "mxnet-dist, 8 nodes x 1 device over 10g, batch 32 per device (ResNet-18 64 px)"
    )
    assert first[pp.SPEEDUP] == "6.62x [6.29, 6.98]"
    assert first[pp.KIND] == "extrapolates in ranks, bandwidth"
    assert first[pp.BASIS] == "10 Gbit/s link (predict.networks)"
    assert first[pp.CHECKED].startswith("ranks: not validated; bandwidth: 12%")
    assert shown.iloc[2][pp.SPEEDUP] == "not predicted: link 'x' was not measured"
    page = pp.predictions_html(table, "predictions")
    assert "predictions.csv" in page and "step_time_s" not in page


def test_a_compute_only_prediction_is_no_bare_point():
    compute_only = pp.display_table(predictions()).iloc[1]
    assert COMPUTE_ONLY in compute_only[pp.BASIS]
    assert compute_only[pp.SPEEDUP].startswith("8x (no interval")
    assert "[8, 8]" not in compute_only[pp.SPEEDUP]
