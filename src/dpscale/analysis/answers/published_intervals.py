"""The link-only prediction's empirical interval from published cases, by the protocol in
docs/decisions/published-conformal-intervals.md: residuals (published minus predicted
efficiency, points) grouped by source, each case's 80% interval from every other source
(laws.conformal), the share inside it measured; and the band over all sources that a
prediction without a small run carries."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.answers.published_check import published_efficiency, source_words
from dpscale.analysis.laws import conformal


def source_key(origin: Mapping[str, Any]) -> str:
    """One source however a case cites it: the repository document (without its commit or
    its format's suffix: a page moved from .md to .rst is one page) where one is named; else
    the thread, page or paper (its URL, DOI or title), or the repository itself; so one
    page cited two ways is one group and cannot calibrate its own interval. Never fails: a
    source form it does not know is keyed by its words."""
    repository = str(origin.get("repository") or "").strip()
    path = PurePosixPath(str(origin.get("path") or "").split(" ")[0].strip())
    if repository and path.name:
        return f"{repository}:{path.with_suffix('')}"
    for field in ("url", "doi", "title"):
        if str(origin.get(field) or "").strip():
            return str(origin[field]).strip()
    return repository or source_words(origin) or "an unnamed source"


def efficiency_rows(cases: Sequence[Mapping[str, Any]], check: pd.DataFrame) -> pd.DataFrame:
    """One row per case with a published efficiency and a link-only prediction: id, group
    (its source), predicted and published efficiency in percent."""
    predicted = dict(zip(check["id"], check["predicted"], strict=True))
    rows = []
    for case in cases:
        img_s = (case.get("single_device") or {}).get("img_s")
        published, _ = published_efficiency(case, img_s)
        link_only = predicted.get(case["id"], math.nan)
        if math.isfinite(published) and math.isfinite(link_only):
            rows.append(
                {
                    "id": case["id"],
                    "group": source_key(case["source"]),
                    "predicted": link_only,
                    "published": 100 * published,
                }
            )
    return pd.DataFrame(rows, columns=["id", "group", "predicted", "published"])


def held_out(rows: pd.DataFrame, alpha: float = conformal.ALPHA) -> pd.DataFrame:
    """``rows`` with each case's leave-one-source-out interval and whether it holds the
    published figure (empty where the other sources were too few)."""
    held = conformal.leave_one_group_out(
        list(rows["group"]), list(rows["predicted"]), list(rows["published"]), alpha
    )
    return rows.assign(
        lo=[h.lo for h in held],
        hi=[h.hi for h in held],
        inside=[h.inside for h in held],
    )


def coverage_summary(table: pd.DataFrame, alpha: float = conformal.ALPHA) -> dict[str, Any]:
    """Cases, sources, judged, inside, coverage, the median width and the band over every
    source (what a prediction without a small run carries)."""
    judged = table[table["inside"].notna()]
    inside = int(judged["inside"].astype(bool).sum())
    widths = (judged["hi"] - judged["lo"]).to_numpy(dtype=float)
    everything = conformal.band(list(table["published"] - table["predicted"]), alpha)
    return {
        "level_pct": round(100 * (1 - alpha)),
        "cases": len(table),
        "sources": int(table["group"].nunique()),
        "judged": len(judged),
        "inside": inside,
        "coverage_pct": 100 * inside / len(judged) if len(judged) else math.nan,
        "median_width_points": float(np.median(widths)) if len(widths) else math.nan,
        "band_lo_points": everything.lo,
        "band_hi_points": everything.hi,
    }


def interval_line(table: pd.DataFrame) -> str:
    """The page's sentence on the intervals of ``table``'s cases (held_out's columns)."""
    if table.empty:
        return "No case here has a published efficiency to set an interval beside."
    found = coverage_summary(table)
    return (
        f"Each efficiency row carries an empirical {found['level_pct']}% interval: how far "
        "the published results of every other source fell from the same link-only "
        f"prediction (split conformal, leave-one-source-out). {found['inside']} of "
        f"{found['judged']} published figures here lie inside their interval; the median "
        f"width is {found['median_width_points']:.1f} efficiency points."
    )
