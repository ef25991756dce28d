"""The published check's table in sentences (analysis.answers.published_check): the median
and largest error in efficiency points, each time ratio's error, the link rates the
published figures imply per kind of link, and which of issue 50's targets are met, every
number beside its source and said to be extrapolated."""

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


# Issue 50's targets for the published check: the median and the largest absolute error in
# efficiency points, each time ratio's error in %, and how many cases over how many links.
TARGET_MEDIAN_POINTS, TARGET_MAX_POINTS, TARGET_RATIO_PCT = 10.0, 20.0, 15.0
TARGET_CASES, TARGET_LINKS = 8, 3


# why the published check's numbers carry no interval (what would give them one)
NO_INTERVAL = (
    "the published figures, the borrowed one-device throughputs and the nominal link rates "
    "come without a spread, and the borrowed shape's own interval is under 1% (a published "
    "spread, or the case's own link log and one-device runs, would give one)"
)


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def _row_source(table: pd.DataFrame, case_id: str) -> str:
    return str(table.loc[table["id"] == case_id, "source"].iloc[0])


def summary_lines(table: pd.DataFrame, profile: str = "") -> list[str]:
    """The check in sentences, each number beside its source and the target it answers,
    every one said to be extrapolated; ``profile`` names the borrowed timeline's file."""
    found = summary(table) if len(table) else None
    if found is None:
        return ["No published case to predict."]
    compared = found["efficiency_cases"] + len(found["ratio_errors_pct"])
    lines = [
        f"Published multi-GPU results: every predicted number is {KIND}, never measured "
        f"on this machine: {found['predicted_cases']} of {len(table)} cases predicted over "
        f"{found['links_count']} links from a borrowed one-device compute profile"
        f"{f' ({profile})' if profile else ''} and nominal link rates; "
        f"{found['not_predicted']} not predicted, each with its reason. No number here "
        f"has an interval: {NO_INTERVAL}. "
        f"{compared} cases are compared with a published figure (target at least "
        f"{TARGET_CASES}: {_met(compared >= TARGET_CASES)}), over {found['links_count']} "
        f"links (target at least {TARGET_LINKS}: {_met(found['links_count'] >= TARGET_LINKS)})."
    ]
    if found["efficiency_cases"]:
        median, worst = found["median_abs_error_points"], found["max_abs_error_points"]
        lines += [
            f"Median absolute error in scaling efficiency: {median:.1f} points over "
            f"{found['efficiency_cases']} cases (each listed with its source in "
            f"tables/published_cases.csv; "
            f"{found['median_abs_error_points_primary']:.1f} over the primary sources alone); "
            f"target at most {TARGET_MEDIAN_POINTS:g}: {_met(median <= TARGET_MEDIAN_POINTS)}.",
            f"Largest: {worst:.1f} points, {found['max_case']} "
            f"({_row_source(table, found['max_case'])}); target none above "
            f"{TARGET_MAX_POINTS:g}: {_met(worst <= TARGET_MAX_POINTS)}.",
        ]
    if found["implied_pct_of_nominal"]:
        lines.append(implied_line(found["implied_pct_of_nominal"]))
    for row in table.dropna(subset=["error_pct"]).itertuples(index=False):
        lines.append(
            f"{row.id}, {row.metric}: predicted {row.predicted:.2f} ({KIND}) against "
            f"published {row.published:.4g} ({row.source}), {row.error_pct:+.1f}%; target "
            f"within {TARGET_RATIO_PCT:g}%: {_met(abs(row.error_pct) <= TARGET_RATIO_PCT)}."
        )
    return lines
