"""The machine's drift through a run: the same reference cell (drift probes) measured at
intervals, each probe's mean img/s against the probes' median. Apart from the repeats' own
variation (scaling.repeatability_table): a study whose repeats vary by 8% on a machine that
drifts by 8% learns that the machine, not the protocol, sets its repeatability.

Where the probes trace the drift, each cell's img/s is also given relative to the trace at
the time it ran (interleaved reference normalisation), and the repeats' CV with and without
that correction is set against the repeatability goal (docs/decisions/drift-correction.md:
when the correction is valid; the measured values stay the primary numbers)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpscale.analysis.laws.scaling import repeatability_table
from dpscale.analysis.results.rows import with_comm
from dpscale.plan.columns import POINT

# README, "Measurement quality": repeats within 3% of each other on a quiet machine
REPEATABILITY_GOAL = 0.03

DRIFT_COLUMNS = [
    "probe",
    "cell_id",
    "started_at",
    "minutes",
    "status",
    "quality",
    "img_s_mean",
    "img_s_ci95",
    "relative",
    "relative_ci95",
]


def _started(cells: pd.DataFrame) -> pd.Series:
    return pd.to_datetime(cells["started_at"], utc=True, format="ISO8601")


def _probe_median(cells: pd.DataFrame) -> float:
    """The median img/s of the ok probes: what ``relative`` 0 means."""
    ok = cells[(cells["mode"] == "drift") & (cells["status"] == "ok")]
    return float(ok["img_s_mean"].median()) if not ok.empty else float("nan")


def drift_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per drift probe (cells.csv rows of mode ``drift``), in run order: minutes
    since the study's first cell started, and mean img/s relative to the median of the ok
    probes (``relative`` 0.05 = 5% faster than the median)."""
    if cells.empty or "drift" not in set(cells["mode"]):
        return pd.DataFrame(columns=DRIFT_COLUMNS)
    started = _started(cells)
    probes = cells[cells["mode"] == "drift"].assign(started=started)
    probes = probes.sort_values("started").reset_index(drop=True)
    median = _probe_median(cells)
    table = pd.DataFrame(
        {
            "probe": probes["repeat"],
            "cell_id": probes["cell_id"],
            "started_at": probes["started_at"],
            "minutes": (probes["started"] - started.min()).dt.total_seconds() / 60,
            "status": probes["status"],
            "quality": probes["quality"],
            "img_s_mean": probes["img_s_mean"],
            "img_s_ci95": probes["img_s_ci95"],
            "relative": probes["img_s_mean"] / median - 1,
            "relative_ci95": probes["img_s_ci95"] / median,
        }
    )
    return table.reindex(columns=DRIFT_COLUMNS)


def drift_summary(table: pd.DataFrame) -> dict[str, float | int]:
    """Over the ok probes: how many, the minutes they span, their range (max - min) and
    coefficient of variation, both relative to their median."""
    ok = table[table["status"] == "ok"]
    rates = ok["img_s_mean"].astype(float)
    if len(rates) < 2:
        return {"probes_ok": len(rates), "minutes": 0.0, "range": float("nan"), "cv": float("nan")}
    return {
        "probes_ok": len(rates),
        "minutes": float(ok["minutes"].max() - ok["minutes"].min()),
        "range": float((rates.max() - rates.min()) / rates.median()),
        "cv": float(rates.std(ddof=1) / rates.mean()),
    }


def drift_sentence(table: pd.DataFrame) -> str:
    """The trace in one line, e.g. for the figure's title."""
    summary = drift_summary(table)
    if summary["probes_ok"] < 2:
        return f"{summary['probes_ok']} drift probe(s) ok: no trace"
    return (
        f"{summary['probes_ok']} probes of the reference cell over {summary['minutes']:.0f} min: "
        f"range {summary['range']:.1%} of their median, CV {summary['cv']:.1%}"
    )


def _moments(cells: pd.DataFrame) -> pd.Series:
    """When each cell ran, in seconds since the epoch: its start plus half the launcher's
    wall time (``launcher_wall_s``) where known, else its start: probes and cells are timed
    alike, each near the middle of its timed windows."""
    started = _started(cells)
    seconds = (started - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    if "launcher_wall_s" in cells:
        seconds = seconds + pd.to_numeric(cells["launcher_wall_s"], errors="coerce").fillna(0) / 2
    return seconds


def drift_factors(cells: pd.DataFrame) -> pd.Series:
    """Each cell's drift factor (index of ``cells``): 1 + the trace's relative speed at the
    time the cell ran, linear in time between the trusted probes (status and quality ``ok``,
    as the figure draws them), the nearest probe's value outside their span. NaN for every cell
    where fewer than two probes are trusted: no trace, no correction."""
    nan = pd.Series(math.nan, index=cells.index, dtype=float)
    if cells.empty or "drift" not in set(cells["mode"]):
        return nan
    moments = _moments(cells)
    quality = cells["quality"] if "quality" in cells else pd.Series("ok", index=cells.index)
    trusted = (
        (cells["mode"] == "drift")
        & (cells["status"] == "ok")
        & (quality == "ok")
        & cells["img_s_mean"].notna()
        & moments.notna()
    )
    if trusted.sum() < 2:
        return nan
    order = moments[trusted].sort_values()
    factors = cells.loc[order.index, "img_s_mean"].astype(float) / _probe_median(cells)
    at = np.interp(moments.fillna(0).to_numpy(), order.to_numpy(), factors.to_numpy())
    return pd.Series(at, index=cells.index).where(moments.notna())


def with_drift_columns(cells: pd.DataFrame) -> pd.DataFrame:
    """cells.csv with each cell's ``drift_factor`` and ``img_s_drift_corrected`` (its mean
    img/s over the factor); NaN where there is no trace. The measured columns stay as they
    are: the corrected value is a diagnosis beside them (docs/decisions/drift-correction.md)."""
    if cells.empty:
        return cells
    factors = drift_factors(cells)
    return cells.assign(
        drift_factor=factors, img_s_drift_corrected=cells["img_s_mean"].astype(float) / factors
    )


def repeatability_with_drift(cells: pd.DataFrame) -> pd.DataFrame:
    """scaling.repeatability_table, and ``img_s_cv_drift_corrected``: the CV of the repeats'
    mean img/s each divided by its drift factor; NaN where a repeat has none (no trace)."""
    table = repeatability_table(cells)
    if table.empty:
        return table.reindex(columns=[*table.columns, "img_s_cv_drift_corrected"])
    cells = with_comm(cells)
    # the repeats as repeatability_table takes them: ok throughput cells, never a probe
    ok = cells[(cells["status"] == "ok") & (cells["mode"] == "synthetic")]
    corrected = ok["img_s_mean"].astype(float) / drift_factors(cells).loc[ok.index]
    cvs = {key: _cv(rates) for key, rates in corrected.groupby([ok[c] for c in POINT], sort=True)}
    keys = table[POINT].itertuples(index=False, name=None)
    return table.assign(img_s_cv_drift_corrected=[cvs.get(key, math.nan) for key in keys])


def _cv(rates: pd.Series) -> float:
    """Coefficient of variation; NaN unless every rate is known."""
    if len(rates) < 2 or rates.isna().any():
        return math.nan
    return float(rates.std(ddof=1) / rates.mean())


def repeatability_sentence(table: pd.DataFrame) -> str:
    """The repeats' CV as measured and relative to the drift trace, each as a range over the
    configurations and how many meet the goal (REPEATABILITY_GOAL), in one line."""
    if table.empty:
        return "CV across repeats: not measured (every configuration ran once)"
    goal = f"goal {REPEATABILITY_GOAL:.0%}"
    raw = table["img_s_cv"].astype(float).dropna()
    column = "img_s_cv_drift_corrected"
    corrected = table[column].astype(float).dropna() if column in table else pd.Series(dtype=float)
    measured = f"CV across repeats: {_span(raw)} as measured"
    if corrected.empty:
        return (
            f"{measured} ({goal}: {_meet(raw)} configurations meet it); "
            "no drift correction (fewer than 2 ok drift probes)"
        )
    return (
        f"{measured}, {_span(corrected)} relative to the drift trace ({goal}: {_meet(raw)} "
        f"configurations meet it as measured, {_meet(corrected)} after the correction); "
        + _verdict(table.dropna(subset=[column]))
    )


def _verdict(table: pd.DataFrame) -> str:
    """Whether the trace explains the repeats' spread: a machine-wide, multiplicative drift
    narrows most configurations' CV once taken out; one that widens most is no such drift
    (faster than the probes' spacing, or not shared by every configuration)."""
    narrower = int((table["img_s_cv_drift_corrected"] < table["img_s_cv"]).sum())
    if 2 * narrower > len(table):
        return (
            f"the correction narrows {narrower} of {len(table)}: the machine's drift explains "
            "part of the spread"
        )
    return (
        f"the correction narrows only {narrower} of {len(table)}: this machine's drift is not "
        "machine-wide and multiplicative at the probes' spacing, so the measured CV stands "
        "(docs/decisions/drift-correction.md)"
    )


def _span(cvs: pd.Series) -> str:
    low, high = f"{100 * cvs.min():.1f}", f"{100 * cvs.max():.1f}"
    return f"{low}%" if low == high else f"{low}-{high}%"


def _meet(cvs: pd.Series) -> str:
    return f"{int((cvs <= REPEATABILITY_GOAL).sum())} of {len(cvs)}"
