"""The link-only prediction's empirical interval from published cases, by the protocols in
docs/decisions/published-conformal-intervals.md and published-intervals-by-scale.md:
residuals (published minus predicted efficiency, points) grouped by source, each case's 80%
interval from every other source of its scale group (within one node, across nodes;
laws.conformal), widened to every other source where its group has too few, the share
inside measured per group and overall; and each group's band that a prediction without a
small run carries."""

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


WITHIN, ACROSS = "within one node", "across nodes"
SCALES = (WITHIN, ACROSS)
POOLED = "pooled"  # the band over every scale group
MIN_SOURCES = 3  # a group's own band needs at least this many sources, else the pooled one


def scale_group(nodes: int) -> str:
    """Where a layout's exchange runs, known before any prediction: the node's own fabric
    (one node) or the inter-node link too (two or more)."""
    return WITHIN if int(nodes) <= 1 else ACROSS


def efficiency_rows(cases: Sequence[Mapping[str, Any]], check: pd.DataFrame) -> pd.DataFrame:
    """One row per case with a published efficiency and a link-only prediction: id, group
    (its source), scale (its scale group), predicted and published efficiency in percent."""
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
                    "scale": scale_group(case.get("nodes", 1)),
                    "predicted": link_only,
                    "published": 100 * published,
                }
            )
    return pd.DataFrame(rows, columns=["id", "group", "scale", "predicted", "published"])


def _loso(rows: pd.DataFrame, alpha: float) -> list[conformal.Held]:
    return conformal.leave_one_group_out(
        list(rows["group"]), list(rows["predicted"]), list(rows["published"]), alpha
    )


def held_out(rows: pd.DataFrame, alpha: float = conformal.ALPHA) -> pd.DataFrame:
    """``rows`` with each case's leave-one-source-out interval from the other sources of its
    scale group, or, where those are too few for the level, from every other source
    (``widened``); and whether it holds the published figure (empty where even the pooled
    sources were too few)."""
    pooled = dict(zip(rows.index, _loso(rows, alpha), strict=True))
    chosen, widened = dict(pooled), dict.fromkeys(rows.index, True)
    for _, mine in rows.groupby("scale"):
        for index, held in zip(mine.index, _loso(mine, alpha), strict=True):
            if held.band.resolved:
                chosen[index], widened[index] = held, False
    order = list(rows.index)
    return rows.assign(
        lo=[chosen[i].lo for i in order],
        hi=[chosen[i].hi for i in order],
        inside=[chosen[i].inside for i in order],
        widened=[widened[i] for i in order],
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


def scale_summaries(table: pd.DataFrame, alpha: float = conformal.ALPHA) -> pd.DataFrame:
    """Per scale group (held_out's columns): coverage_summary of its cases, the cases whose
    interval was widened, and the band a prediction of that group carries: its own where it
    holds MIN_SOURCES sources and enough residuals, else the pooled one (``pooled``)."""
    everything = coverage_summary(table, alpha)
    rows = []
    for scale in SCALES:
        mine = table[table["scale"] == scale]
        if mine.empty:
            continue
        found = coverage_summary(mine, alpha)
        pooled = found["sources"] < MIN_SOURCES or not math.isfinite(found["band_lo_points"])
        if pooled:
            found["band_lo_points"] = everything["band_lo_points"]
            found["band_hi_points"] = everything["band_hi_points"]
        widened = int(mine["widened"].sum()) if "widened" in mine else 0
        rows.append({"scale": scale, **found, "widened": widened, "pooled": pooled})
    return pd.DataFrame(rows)


def band_words(found: Mapping[str, Any]) -> str:
    """What a scale group's band stands on, for a predicted row: its cases, sources, offsets
    and leave-one-source-out coverage; "pooled" where the group had too few sources."""
    pooled = "pooled over every group: this one holds too few sources; " * bool(found["pooled"])
    return (
        f"{found['level_pct']}% band for layouts {found['scale']} ({pooled}{found['cases']} "
        f"published cases of {found['sources']} sources; link-only minus "
        f"{-found['band_hi_points']:.1f} to {-found['band_lo_points']:.1f} points); "
        f"leave-one-source-out coverage {found['inside']} of {found['judged']}"
    )


def interval_line(table: pd.DataFrame) -> str:
    """The page's sentence on the intervals of ``table``'s cases (held_out's columns), per
    scale group and overall."""
    if table.empty:
        return "No case here has a published efficiency to set an interval beside."
    found = coverage_summary(table)
    groups = "; ".join(
        f"{row.scale}: {row.inside} of {row.judged} inside, median width "
        f"{row.median_width_points:.1f}"
        + (f", {row.widened} widened to every source" if row.widened else "")
        + f", its band link-only minus {-row.band_hi_points:.1f} to {-row.band_lo_points:.1f}"
        + (" (pooled: too few sources)" if row.pooled else "")
        for row in scale_summaries(table).itertuples()
    )
    return (
        f"Each efficiency row carries an empirical {found['level_pct']}% interval: how far "
        "the published results of every other source of its scale group (within one node, "
        "across nodes) fell from the same link-only prediction (split conformal, "
        f"leave-one-source-out). {found['inside']} of {found['judged']} published figures "
        f"here lie inside their interval; the median width is "
        f"{found['median_width_points']:.1f} efficiency points. By scale group: {groups}."
    )
