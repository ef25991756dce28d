"""The machine's drift through a run: the same reference cell (drift probes) measured at
intervals, each probe's mean img/s against the probes' median. Apart from the repeats' own
variation (tables.repeatability_table): a study whose repeats vary by 8% on a machine that
drifts by 8% learns that the machine, not the protocol, sets its repeatability."""

from __future__ import annotations

import pandas as pd

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


def drift_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per drift probe (cells.csv rows of mode ``drift``), in run order: minutes
    since the study's first cell started, and mean img/s relative to the median of the ok
    probes (``relative`` 0.05 = 5% faster than the median)."""
    if cells.empty or "drift" not in set(cells["mode"]):
        return pd.DataFrame(columns=DRIFT_COLUMNS)
    started = pd.to_datetime(cells["started_at"], utc=True, format="ISO8601")
    probes = cells[cells["mode"] == "drift"].assign(started=started)
    probes = probes.sort_values("started").reset_index(drop=True)
    ok = probes[probes["status"] == "ok"]
    median = ok["img_s_mean"].median() if not ok.empty else float("nan")
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
