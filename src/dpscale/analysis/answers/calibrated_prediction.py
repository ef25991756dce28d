"""A cluster prediction (cluster_prediction's table, link-only) carried further by what was
measured: calibrated on a small run on the same cluster (laws.calibrated), or, without one,
given the empirical band of how far published results fell from link-only predictions
(published_intervals, laws.conformal). The link-only columns stay, as the upper bound they
are; the new columns say what they stand on.

A small run calibrates in one mode: its synthetic cells (the prediction is for training on
data already on the device) or its folder cells (a user's images read through the
framework's input pipeline: the prediction is then for training from that folder, each
row's efficiency against one device reading it). One fit never pools the two."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpscale.analysis.answers import published_intervals
from dpscale.analysis.laws import calibrated as cal
from dpscale.analysis.laws.conformal import Band
from dpscale.analysis.laws.scaling import THROUGHPUT_MODES, scaling_table
from dpscale.analysis.results import step_spread
from dpscale.plan.columns import NETWORK, NODES
from dpscale.plan.layout import devices_per_node_words
from dpscale.plan.remedies import NO_REMEDY

CALIBRATED_COLUMNS = (
    "calibrated_efficiency",
    "calibrated_efficiency_lo",
    "calibrated_efficiency_hi",
    "calibrated_speedup",
    "calibrated_speedup_lo",
    "calibrated_speedup_hi",
    "calibrated_kind",
    "calibration",
    "calibrated_mode",
)
BAND_COLUMNS = ("efficiency_band_lo", "efficiency_band_hi", "band_basis")
# what a small run's scaling table gives per measured layout
MEASURED_COLUMNS = ("world_size", "efficiency", "efficiency_ci95")
# the modes whose cells time training steps, so can calibrate one (collectives cells and
# drift probes do not), and what a prediction calibrated on each is for
MODES = dict(
    zip(
        THROUGHPUT_MODES,  # the modes the scaling table holds apart (laws.scaling)
        (
            "training on synthetic data",
            "training from an image folder read through the framework's input pipeline",
        ),
        strict=True,
    )
)


@dataclass(frozen=True)
class SmallRun:
    """What a small run's cells must match to calibrate a prediction: its strategy and
    model, per-device batch and devices per node; ``network`` and ``mode`` where named."""

    key: tuple[str, str]
    batch: int
    devices_per_node: int
    network: str | None = None
    mode: str | None = None


def check_mode(mode: str | None) -> None:
    """A mode a person named: one of MODES; ValueError of one line otherwise."""
    if mode is not None and mode not in MODES:
        raise ValueError(
            f"mode: {mode!r} is not a mode a small run calibrates on; allowed: {sorted(MODES)}"
        )


def _mode(cells: pd.DataFrame, wanted: SmallRun) -> str:
    """The mode whose cells calibrate: the one named, else the only one the small run timed
    of the prediction's strategy, model and batch on several devices."""
    check_mode(wanted.mode)
    if wanted.mode is not None:
        return wanted.mode
    multi = cells[
        (cells["status"] == "ok")
        & (cells["strategy"] == wanted.key[0])
        & (cells["model"] == wanted.key[1])
        & (cells["batch_per_device"] == wanted.batch)
        & (cells["world_size"] >= 2)
    ]
    timed = sorted(set(multi["mode"].astype(str)) & set(MODES))
    if len(timed) > 1:
        raise ValueError(
            f"mode: the small run measured both {' and '.join(timed)} cells, which one fit never "
            f"pools; name one (--mode); allowed: {sorted(MODES)}"
        )
    return timed[0] if timed else "synthetic"


def small_run_rows(cells: pd.DataFrame, wanted: SmallRun, where: str) -> pd.DataFrame:
    """The small run's measured multi-device layouts (its scaling table, in one mode) of the
    prediction's strategy, model and per-device batch, without a remedy, on one network, at
    the cluster's devices per node; ValueError of one line where there are none or the
    network or mode is not named where the run has several."""
    mode = _mode(cells, wanted)
    scaling = scaling_table(cells, mode)
    rows = scaling[
        (scaling["strategy"] == wanted.key[0])
        & (scaling["model"] == wanted.key[1])
        & (scaling["batch_per_device"] == wanted.batch)
        & (scaling["comm"] == NO_REMEDY)
        & (scaling["world_size"] >= 2)
    ]
    networks = sorted(set(rows.loc[rows[NODES] >= 2, NETWORK].astype(str)))
    if wanted.network is not None:
        if wanted.network not in networks:
            raise ValueError(
                f"network: {wanted.network!r} is not in the small run; allowed: {networks}"
            )
        rows = rows[(rows[NODES] == 1) | (rows[NETWORK] == wanted.network)]
    elif len(networks) > 1:
        raise ValueError(f"network: the small run measured {networks}; name one (--network)")
    have = sorted(set(rows["devices_per_node"].astype(int)))
    rows = rows[rows["devices_per_node"] == wanted.devices_per_node]
    if rows.empty:
        raise ValueError(
            f"calibrate: {where} has no {mode} multi-device cell of {wanted.key[0]} "
            f"{wanted.key[1]} at batch {wanted.batch} with "
            f"{devices_per_node_words(wanted.devices_per_node)} (it has devices per node "
            f"{have or 'none'}); allowed: the same strategy, "
            "model, batch and devices per node at one node of several devices or two nodes or "
            f"more, beside a one-device {mode} cell (the baseline of its efficiency)"
        )
    return rows.assign(mode=mode)


def one_device_spread(
    cells: pd.DataFrame, wanted: SmallRun, mode: str
) -> tuple[float, tuple[float, float]] | None:
    """The stragglers' ``j`` and its interval from the small run's one-device cell of the
    prediction's strategy, model, batch and mode, where it was timed in one-step windows
    (``measure.steps_per_window: 1``); None where none was (the stragglers then sit in g and
    s). Several such cells (repeats): the widest interval's, so the range holds them all."""
    if any(column not in cells for column in step_spread.COLUMNS):
        return None
    one = cells[
        (cells["status"] == "ok")
        & (cells["strategy"] == wanted.key[0])
        & (cells["model"] == wanted.key[1])
        & (cells["batch_per_device"] == wanted.batch)
        & (cells["mode"] == mode)
        & (cells["world_size"] == 1)
    ].dropna(subset=list(step_spread.COLUMNS))
    if one.empty:
        return None
    j = float(one["step_spread"].median())
    return j, (float(one["step_spread_lo"].min()), float(one["step_spread_hi"].max()))


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
    table: pd.DataFrame, calibration: cal.Calibration, largest: int, mode: str = "synthetic"
) -> pd.DataFrame:
    """``table`` with the calibrated efficiency and speed-up (with ranges) per row, from its
    link-only efficiency; rows without a link-only number stay without. ``mode``: the small
    run's cells it was calibrated on, which say what it predicts (MODES)."""
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
        calibration=f"{mode} cells, for {MODES[mode]}: {words}",
        calibrated_mode=mode,
    )


def with_baselines(table: pd.DataFrame, found: Sequence[cal.Point], record: str) -> pd.DataFrame:
    """``table`` with the two predictions arithmetic makes from the same measured points
    beyond the largest of them (laws.calibrated's hold and repeat, NaN at or below it), and
    ``record``: how the law fared against them where it was checked."""
    largest = largest_world(found)
    beyond = table["world_size"].astype(int) > largest
    hold = 1 / cal.hold_baseline(found)
    repeat = [1 / cal.repeat_baseline(found, int(w)) for w in table["world_size"]]
    return table.assign(
        hold_efficiency=pd.Series(hold, index=table.index).where(beyond),
        repeat_efficiency=pd.Series(repeat, index=table.index).where(beyond),
        baselines_record=record,
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


def with_scale_bands(table: pd.DataFrame, bands: Mapping[str, tuple]) -> pd.DataFrame:
    """``table`` with each row's band of its scale group (published_intervals.scale_group of
    its node count; the pooled band where the group has none): a one-node row carries the
    band of cases within one node, a row across nodes the band of cases across nodes.
    ``bands``: scale -> (Band, words, coverage in short)."""
    scales = table["nodes"].map(published_intervals.scale_group)
    parts = []
    for scale, rows in table.groupby(scales, sort=False):
        group = scale if scale in bands else published_intervals.POOLED
        band, words, coverage = bands[group]
        parts.append(with_band(rows, band, words).assign(band_group=group, band_coverage=coverage))
    if not parts:  # no row: the columns all the same
        return with_band(table, *bands[published_intervals.POOLED][:2])
    return pd.concat(parts).loc[table.index]


def largest_world(found: Sequence[cal.Point]) -> int:
    return max(p.devices for p in found)
