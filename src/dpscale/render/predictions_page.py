"""The predictions page: the columns a reader needs first (the configuration, its speed-up
with its interval, the kind of prediction, what it stands on and how that kind was
checked); every other column stays in predictions.csv, which the page names."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from dpscale.analysis.answers.answer_table import short_model
from dpscale.analysis.laws.words import is_known
from dpscale.plan.layout import Layout
from dpscale.render.html import table_html

CONFIGURATION = "configuration"
SPEEDUP = "speedup over 1 device (95% interval)"
KIND = "kind"
BASIS = "what it stands on"
CHECKED = "how that kind was checked (held-out median error)"
SHOWN = [CONFIGURATION, SPEEDUP, KIND, BASIS, CHECKED]
NOTE = (
    "One row per configuration and per-device batch. Every other column (step time, img/s, "
    "the break-even batch, the compression a remedy needs, ...) is in predictions.csv: "
    "under 8. Data in this report, and tables/predictions.csv beside it."
)


def _configuration(row: pd.Series) -> str:
    where = Layout(int(row["nodes"]), int(row["devices_per_node"])).words(str(row["network"]))
    return (
        f"{row['strategy']}, {where}, batch {int(row['batch_per_device'])} per device "
        f"({short_model(row['model'])})"
    )


def _speedup(row: pd.Series) -> str:
    """ "1.67x [1.59, 1.76]"; a zero-width interval is said to be none; why a row has no
    prediction where it has none."""
    if row.get("status") != "ok" or not is_known(row.get("speedup")):
        reason = row.get("reason")
        return f"not predicted: {reason}" if isinstance(reason, str) and reason else "not predicted"
    value, low, high = row["speedup"], row["speedup_lo"], row["speedup_hi"]
    if not (is_known(low) and is_known(high)):
        return f"{value:.3g}x (no interval)"
    if math.isclose(low, high, rel_tol=1e-9):
        return f"{value:.3g}x (no interval: nothing in the fit varies it)"
    return f"{value:.3g}x [{low:.3g}, {high:.3g}]"


def _basis(row: pd.Series) -> str:
    """The prediction's basis, with the link's rate where it crosses nodes."""
    basis = str(row["basis"]) if isinstance(row.get("basis"), str) else ""
    if int(row["nodes"]) > 1 and is_known(row.get("bandwidth_Gbit_s")):
        return f"{row['bandwidth_Gbit_s']:g} Gbit/s link ({basis})"
    return basis


def display_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """The predictions as the page shows them: SHOWN, one text column each."""
    if predictions.empty:
        return pd.DataFrame(columns=SHOWN)
    shown = pd.DataFrame(
        {
            CONFIGURATION: predictions.apply(_configuration, axis=1),
            SPEEDUP: predictions.apply(_speedup, axis=1),
            KIND: predictions["kind"].fillna(""),
            BASIS: predictions.apply(_basis, axis=1),
            CHECKED: predictions["validated_by"].fillna(""),
        }
    )
    return shown[SHOWN].astype(str)


def predictions_html(
    predictions: pd.DataFrame, title: str, source: str | Path = "tables/predictions.csv"
) -> str:
    """A self-contained page of the reader's columns, naming where the rest are; with more
    rows than the report shows, their summary (render.bounds), naming ``source``."""
    return table_html(display_table(predictions), title, NOTE, source=source, raw=predictions)
