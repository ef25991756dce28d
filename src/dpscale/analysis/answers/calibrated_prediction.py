"""A cluster prediction (cluster_prediction's table, link-only) carried further by what was
measured: calibrated on a small run on the same cluster (laws.calibrated), or, without one,
given the empirical band of how far published results fell from link-only predictions
(published_intervals, laws.conformal). The link-only columns stay, as the upper bound they
are; the new columns say what they stand on."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from dpscale.analysis.laws import calibrated as cal
from dpscale.analysis.laws.conformal import Band

CALIBRATED_COLUMNS = (
    "calibrated_efficiency",
    "calibrated_efficiency_lo",
    "calibrated_efficiency_hi",
    "calibrated_speedup",
    "calibrated_speedup_lo",
    "calibrated_speedup_hi",
    "calibrated_kind",
    "calibration",
)
BAND_COLUMNS = ("efficiency_band_lo", "efficiency_band_hi", "band_basis")
# what a small run's scaling table gives per measured layout
MEASURED_COLUMNS = ("world_size", "efficiency", "efficiency_ci95")


def points(measured: pd.DataFrame, link_only: pd.DataFrame) -> list[cal.Point]:
    """One calibration point per measured multi-device layout: its efficiency and 95% range
    beside the link-only efficiency at the same world size (rows without one are left out:
    a point the link-only prediction cannot price cannot calibrate it)."""
    by_world = dict(zip(link_only["world_size"], link_only["efficiency"], strict=True))
    found = []
    for row in measured.itertuples():
        world, eff, half = int(row.world_size), float(row.efficiency), row.efficiency_ci95
        link = by_world.get(world, math.nan)
        if world < 2 or not (math.isfinite(eff) and eff > 0 and math.isfinite(link) and link > 0):
            continue
        half = float(half) if math.isfinite(float(half)) else 0.0
        lo, hi = max(eff - half, eff / 100), eff + half
        found.append(cal.Point.from_efficiency(world, link, eff, lo, hi))
    return found


def _kind(world: int, largest: int) -> str:
    if world <= largest:
        return f"interpolated (calibrated up to {largest} devices)"
    return f"extrapolated (calibrated up to {largest} devices)"


def with_calibration(
    table: pd.DataFrame, calibration: cal.Calibration, largest: int
) -> pd.DataFrame:
    """``table`` with the calibrated efficiency and speed-up (with ranges) per row, from its
    link-only efficiency; rows without a link-only number stay without."""
    rows = []
    for row in table.itertuples():
        link = float(row.efficiency)
        world = int(row.world_size)
        if world < 2 or not (math.isfinite(link) and link > 0):
            rows.append(dict.fromkeys(CALIBRATED_COLUMNS[:6], math.nan))
            continue
        eff, lo, hi = cal.predict(calibration, world, 1 / link).efficiency
        rows.append(
            {
                "calibrated_efficiency": eff,
                "calibrated_efficiency_lo": lo,
                "calibrated_efficiency_hi": hi,
                "calibrated_speedup": eff * world,
                "calibrated_speedup_lo": lo * world,
                "calibrated_speedup_hi": hi * world,
            }
        )
    out = table.assign(**pd.DataFrame(rows, index=table.index))
    words = calibration.words + (
        f"; not resolved: {'; '.join(calibration.unresolved)}" if calibration.unresolved else ""
    )
    return out.assign(
        calibrated_kind=[_kind(int(w), largest) for w in table["world_size"]],
        calibration=words,
    )


def with_band(table: pd.DataFrame, band: Band, basis: str) -> pd.DataFrame:
    """``table`` with the empirical band around each multi-device row's link-only efficiency
    (never above the link-only figure's own upper bound of 1, never below 0)."""
    link = table["efficiency"].astype(float)
    multi = table["world_size"].astype(int) >= 2
    if not band.resolved:
        lo = hi = pd.Series(np.nan, index=table.index)
    else:
        lo = (link + band.lo / 100).clip(lower=0, upper=1).where(multi)
        hi = (link + band.hi / 100).clip(lower=0, upper=1).where(multi)
    return table.assign(efficiency_band_lo=lo, efficiency_band_hi=hi, band_basis=basis)


def largest_world(found: Sequence[cal.Point]) -> int:
    return max(p.devices for p in found)
