"""The drift trace: the reference cell's img/s at each drift probe, over the run's minutes."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.analysis.laws.drift import REPEATABILITY_GOAL, drift_sentence  # noqa: E402
from dpscale.render.canvas import empty_figure  # noqa: E402


def drift_figure(table: pd.DataFrame, path: Path, note: str = "") -> None:
    """Each probe's mean img/s relative to the probes' median (95% interval as error bar),
    the +/-3% repeatability goal shaded; probes that were not ok are marked with their state.
    ``note``, a line under the title (the repeats' CV with and without the drift correction)."""
    if table.empty:
        empty_figure(path, "no drift probes in this study (drift.probes: 0)")
        return
    figure, axis = plt.subplots(figsize=(8, 3.5))
    axis.axhspan(-100 * REPEATABILITY_GOAL, 100 * REPEATABILITY_GOAL, color="0.9", zorder=0)
    axis.axhline(0, color="0.5", linewidth=0.8)
    ok = table[(table["status"] == "ok") & (table["quality"] == "ok")]
    axis.errorbar(
        ok["minutes"], 100 * ok["relative"], yerr=100 * ok["relative_ci95"], fmt="o-", capsize=3
    )
    for _, row in table.drop(ok.index).iterrows():
        label = row["quality"] if row["status"] == "ok" else row["status"]
        y = 100 * row["relative"] if pd.notna(row["relative"]) else 0.0
        axis.plot(row["minutes"], y, "x", color="tab:red")
        axis.annotate(str(label), (row["minutes"], y), textcoords="offset points", xytext=(4, 4))
    axis.set_xlabel("minutes since the study's first cell started")
    axis.set_ylabel("img/s vs the probes' median (%)")
    reference = re.sub(r"-r\d+$", "", str(table["cell_id"].iloc[0]))  # the probes' own id
    title = [reference, drift_sentence(table), *textwrap.wrap(note, 100)]
    axis.set_title("\n".join(title), fontsize=9)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
