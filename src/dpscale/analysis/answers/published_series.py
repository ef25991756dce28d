"""The calibrated law checked on published series, by the protocol fixed before it ran
(docs/decisions/calibrated-published-series.md): per series, calibrate on the smallest two
multi-device scales (the smallest one where there are two), predict the largest, and set the
error beside two baselines that need no model (laws.calibrated's hold and repeat).

Inputs per point, as the protocol lists them: the link-only efficiency the published check
computes from the case's typed fields (published_check.check's ``predicted``), the published
throughput and the same table's one-device throughput. Points between the calibration
points and the largest are neither read nor scored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.answers.published_check import source_words
from dpscale.analysis.laws import calibrated as cal

METHODS = ("calibrated", "link_only", "hold", "repeat")


def efficiency_pct(case: Mapping[str, Any]) -> float:
    """E(N) = 100 T(N) / (N T(1)) from the published throughput and one-device img/s."""
    img_s = (case.get("single_device") or {}).get("img_s")
    if case["published"]["kind"] != "throughput" or not img_s:
        return math.nan
    return 100 * case["published"]["value"] / (case["devices_total"] * img_s)


def roles(devices: Sequence[int]) -> tuple[list[int], int] | None:
    """(calibration scales, predicted scale) of a series' multi-device scales, or None where
    it has fewer than two."""
    scales = sorted({n for n in devices if n >= 2})
    if len(scales) < 2:
        return None
    return scales[: 2 if len(scales) >= 3 else 1], scales[-1]


def series_table(cases: Sequence[Mapping[str, Any]], check: pd.DataFrame) -> pd.DataFrame:
    """One row per series: the published efficiency at its largest scale beside the
    calibrated prediction (with its range), the link-only one and the two baselines."""
    link_only = dict(zip(check["id"], check["predicted"], strict=True))
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for case in cases:
        if case.get("series"):
            groups.setdefault(case["series"], []).append(case)
    rows = [_series_row(name, points, link_only) for name, points in groups.items()]
    return pd.DataFrame(rows)


def _series_row(
    name: str, points: Sequence[Mapping[str, Any]], link_only: Mapping[str, float]
) -> dict[str, Any]:
    by_devices = {case["devices_total"]: case for case in points}
    chosen = roles(list(by_devices))
    target = by_devices[chosen[1]] if chosen else points[-1]
    row: dict[str, Any] = {
        "series": name,
        "model": target["model"],
        "source": source_words(target["source"]),
        "calibrated_on": "",
        "predicted_devices": chosen[1] if chosen else math.nan,
        "published_pct": efficiency_pct(target),
        **{f"{m}_pct": math.nan for m in METHODS},
        "calibrated_lo_pct": math.nan,
        "calibrated_hi_pct": math.nan,
        "g": math.nan,
        "s_per_doubling": math.nan,
        "not_resolved": "",
        "status": "not predicted",
    }
    if chosen is None:
        return {**row, "status": "not predicted: fewer than two multi-device scales"}
    calibration = [by_devices[n] for n in chosen[0]]
    row["calibrated_on"] = ", ".join(str(n) for n in chosen[0])
    row["link_only_pct"] = link_only.get(target["id"], math.nan)
    row.update(_baselines(calibration, chosen[1]))
    try:
        points = [
            cal.Point.from_efficiency(
                c["devices_total"], link_only[c["id"]] / 100, efficiency_pct(c) / 100
            )
            for c in calibration
        ]
    except (KeyError, ValueError) as error:
        return {**row, "status": f"not predicted: a calibration point has no figure ({error})"}
    if not math.isfinite(row["link_only_pct"]) or row["link_only_pct"] <= 0:
        return {**row, "status": "not predicted: no link-only prediction at the largest scale"}
    fit = cal.calibrate(points)
    got = cal.predict(fit, chosen[1], 100 / row["link_only_pct"])
    eff, lo, hi = got.efficiency
    return {
        **row,
        "calibrated_pct": 100 * eff,
        "calibrated_lo_pct": 100 * lo,
        "calibrated_hi_pct": 100 * hi,
        "g": fit.point.g,
        "s_per_doubling": fit.point.s,
        "not_resolved": "; ".join(fit.unresolved),
        "status": f"predicted ({fit.words})",
    }


def _baselines(calibration: Sequence[Mapping[str, Any]], devices: int) -> dict[str, float]:
    """The two baselines from the calibration points' published efficiencies alone (no
    model, so no link-only figure needed)."""
    effs = [efficiency_pct(c) / 100 for c in calibration]
    if not all(math.isfinite(e) and e > 0 for e in effs):
        return {}
    points = [
        cal.Point.from_efficiency(c["devices_total"], 1.0, e)
        for c, e in zip(calibration, effs, strict=True)
    ]
    return {
        "hold_pct": 100 / cal.hold_baseline(points),
        "repeat_pct": 100 / cal.repeat_baseline(points, devices),
    }


def errors(table: pd.DataFrame) -> pd.DataFrame:
    """|predicted - published| in efficiency points per series and method; a method without
    a number is an infinite error (abstaining cannot win)."""
    out = pd.DataFrame({"series": table["series"], "source": table["source"]})
    for method in METHODS:
        err = (table[f"{method}_pct"] - table["published_pct"]).abs()
        out[method] = err.fillna(np.inf).round(1)
    return out


def verdict(table: pd.DataFrame, margin: float = 0.05) -> dict[str, Any]:
    """Medians, worst cases and per-source medians of each method, and whether the
    calibrated law beats both baselines by more than ``margin`` points (a tie goes to the
    baseline)."""
    err = errors(table)
    medians = {m: float(err[m].median()) for m in METHODS}
    worst = {m: (float(err[m].max()), str(err.loc[err[m].idxmax(), "series"])) for m in METHODS}
    per_source = err.groupby("source")[list(METHODS)].median().to_dict(orient="index")
    beats = {b: medians["calibrated"] < medians[b] - margin for b in ("hold", "repeat")}
    return {
        "series": len(err),
        "median_points": medians,
        "worst_points": worst,
        "median_by_source": per_source,
        "beats": beats,
        "worst_larger_than_both_baselines": worst["calibrated"][0]
        > max(worst["hold"][0], worst["repeat"][0]),
    }


def _outcome(found: Mapping[str, Any]) -> str:
    """Whether the law beat the two baselines, in words."""
    beaten = [name for name, won in found["beats"].items() if won]
    if len(beaten) == 2:
        return "beats both baselines"
    return f"does not beat {'either baseline' if not beaten else 'both baselines'}"


def record_words(table: pd.DataFrame) -> str:
    """The law's record on the published series, for a prediction that carries it: how an
    extrapolation from a small run's scales was checked, and how it fared."""
    if table.empty:
        return "not checked on published series (none given)"
    found = verdict(table)
    medians = found["median_points"]
    return (
        f"checked on {found['series']} published series (calibrated on each one's smallest "
        f"scales, its largest predicted), the law {_outcome(found)}: median error "
        f"{medians['calibrated']:.1f} efficiency points against {medians['hold']:.1f} "
        f"(held) and {medians['repeat']:.1f} (repeated); by source, {by_source_words(table)}"
    )


def short_source(words: str) -> str:
    """A series' source as a reader names it: the repository of its ``owner/name:path``
    token, else its URL (``Oneflow-Inc/DLPerf``, ``https://...``)."""
    tokens = str(words).split()
    for token in tokens:
        if ":" in token and "://" not in token and "/" in token.split(":", 1)[0]:
            return token.split(":", 1)[0]
    return tokens[0] if tokens else "an unnamed source"


def _median_words(errors_of: pd.Series) -> str:
    """A median error in points, or, where most series have no number (an infinite error),
    how many have none."""
    median = float(errors_of.median())
    missing = int(np.isinf(errors_of).sum())
    if math.isinf(median):
        return f"no number for {missing} of {len(errors_of)}"
    return f"{median:.1f}" + (f" ({missing} without a number)" if missing else "")


def by_source_words(table: pd.DataFrame) -> str:
    """Each source's series count and median errors (law, held, repeated), most series
    first: where the record comes from, so one source's many series are seen as one's."""
    err = errors(table).assign(source=lambda frame: frame["source"].map(short_source))
    parts = []
    grouped = err.groupby("source")
    for source, mine in sorted(grouped, key=lambda item: (-len(item[1]), item[0])):
        medians = mine[list(METHODS)].median()
        parts.append(
            f"{source} {len(mine)} series: law {_median_words(mine['calibrated'])}, held "
            f"{medians['hold']:.1f}, repeated {medians['repeat']:.1f}"
        )
    return "; ".join(parts)


def verdict_line(table: pd.DataFrame) -> str:
    """The page's sentence on the calibrated law's check over the published series."""
    if table.empty:
        return "No published series to calibrate on."
    found = verdict(table)
    medians = found["median_points"]
    predicted = int(table["calibrated_pct"].notna().sum())
    return (
        f"Calibrated on each of {found['series']} published series' smallest multi-device "
        f"scales and predicting its largest, the calibrated law {_outcome(found)}: median error "
        f"{medians['calibrated']:.1f} efficiency points ({predicted} of {found['series']} "
        f"series predicted; a series without a number counts as a miss), against "
        f"{medians['hold']:.1f} when the largest calibrated efficiency is held and "
        f"{medians['repeat']:.1f} when the last drop is repeated; link-only "
        f"{medians['link_only']:.1f}. By source: {by_source_words(table)}. The table below "
        "gives every series."
    )
