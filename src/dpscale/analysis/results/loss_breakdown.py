"""Where each layout's lost efficiency goes, from its control cells (plan.controls;
docs/decisions/loss-breakdown.md).

A layout's step against one device's (weak scaling: the same per-device batch) is split by
cells that differ in one thing each, all steps in seconds:

- ``contention`` = local - one device's local: ranks sharing a machine (cores, memory
  bandwidth, a bus) slow each other; ``local`` is the fastest rank's step of the local
  control, one device's local its own step without its exchange;
- ``waiting`` = barrier - local: every rank waits for the slowest at each step;
- ``exposed_comm`` = (full - barrier) - (one device - one device's local): the exchange not
  hidden behind the backward pass, beyond what one device's own step already pays for it
  (a 1-rank all-reduce, a parameter server round trip);
- ``input_pipeline`` = (folder - full) - (one device's folder - one device's synthetic):
  what reading real images costs at this layout beyond what it costs one device;
- ``left``: what the controls that ran do not split (a control skipped or not asked for
  leaves its two neighbours together here; without one device's local, its own exchange
  is unknown and contention and the exposed exchange stay together); 0 where every
  control ran.

The terms add up to the layout's step minus one device's, so in points of efficiency,
``term / layout's step``, they add up to the points lost: ``1 - efficiency``. Each term's
95% interval is propagated from the cells' own (first-order, cells independent), as every
ratio of the report is (docs/decisions/intervals-on-ratios.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from dpscale.plan import controls
from dpscale.plan.columns import DEVICES_PER_NODE, NETWORK, NODES, WORLD_SIZE
from dpscale.plan.remedies import NO_REMEDY

TERMS = ("contention", "waiting", "exposed_comm", "input_pipeline", "left")
TERM_WORDS = {
    "contention": "ranks sharing a machine",
    "waiting": "waiting for the slowest rank",
    "exposed_comm": "exchange not hidden by compute",
    "input_pipeline": "input pipeline",
    "left": "not split by the controls that ran",
}
LAYOUT_KEY = ["strategy", "model", NETWORK, NODES, DEVICES_PER_NODE, WORLD_SIZE, "batch_per_device"]
# the cells one breakdown reads, by their part: (table mode, the step column it reads)
STEP = "step_time_s"
FASTEST = "fastest_rank_step_s"
COLUMNS = [
    *LAYOUT_KEY,
    "mode",
    "one_step_s",
    "one_local_step_s",
    "local_step_s",
    "barrier_step_s",
    "full_step_s",
    "folder_step_s",
    "efficiency",
    "efficiency_ci95",
    "lost_points",
    "lost_points_ci95",
    *[f"{term}_{unit}" for term in TERMS for unit in ("s", "points", "points_ci95")],
    "largest_term",
    "largest_tied_with",
    "time_shared",
    "controls_run",
    "ranks_per_host",
    "host_cpus",
    "cpus_per_rank",
]


def usable(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells a breakdown may read: ok, without a communication remedy, and not disturbed
    by other work (a cell time-shared by its own ranks is kept: that is contention)."""
    if cells.empty:
        return cells
    ok = cells[(cells["status"] == "ok") & (cells["comm"].fillna(NO_REMEDY) == NO_REMEDY)]
    disturbed = ok["disturbed"] if "disturbed" in ok else pd.Series(np.nan, index=ok.index)
    unexplained = ok["quality"].eq("contaminated") & disturbed.isna()
    return ok[~(flags(disturbed) | unexplained)]


def flags(column: pd.Series) -> pd.Series:
    """A column of true, false or unknown (NaN, an older result's) as booleans, unknown
    false."""
    return pd.to_numeric(column, errors="coerce").fillna(0).astype(bool)


def point(rows: pd.DataFrame, column: str) -> tuple[float, float]:
    """The mean of a point's repeats and its half-width (sqrt of the summed squares / n),
    as scaling.point_means pools them; NaN where there is none. A result without each rank's
    windows (imported, or written by hand) has no fastest rank: its own step stands in."""
    if rows.empty:
        return math.nan, math.nan
    if rows[f"{column}_mean"].isna().all() and column != STEP:
        column = STEP
    means, halves = rows[f"{column}_mean"].astype(float), rows[f"{column}_ci95"].astype(float)
    return float(means.mean()), float(np.sqrt((halves**2).sum()) / len(halves))


def delta_ci95(
    function: Callable[[Mapping[str, float]], float],
    means: Mapping[str, float],
    halves: Mapping[str, float],
) -> float:
    """The 95% half-width of ``function(means)`` by first-order propagation of independent
    inputs' half-widths (a central difference per input)."""
    total = 0.0
    for name, half in halves.items():
        if not half:
            continue
        step = max(abs(means[name]) * 1e-6, 1e-12)
        up, down = dict(means), dict(means)
        up[name] += step
        down[name] -= step
        total += ((function(up) - function(down)) / (2 * step) * half) ** 2
    return math.sqrt(total)


def step_terms(steps: Mapping[str, float]) -> dict[str, float]:
    """Each term in seconds from the parts' steps (``one``, ``one_local``, ``local``,
    ``barrier``, ``full``, and ``folder``, ``one_folder`` where measured; a missing part is
    absent or NaN). One device's own exchange (``one - one_local``: a 1-rank all-reduce, a
    parameter server round trip) is taken off the layout's, so contention compares compute
    with compute; the terms still add up to ``full - one``."""
    one, full = steps["one"], steps["full"]
    one_local = steps.get("one_local", math.nan)
    alone = one_local if known(one_local) else one  # one device's compute
    own_exchange = one - alone
    chain = [("one", alone)]
    chain += [(part, steps[part]) for part in ("local", "barrier") if known(steps.get(part))]
    chain.append(("full", full - own_exchange))
    terms = dict.fromkeys(TERMS, math.nan)
    terms["left"] = 0.0
    for (a, low), (b, high) in zip(chain, chain[1:], strict=False):
        name = PAIRS.get((a, b))
        if name is None:
            terms["left"] += high - low
        else:
            terms[name] = high - low
    if not known(one_local):
        # one device's own exchange unmeasured: it sits inside both contention and the
        # exposed exchange (one with each sign), so neither is split; their sum is exact
        for name in ("contention", "exposed_comm"):
            if known(terms[name]):
                terms["left"] += terms[name]
                terms[name] = math.nan
    folder, one_folder = steps.get("folder", math.nan), steps.get("one_folder", math.nan)
    if known(folder) and known(one_folder):
        terms["input_pipeline"] = (folder - full) - (one_folder - one)
    return terms


def known(value: float | None) -> bool:
    return value is not None and value == value


# consecutive parts and the term between them
PAIRS = {("one", "local"): "contention", ("local", "barrier"): "waiting"}
PAIRS[("barrier", "full")] = "exposed_comm"


def end_to_end(steps: Mapping[str, float]) -> tuple[float, float]:
    """(the layout's step, one device's) the efficiency compares: the folder cells' where
    the breakdown includes the input pipeline, else the synthetic ones'."""
    if "folder" in steps and "one_folder" in steps:
        return steps["folder"], steps["one_folder"]
    return steps["full"], steps["one"]


def breakdown_row(steps: Mapping[str, float], halves: Mapping[str, float]) -> dict[str, Any]:
    """Terms in seconds and in points of efficiency, with intervals, from the parts."""
    terms = step_terms(steps)
    row: dict[str, Any] = {}

    def efficiency(values: Mapping[str, float]) -> float:
        layout, one = end_to_end(values)
        return one / layout

    row["efficiency"] = efficiency(steps)
    row["efficiency_ci95"] = delta_ci95(efficiency, steps, halves)
    row["lost_points"] = 100 * (1 - row["efficiency"])
    row["lost_points_ci95"] = 100 * row["efficiency_ci95"]
    for term in TERMS:
        row[f"{term}_s"] = terms[term]

        def points(values: Mapping[str, float], term: str = term) -> float:
            return 100 * step_terms(values)[term] / end_to_end(values)[0]

        row[f"{term}_points"] = points(steps) if terms[term] == terms[term] else math.nan
        row[f"{term}_points_ci95"] = (
            delta_ci95(points, steps, halves) if terms[term] == terms[term] else math.nan
        )
    row.update(largest(row))
    return row


def largest(row: Mapping[str, Any]) -> dict[str, str]:
    """The term with the most points, and the terms whose intervals reach its (a tie)."""
    measured = {
        term: (row[f"{term}_points"], row[f"{term}_points_ci95"])
        for term in TERMS
        if row[f"{term}_points"] == row[f"{term}_points"] and row[f"{term}_points"] > 0
    }
    if not measured:
        return {"largest_term": "", "largest_tied_with": ""}
    top = max(measured, key=lambda term: measured[term][0])
    value, half = measured[top]
    half = half if half == half else 0.0
    tied = [
        term
        for term, (v, h) in measured.items()
        if term != top and v + (h if h == h else 0.0) >= value - half
    ]
    return {"largest_term": top, "largest_tied_with": ",".join(tied)}


def layout_parts(
    cells: pd.DataFrame, key: Mapping[str, Any]
) -> tuple[dict[str, float], dict[str, float], bool, list[str]]:
    """The steps (and half-widths) of one layout's parts, whether any of them time-shared
    the cores, and the controls that ran."""
    same = cells[(cells["strategy"] == key["strategy"]) & (cells["model"] == key["model"])]
    batch = same[same["batch_per_device"] == key["batch_per_device"]]
    single = batch[batch[WORLD_SIZE] == 1]
    layout = batch
    for column in (NETWORK, NODES, DEVICES_PER_NODE):
        layout = layout[layout[column] == key[column]]
    parts = {
        "one": (single[single["mode"] == "synthetic"], STEP),
        "one_local": (single[single["mode"] == controls.mode_key(controls.LOCAL)], STEP),
        "one_folder": (single[single["mode"] == "folder"], STEP),
        "full": (layout[layout["mode"] == "synthetic"], STEP),
        "folder": (layout[layout["mode"] == "folder"], STEP),
        "local": (layout[layout["mode"] == controls.mode_key(controls.LOCAL)], FASTEST),
        "barrier": (layout[layout["mode"] == controls.mode_key(controls.BARRIER)], STEP),
    }
    steps, halves, shared, ran = {}, {}, False, []
    for name, (rows, column) in parts.items():
        if rows.empty:
            continue
        steps[name], halves[name] = point(rows, column)
        if "time_shared" in rows:
            shared |= bool(flags(rows["time_shared"]).any())
        if name in controls.CONTROLS or name == "one_local":
            ran.append(name)
    return steps, halves, shared, ran


def loss_breakdown(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per layout of more than one process with a one-device cell to compare with
    and a control or folder cell that splits it: its terms in seconds and points with 95%
    half-widths, the largest term and what ties it; a layout with folder cells has a second
    row (mode folder) with the input pipeline."""
    cells = usable(cells)
    if cells.empty:
        return pd.DataFrame(columns=COLUMNS)
    full = cells[(cells["mode"] == "synthetic") & (cells[WORLD_SIZE] > 1)]
    rows = []
    for values in full[LAYOUT_KEY].drop_duplicates().itertuples(index=False):
        key = dict(zip(LAYOUT_KEY, values, strict=True))
        steps, halves, shared, ran = layout_parts(cells, key)
        split = any(part in ran for part in controls.CONTROLS) or "folder" in steps
        if "one" not in steps or "full" not in steps or not split:
            continue  # nothing splits it: its efficiency is the scaling table's
        base = {**key, "time_shared": shared, "controls_run": ",".join(ran), **host(cells, key)}
        synthetic = {k: v for k, v in steps.items() if k not in ("folder", "one_folder")}
        rows.append({**base, "mode": "synthetic", **_parts(steps), **breakdown_row(
            synthetic, {k: halves[k] for k in synthetic})})
        if "folder" in steps and "one_folder" in steps:
            rows.append({**base, "mode": "folder", **_parts(steps), **breakdown_row(
                steps, halves)})
    return pd.DataFrame(rows, columns=COLUMNS)


def host(cells: pd.DataFrame, key: Mapping[str, Any]) -> dict[str, float]:
    """Where the layout's ranks ran: how many share one machine (all of them on one node or
    on emulated nodes, else a node's), that machine's usable CPUs and each rank's threads
    (the contention law's inputs, laws.loss_terms.Host); NaN where the cells do not say."""
    layout = cells
    for column in LAYOUT_KEY:
        layout = layout[layout[column] == key[column]]
    layout = layout[layout["mode"] == "synthetic"]
    if layout.empty or "cpus_usable" not in layout:
        return {"ranks_per_host": math.nan, "host_cpus": math.nan, "cpus_per_rank": math.nan}
    row = layout.iloc[0]
    together = key[NODES] == 1 or bool(row.get("emulated", False))
    return {
        "ranks_per_host": key[WORLD_SIZE] if together else key[DEVICES_PER_NODE],
        "host_cpus": float(row["cpus_usable"]),
        "cpus_per_rank": float(row.get("threads_per_device", 1)),
    }


def _parts(steps: Mapping[str, float]) -> dict[str, float]:
    return {
        f"{name}_step_s": steps.get(name, math.nan)
        for name in ("one", "one_local", "local", "barrier", "full", "folder")
    }
