"""The published check's table in sentences (analysis.answers.published_check): how far the
predicted efficiencies fell from the published ones and in which direction, the largest
miss, each time ratio's, and the link rates the published figures imply per kind of link,
every number beside its source and said to be extrapolated; and one sentence of it for the
landing page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from dpscale.analysis.answers.cluster_prediction import KIND
from dpscale.analysis.answers.published_model import LINK_KIND_WORDS


def summary(table: pd.DataFrame) -> dict[str, Any]:
    """Median and max absolute error in efficiency points over the predicted efficiency
    cases; the ratio errors; counts of cases and of links."""
    points = table.dropna(subset=["error_points"])
    ratios = table.dropna(subset=["error_pct"])
    predicted = table[table["status"].str.startswith("predicted")]
    worst = points.loc[points["error_points"].abs().idxmax()] if len(points) else None
    return {
        "efficiency_cases": len(points),
        "median_abs_error_points": float(points["error_points"].abs().median()),
        "max_abs_error_points": float(points["error_points"].abs().max()),
        "max_case": None if worst is None else worst["id"],
        "median_abs_error_points_primary": float(
            points.loc[points["status"] == "predicted", "error_points"].abs().median()
        ),
        "ratio_errors_pct": dict(zip(ratios["id"], ratios["error_pct"].round(1), strict=True)),
        "predicted_cases": len(predicted),
        "not_predicted": len(table) - len(predicted),
        "links_count": int(predicted["link"].nunique()),
        "links": sorted(predicted["link"].unique()),
        "implied_pct_of_nominal": implied_ranges(table),
    }


def implied_ranges(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per kind of link: how many cases imply a rate, and the lowest, highest and median
    implied rate as a percent of nominal."""
    implied = table.dropna(subset=["implied_pct_of_nominal"])
    return {
        kind: {
            "cases": len(group),
            "low": float(group["implied_pct_of_nominal"].min()),
            "high": float(group["implied_pct_of_nominal"].max()),
            "median": float(group["implied_pct_of_nominal"].median()),
        }
        for kind, group in implied.groupby("link_kind")
    }


def implied_line(ranges: Mapping[str, Mapping[str, float]]) -> str:
    """One sentence: the link rate the published figures imply, per kind of link."""
    parts = [
        f"{LINK_KIND_WORDS.get(kind, kind)} {found['low']:.0f}-{found['high']:.0f}% of "
        f"nominal ({found['cases']:d} cases, median {found['median']:.0f}%)"
        for kind, found in ranges.items()
    ]
    return (
        "The link rate each published figure implies (the rate at which its prediction meets "
        "it, every other input held; a diagnostic, not a prediction): "
        + "; ".join(parts)
        + ". A case far below its nominal rate lost more than the modelled link explains "
        "(a transport below line rate, or a loss that is not the link's: one node's NVLink "
        "cases imply a few % of nominal); a cluster's own nccl-tests log replaces the nominal "
        "rate where it exists."
    )


# why the published check's numbers carry no interval (what would give them one)
NO_INTERVAL = (
    "the published figures, the borrowed one-device throughputs and the nominal link rates "
    "come without a spread, and the borrowed shape's own interval is under 1% (a published "
    "spread, or the case's own link log and one-device runs, would give one)"
)


def _row_source(table: pd.DataFrame, case_id: str) -> str:
    return str(table.loc[table["id"] == case_id, "source"].iloc[0])


def _cases(count: int) -> str:
    return f"{count} case" if count == 1 else f"{count} cases"


def direction_words(errors: pd.Series) -> str:
    """How far the predicted efficiencies fell from the published ones, and which way:
    "over-predicted 12 of 14 cases by a median of 8.1 efficiency points, and under-predicted
    2 by a median of 2.1"; a prediction within 0.05 points counts as on the mark."""
    over, under = errors[errors >= 0.05], errors[errors <= -0.05]
    on_mark = len(errors) - len(over) - len(under)
    parts = []
    for words, side in (("over-predicted", over), ("under-predicted", under)):
        if len(side):
            first = not parts
            parts.append(
                f"{words} {len(side)}{f' of {_cases(len(errors))}' if first else ''} by a "
                f"median of {side.abs().median():.1f}{' efficiency points' if first else ''}"
            )
    if on_mark:
        parts.append(f"matched {on_mark} to within 0.05 points")
    return ", and ".join(parts) if len(parts) < 3 else ", ".join(parts[:-1]) + ", and " + parts[-1]


def _efficiency_line(table: pd.DataFrame, found: Mapping[str, Any]) -> str:
    """The efficiency cases: which way and how far, the largest miss beside its source."""
    errors = table["error_points"].dropna()
    worst, case = found["max_abs_error_points"], found["max_case"]
    return (
        f"Scaling efficiency, predicted against published: the model "
        f"{direction_words(errors)} (each case with its source below). Half the cases "
        f"missed by at most {found['median_abs_error_points']:.1f} points "
        f"({found['median_abs_error_points_primary']:.1f} over the primary sources alone); "
        f"the largest miss is {worst:.1f} points, {case} ({_row_source(table, case)})."
    )


def _ratio_line(row: Any) -> str:
    """One time ratio: predicted beside published, and how far and which way it fell."""
    way = "high" if row.error_pct >= 0 else "low"
    return (
        f"{row.id}, {row.metric}: predicted {row.predicted:.2f} ({KIND}) against published "
        f"{row.published:.4g} ({row.source}), {abs(row.error_pct):.0f}% too {way}."
    )


def summary_lines(table: pd.DataFrame, profile: str = "") -> list[str]:
    """The check in sentences for its own page: how far the predictions fell from the
    published results and in which direction, each number beside its source, every one
    said to be extrapolated; ``profile`` names the borrowed timeline's file."""
    found = summary(table) if len(table) else None
    if found is None:
        return ["No published case to predict."]
    lines = [
        f"Published multi-GPU results: every predicted number is {KIND}, never measured "
        f"on this machine: {found['predicted_cases']} of {len(table)} cases predicted over "
        f"{found['links_count']} links from a borrowed one-device compute profile"
        f"{f' ({profile})' if profile else ''} and nominal link rates; "
        f"{found['not_predicted']} not predicted, each with its reason. No link-only "
        f"figure has a measured spread: {NO_INTERVAL}; the interval beside each efficiency "
        "is empirical, from the other sources (below)."
    ]
    if found["efficiency_cases"]:
        lines.append(_efficiency_line(table, found))
    if found["implied_pct_of_nominal"]:
        lines.append(implied_line(found["implied_pct_of_nominal"]))
    lines += [_ratio_line(row) for row in table.dropna(subset=["error_pct"]).itertuples()]
    return lines


def landing_line(table: pd.DataFrame) -> str:
    """The landing page's one sentence on the published check: which way and how far the
    predicted scaling efficiencies fell from the published ones."""
    errors = table["error_points"].dropna() if len(table) else pd.Series(dtype=float)
    if errors.empty:
        return "Published multi-GPU results: no case compared with a published efficiency."
    return (
        f"Against published multi-GPU results (predicted from a borrowed one-device profile, "
        f"so {KIND}), the model {direction_words(errors)} (each case "
        "with its source under 5. Network model)."
    )
