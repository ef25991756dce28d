"""The published cases page: the check's summary as sentences above one row per case,
predicted beside published with the error, its basis (extrapolated), status and source."""

from __future__ import annotations

import math
from html import escape

import pandas as pd

from dpscale.render.html import table_html

# not "status": the HTML table would make each status a CSS class of its row
STATUS = "status or reason"
# the prediction's own assumptions; the case's notes (what its source lacks) stay in
# cases.yaml and the CSV, out of the page, which every report carries
ASSUMED = "assumptions (the case's own notes: cases.yaml)"
CASE_NOTES = " || case: "
# the link rate at which the prediction meets the published figure (a diagnostic)
IMPLIED = "link rate the published figure implies"
# the empirical interval from the other sources' residuals
INTERVAL = "80% interval (other sources)"
SHOWN = [
    "id",
    "model",
    "devices",
    "link",
    "metric",
    "predicted",
    INTERVAL,
    "published",
    "error",
    IMPLIED,
    "basis",
    STATUS,
    "source",
    "compute",
    ASSUMED,
]
PAGE_STYLE = (
    "<style>ul.summary li { margin-bottom: 0.4em; max-width: 70em; }"
    " td:last-child { min-width: 40em; font-size: 11px; }</style>"
)


def _is_ratio(metric: str) -> bool:
    return "ratio" in metric


def _value(value: float, metric: str) -> str:
    """An efficiency as a percent, a ratio as a number, nothing where there is none."""
    if not isinstance(value, float | int) or math.isnan(value):
        return ""
    return f"{value:.2f}" if _is_ratio(metric) else f"{value:.1f}%"


def _error(row: pd.Series) -> str:
    """'+7.3 pts' (efficiency), '-58.1%' (a ratio), '' where nothing was compared."""
    if pd.notna(row["error_points"]):
        return f"{row['error_points']:+.1f} pts"
    if pd.notna(row["error_pct"]):
        return f"{row['error_pct']:+.1f}%"
    return ""


def _implied(gbit_s: float, pct: float) -> str:
    """'1.60 Gbit/s (16% of nominal)'; nothing where no rate meets the published figure."""
    if not isinstance(gbit_s, float | int) or math.isnan(gbit_s):
        return ""
    return f"{gbit_s:.3g} Gbit/s ({pct:.0f}% of nominal)"


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """The check as text, one row per case; a case not predicted keeps its reason in status."""
    shown = table.copy()
    metric = shown["metric"].fillna("").astype(str)
    shown["predicted"] = [_value(v, m) for v, m in zip(shown["predicted"], metric, strict=True)]
    shown["published"] = [_value(v, m) for v, m in zip(shown["published"], metric, strict=True)]
    shown["error"] = shown.apply(_error, axis=1) if len(shown) else []
    lo = shown["interval_lo"] if "interval_lo" in shown else pd.Series(math.nan, shown.index)
    hi = shown["interval_hi"] if "interval_hi" in shown else pd.Series(math.nan, shown.index)
    shown[INTERVAL] = [
        f"{a:.1f}-{b:.1f}%" if pd.notna(a) and pd.notna(b) else ""
        for a, b in zip(lo, hi, strict=True)
    ]
    shown[IMPLIED] = [
        _implied(gbit, pct)
        for gbit, pct in zip(shown["implied_gbit_s"], shown["implied_pct_of_nominal"], strict=True)
    ]
    reason = shown["reason"].fillna("").astype(str)
    shown[STATUS] = [
        f"{status}: {why}" if why else status
        for status, why in zip(shown["status"].astype(str), reason, strict=True)
    ]
    shown["compute"] = shown["compute_source"]
    own = shown["assumptions"].fillna("").astype(str).str.split(CASE_NOTES, regex=False).str[0]
    # a case not predicted took no assumption of its own: its notes are the case's
    shown[ASSUMED] = own.where(shown["status"].astype(str).str.startswith("predicted"), "")
    return shown[SHOWN].fillna("").astype(str)


def published_html(
    table: pd.DataFrame, lines: list[str], title: str, series: pd.DataFrame | None = None
) -> str:
    """A self-contained page: the summary's sentences, every case, then the published
    series with their calibrated predictions (where given)."""
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    page = table_html(display_table(table), title)
    page = page.replace("</head>", f"{PAGE_STYLE}</head>", 1)
    page = page.replace("<table>", f"<ul class='summary'>{items}</ul><table>", 1)
    if series is None or series.empty:
        return page
    second = table_html(series_table(series), SERIES_TITLE)
    body = second[second.index("<h2>") : second.index("</body>")]
    return page.replace("</body>", f"{body}</body>", 1)


SERIES_TITLE = (
    "Published series: calibrated on the smallest multi-device scales, the largest predicted"
)


def _pct(value: float) -> str:
    return "" if not isinstance(value, float | int) or math.isnan(value) else f"{value:.1f}%"


def series_table(series: pd.DataFrame) -> pd.DataFrame:
    """The series as text: published beside calibrated [range], link-only and baselines."""
    calibrated = [
        f"{_pct(p)} [{_pct(lo)}, {_pct(hi)}]" if _pct(p) else ""
        for p, lo, hi in zip(
            series["calibrated_pct"],
            series["calibrated_lo_pct"],
            series["calibrated_hi_pct"],
            strict=True,
        )
    ]
    return pd.DataFrame(
        {
            "series": series["series"],
            "calibrated on (devices)": series["calibrated_on"],
            "predicted at": series["predicted_devices"].map(
                lambda n: "" if pd.isna(n) else f"{int(n)}"
            ),
            "published": series["published_pct"].map(_pct),
            "calibrated [range]": calibrated,
            "link-only (upper bound)": series["link_only_pct"].map(_pct),
            "hold": series["hold_pct"].map(_pct),
            "repeat last drop": series["repeat_pct"].map(_pct),
            STATUS: series["status"],
            "source": series["source"],
        }
    )
