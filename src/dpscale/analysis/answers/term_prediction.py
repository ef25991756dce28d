"""A cluster prediction carried term by term from a small run's control cells
(laws.loss_terms; docs/decisions/loss-breakdown-prediction.md), beside today's calibrated
law: each row's predicted terms in seconds, its efficiency with the range of the measured
terms, and what came from the small run and what was assumed. Without control cells in the
small run the columns stay empty and the basis says why."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from dpscale.analysis.answers.calibrated_prediction import SmallRun
from dpscale.analysis.laws import loss_terms
from dpscale.analysis.results.loss_breakdown import loss_breakdown
from dpscale.plan.columns import NETWORK, NODES, WORLD_SIZE
from dpscale.plan.layout import Layout

TERM_COLUMNS = (
    "terms_efficiency",
    "terms_efficiency_lo",
    "terms_efficiency_hi",
    "terms_speedup",
    "terms_step_s",
    "terms_contention_s",
    "terms_waiting_s",
    "terms_exposed_s",
    "terms_own_exchange_s",
    "terms_kind",
    "terms_basis",
)
# what the loss breakdown reads of a small run's cells, beyond the calibration's columns
BREAKDOWN_COLUMNS = (
    "mode",
    "step_time_s_mean",
    "step_time_s_ci95",
    "fastest_rank_step_s_mean",
    "fastest_rank_step_s_ci95",
    "cpus_usable",
)
WITHOUT_CONTROLS = (
    "not carried term by term: the small run has no control cells of this layout (config "
    "controls: [local, barrier] measures them); the calibrated law stands alone"
)


def calibration_row(
    run_cells: pd.DataFrame, wanted: SmallRun, mode: str
) -> tuple[Mapping[str, Any] | None, str]:
    """The small run's breakdown row the terms are pinned on: the prediction's strategy,
    model, batch and devices per node, on its network, every control measured, the largest
    world size; or None and why not."""
    if mode != "synthetic":
        return None, (
            "not carried term by term: the terms are pinned on synthetic cells and the small "
            f"run calibrates on {mode} cells"
        )
    missing = [c for c in BREAKDOWN_COLUMNS if c not in run_cells]
    if missing:
        return None, f"not carried term by term: the small run's cells lack {missing[0]!r}"
    rows = loss_breakdown(run_cells)
    rows = rows[
        (rows["mode"] == "synthetic")
        & (rows["strategy"] == wanted.key[0])
        & (rows["model"] == wanted.key[1])
        & (rows["batch_per_device"] == wanted.batch)
        & (rows["devices_per_node"] == wanted.devices_per_node)
        & rows["controls_run"].astype(str).str.contains("barrier")
        & rows["controls_run"].astype(str).str.contains("one_local")
    ]
    if wanted.network is not None:
        rows = rows[(rows[NODES] == 1) | (rows[NETWORK] == wanted.network)]
    across = rows[rows[NODES] >= 2]
    rows = across if not across.empty else rows
    if rows.empty:
        return None, WITHOUT_CONTROLS
    return rows.sort_values(WORLD_SIZE).iloc[-1].to_dict(), ""


def calibration(
    row: Mapping[str, Any], link_only: pd.DataFrame
) -> tuple[loss_terms.TermCalibration | None, str]:
    """The term calibration of a breakdown row, with the link-only step ratio at its world
    size; None and why where it cannot be pinned."""
    world = int(row[WORLD_SIZE])
    at = link_only[link_only[WORLD_SIZE] == world]
    efficiency = float(at["efficiency"].iloc[0]) if not at.empty else math.nan
    if not (math.isfinite(efficiency) and efficiency > 0):
        return None, f"not carried term by term: no link-only prediction at {world} devices"
    cpus, per_rank = float(row["host_cpus"]), float(row["cpus_per_rank"])
    if not (math.isfinite(cpus) and cpus > 0):
        return None, "not carried term by term: the small run's cells do not say their cores"
    host = loss_terms.Host(int(row["ranks_per_host"]), int(cpus), max(int(per_rank), 1))
    where = Layout.from_row(row).words(str(row[NETWORK]))
    found = loss_terms.from_breakdown(row, 1 / efficiency, host, where)
    return (found, "") if found is not None else (None, WITHOUT_CONTROLS)


def target_host(
    calibrated: loss_terms.TermCalibration, world: int, devices_per_node: int, one_host: bool
) -> loss_terms.Host:
    """The predicted layout's machine: the small run's cores; its ranks those of a node, or
    every rank where the cluster's nodes are emulated on one host."""
    ranks = world if one_host else devices_per_node
    return loss_terms.Host(ranks, calibrated.host.cpus, calibrated.host.cpus_per_rank)


def _kind(world: int, largest: int) -> str:
    if world <= largest:
        return f"interpolated (terms measured at {largest} devices)"
    return f"extrapolated (terms measured at {largest} devices)"


def with_terms(
    table: pd.DataFrame,
    calibrated: loss_terms.TermCalibration | None,
    why_not: str,
    one_host: bool,
) -> pd.DataFrame:
    """``table`` with each multi-device row's term-by-term prediction (TERM_COLUMNS)."""
    if calibrated is None:
        empty = dict.fromkeys(TERM_COLUMNS[:-2], math.nan)
        return table.assign(**empty, terms_kind="", terms_basis=why_not)
    rows = []
    for row in table.itertuples():
        world, link = int(row.world_size), float(row.efficiency)
        if world < 2 or not (math.isfinite(link) and link > 0):
            rows.append({**dict.fromkeys(TERM_COLUMNS[:-2], math.nan), "terms_kind": ""})
            continue
        host = target_host(calibrated, world, int(row.devices_per_node), one_host)
        point, lo, hi = loss_terms.predicted_range(calibrated, world, 1 / link, host)
        rows.append(
            {
                "terms_efficiency": point.efficiency,
                "terms_efficiency_lo": lo,
                "terms_efficiency_hi": hi,
                "terms_speedup": point.efficiency * world,
                "terms_step_s": point.step,
                "terms_contention_s": point.contention,
                "terms_waiting_s": point.waiting,
                "terms_exposed_s": point.exposed,
                "terms_own_exchange_s": point.own_exchange,
                "terms_kind": _kind(world, calibrated.world),
            }
        )
    out = table.assign(**pd.DataFrame(rows, index=table.index))
    return out.assign(terms_basis=loss_terms.basis_words(calibrated))


def terms_words(row: pd.Series) -> str:
    """The printed sentence of a row's term-by-term prediction."""
    if pd.isna(row.get("terms_efficiency", math.nan)):
        return str(row.get("terms_basis") or "")
    ms = {name: 1e3 * row[f"terms_{name}_s"] for name in ("contention", "waiting", "exposed")}
    return (
        f"Term by term from the small run's control cells: "
        f"{100 * row['terms_efficiency']:.0f}% efficient "
        f"({100 * row['terms_efficiency_lo']:.0f}-{100 * row['terms_efficiency_hi']:.0f}%), "
        f"{row['terms_kind']}; its step's terms: contention {ms['contention']:.0f} ms, "
        f"waiting {ms['waiting']:.0f} ms, exposed exchange {ms['exposed']:.0f} ms; "
        f"{row['terms_basis']}."
    )


def carried(
    table: pd.DataFrame,
    run_cells: pd.DataFrame,
    wanted: SmallRun,
    link_only_at: Callable[[int], pd.DataFrame | str],
    one_host: bool,
    mode: str,
) -> pd.DataFrame:
    """The table with the small run's terms carried term by term, where its control cells
    split a layout's loss; else empty columns saying why. ``link_only_at(nodes)``: the
    link-only prediction at the calibration layout's node count, or why there is none."""
    row, why_not = calibration_row(run_cells, wanted, mode)
    found = None
    if row is not None:
        link_only = link_only_at(int(row[NODES]))
        if isinstance(link_only, str):
            why_not = f"not carried term by term: {link_only}"
        else:
            found, why_not = calibration(row, link_only)
    return with_terms(table, found, why_not, one_host)


def printed(row: pd.Series) -> str:
    """A printed row's term-by-term efficiency, where the small run's controls carried one."""
    if pd.isna(row.get("terms_efficiency", math.nan)):
        return ""
    return (
        f"  term by term {100 * row['terms_efficiency']:.0f}% "
        f"({100 * row['terms_efficiency_lo']:.0f}-{100 * row['terms_efficiency_hi']:.0f}%)"
    )


def sentence(table: pd.DataFrame, asked: bool = True) -> str:
    """The largest layout's term-by-term prediction, where the small run carried one; why
    not only where a small run was ``asked`` for (--calibrate)."""
    if "terms_basis" not in table:
        return ""
    row = table.sort_values("world_size").iloc[-1]
    if not asked and pd.isna(row.get("terms_efficiency", math.nan)):
        return ""
    return terms_words(row)
