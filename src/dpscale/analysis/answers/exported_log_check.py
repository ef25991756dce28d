"""The exported-log path checked end to end on the study's own cells.

The study's collectives cells are written as nccl-tests ``all_reduce_perf`` logs by
``nccl_export.export_logs`` (what ``dpscale export-nccl`` writes), each log is read back as a
cluster's own log is (``import_logs.read_lines``, ``parse_all_reduce``,
``CollectiveCurve.from_log``), and every measured multi-node synthetic cell is predicted by
``cluster_prediction.predict`` (what ``dpscale predict`` runs) from the one-process cell of
its strategy, model and batch: that cell's step as the compute, the one-rank bucket timeline,
each bucket's all-reduce from the log. Nothing is fitted to the multi-node cells.

Two logs per cell where both exist (``scheme``): the log at the cell's own rank count (its
measured times) and the log at the fewest ranks measured (the ring law fitted to it, at the
cell's ranks). Beside each, the native model's held-out median of the matching scheme
(leave one network out; fit on the fewest ranks, predict more) of its chosen form.

The summary beside the native model's medians: exported_log_summary.

What this path cannot know: emulated nodes share one machine's cores. The native model fits
a compute slowdown per co-located rank (sigma) and, in its bucket form, the compute each GB
sent takes on shared cores (kappa); this path has neither (a cluster's devices do not share
cores), so where the ranks contend its prediction is fast by that much. No factor corrects it.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.laws.cluster_link import MEASURED, CollectiveCurve
from dpscale.analysis.laws.commmodel.buckets import BucketTimeline, timelines
from dpscale.analysis.laws.commmodel.validation import FEWEST_RANKS, LEAVE_ONE_NETWORK_OUT
from dpscale.analysis.results.import_logs import LogError, parse_all_reduce, read_lines
from dpscale.analysis.results.nccl_export import GROUP, export_logs, file_name
from dpscale.analysis.results.rows import no_remedy, with_comm
from dpscale.plan.columns import NETWORK, NODES, POINT, RUN, SPREAD, WORLD_SIZE
from dpscale.plan.layout import Layout

SAME_RANKS = "log at the cell's rank count"
FEWEST_LOG = "log at the fewest ranks, ring law above"
# the native held-out check each scheme stands beside
NATIVE_SCHEME = {SAME_RANKS: LEAVE_ONE_NETWORK_OUT, FEWEST_LOG: FEWEST_RANKS}
KIND = f"{cp.KIND} from one process"
OK = "ok"
NOT_PREDICTED = "not predicted"
NOT_CHECKED = "not checked"
CONTAMINATED = "contaminated"
SYNTHETIC = "synthetic"

CELL_COLUMNS = [
    "scheme",
    *RUN,
    NETWORK,
    "comm",
    *SPREAD,
    "batch_per_device",
    "log",
    "log_ranks",
    "collective_basis",
    "algorithm",
    "one_process_step_s",
    "measured_step_s",
    "predicted_step_s",
    "predicted_lo_s",
    "predicted_hi_s",
    "relative_error",
    "within_interval",
    "measured_img_s",
    "predicted_img_s",
    "img_s_relative_error",
    "kind",
    "status",
    "reason",
    "note",
]


@dataclass(frozen=True)
class ExportedLog:
    """One exported log read back: its file name, rank count and curve, or why it failed."""

    name: str
    ranks: int
    curve: CollectiveCurve | None
    error: str | None = None


# -- the logs ------------------------------------------------------------------------------


def _nominal(rows: pd.DataFrame) -> float | None:
    """The link's nominal rate in bytes/s (collectives.csv's link_GB_s), None where unknown."""
    if "link_GB_s" not in rows:
        return None
    rate = float(pd.to_numeric(rows["link_GB_s"], errors="coerce").median()) * 1e9
    return rate if math.isfinite(rate) and rate > 0 else None


def _read_back(path: Path, ranks: int, nominal: float | None) -> ExportedLog:
    """The log at ``path`` through the import a cluster's log takes."""
    try:
        log = parse_all_reduce(read_lines(path), ranks)
        return ExportedLog(path.name, ranks, CollectiveCurve.from_log(log, ranks, nominal))
    except (LogError, ValueError) as error:
        return ExportedLog(path.name, ranks, None, f"the exported log {path.name} {error}")


def exported_logs(collectives: pd.DataFrame, study: str) -> dict[tuple, ExportedLog]:
    """(strategy, network, nodes, devices_per_node) -> its exported log read back, for the
    layouts without a remedy that export_logs writes (measured, two or more ranks)."""
    if collectives.empty:
        return {}
    collectives = with_comm(collectives)
    plain = collectives[no_remedy(collectives["comm"])]
    groups = {file_name(key): (key, rows) for key, rows in plain.groupby(GROUP, sort=True)}
    found = {}
    with tempfile.TemporaryDirectory(prefix="dpscale-exported-") as folder:
        for path in export_logs(plain, Path(folder), study):
            key, rows = groups[path.name]
            strategy, network, _, nodes, per_node, world = key
            exported = _read_back(path, int(world), _nominal(rows))
            found[(strategy, network, int(nodes), int(per_node))] = exported
    return found


def fewest_logs(logs: Mapping[tuple, ExportedLog]) -> dict[tuple, ExportedLog]:
    """(strategy, network, devices_per_node) -> the readable log of the fewest ranks."""
    fewest: dict[tuple, ExportedLog] = {}
    for (strategy, network, _, per_node), log in sorted(logs.items()):
        key = (strategy, network, per_node)
        if log.curve is not None and (key not in fewest or log.ranks < fewest[key].ranks):
            fewest[key] = log
    return fewest


# -- the cells -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """One measured multi-node configuration (repeats pooled): the key, its step time and
    img/s over its usable repeats (NaN where none), and why none is usable."""

    key: dict[str, Any]
    step_s: float
    img_s: float
    unusable: str | None


def _unusable(rows: pd.DataFrame) -> str:
    """Why none of a configuration's repeats can be compared: their statuses and reasons."""
    words = []
    for _, row in rows.iterrows():
        quality = str(row.get("quality") or "")
        if row["status"] == OK and quality == CONTAMINATED:
            why = row.get("quality_reason") or "its ranks' CPU"
            words.append(f"{CONTAMINATED} ({why}): the native model leaves it out too")
        else:
            why = row.get("reason")
            words.append(f"{row['status']}" + (f" ({why})" if isinstance(why, str) else ""))
    return "no usable cell: " + "; ".join(dict.fromkeys(words))


def usable(cells: pd.DataFrame) -> pd.Series:
    """Synthetic cells that measured and were not contaminated (as the native model reads)."""
    quality = cells["quality"] if "quality" in cells else pd.Series("", index=cells.index)
    return (
        (cells["mode"] == SYNTHETIC)
        & (cells["status"] == OK)
        & (quality.fillna("") != CONTAMINATED)
    )


def multi_node(cells: pd.DataFrame) -> pd.Series:
    """The synthetic cells of more than one node."""
    return (cells["mode"] == SYNTHETIC) & (cells[NODES] > 1)


def measured_configurations(cells: pd.DataFrame) -> list[Measured]:
    """Every multi-node synthetic configuration of cells.csv."""
    multi = cells[multi_node(cells)]
    good = usable(multi)
    found = []
    for key, rows in multi.groupby(POINT, sort=True):
        ok = rows[good.loc[rows.index]]
        named = dict(zip(POINT, key, strict=True))
        if ok.empty:
            found.append(Measured(named, math.nan, math.nan, _unusable(rows)))
            continue
        step = float(ok["step_time_s_mean"].mean())
        found.append(Measured(named, step, float(ok["img_s_mean"].mean()), None))
    return found


# -- one prediction ------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """What every prediction reads: the one-process cells, timelines and gradient bytes."""

    one_process: pd.DataFrame  # usable synthetic cells (cp.one_device takes world size 1)
    timelines: Mapping[tuple[str, str], BucketTimeline]
    buckets: pd.DataFrame
    cells: pd.DataFrame
    emulated: Collection[str] | None  # None: not known which networks are emulated


def contention_note(world: int, network: str, emulated: Collection[str] | None) -> str:
    """What the one-process compute does not know about this cell."""
    if emulated is not None and network not in emulated:
        return "a real link: the ranks did not share cores"
    where = "emulated on one machine" if emulated is not None else "if emulated on one machine"
    return (
        f"{where}, {world} ranks shared its cores; the one-process compute does not know it "
        "(the native model fits sigma and kappa for that; this path has neither)"
    )


def _base(
    measured: Measured, scheme: str, log: ExportedLog | None, inputs: Inputs
) -> dict[str, Any]:
    key = measured.key
    return {
        "scheme": scheme,
        **{column: key[column] for column in [*RUN, NETWORK, "comm", *SPREAD]},
        "batch_per_device": key["batch_per_device"],
        "log": log.name if log else None,
        "log_ranks": log.ranks if log else math.nan,
        "measured_step_s": measured.step_s,
        "measured_img_s": measured.img_s,
        "kind": KIND,
        "note": contention_note(int(key[WORLD_SIZE]), key[NETWORK], inputs.emulated),
    }


def _why_not(measured: Measured, log: ExportedLog | None, inputs: Inputs) -> str | None:
    """Why this configuration cannot be predicted through this log, or None."""
    key = measured.key
    if measured.unusable:
        return measured.unusable
    if not no_remedy(pd.Series([key["comm"]])).iloc[0]:
        return (
            f"a remedy ({key['comm']}): cluster_prediction predicts uncompressed gradients "
            "and the one-process cell has none"
        )
    if log is None:
        layout = Layout.from_row(key).words(key[NETWORK])
        return (
            f"no collectives cell of {key['strategy']} at {layout} measured: "
            "no log to export for this layout"
        )
    if log.curve is None:
        return log.error
    if (key["strategy"], key["model"]) not in inputs.timelines:
        return (
            f"no one-rank bucket timeline of {key['strategy']} {key['model']}: "
            "cluster_prediction needs when each bucket is ready"
        )
    return None


def predict_cell(
    measured: Measured, scheme: str, log: ExportedLog | None, inputs: Inputs
) -> dict[str, Any]:
    """One row: the configuration predicted through ``log`` and compared, or why not."""
    row = _base(measured, scheme, log, inputs)
    reason = _why_not(measured, log, inputs)
    key = measured.key
    run = (key["strategy"], key["model"])
    if reason is None:
        try:
            device = cp.one_device(inputs.one_process, *run, int(key["batch_per_device"]))
        except ValueError as error:
            reason = f"no one-process cell: {error}"
    if reason is not None:
        return dict(row, status=NOT_PREDICTED, reason=reason)
    total, source = cp.gradient_bytes(inputs.buckets, *run, inputs.cells)
    per_node = int(key["devices_per_node"])
    cluster = cp.Cluster(log.name, log.curve, per_node, (int(key[NODES]),))
    try:
        predicted = cp.predict(inputs.timelines[run], device, cluster, total, source).iloc[0]
    except ValueError as error:  # the engine refuses what it cannot price, in one line
        return dict(row, status=NOT_PREDICTED, reason=str(error))
    if predicted["status"] != cp.OK:  # the law this log's fit leaves open: no number
        return dict(row, status=NOT_PREDICTED, reason=predicted["reason"])
    step, lo, hi = (predicted[c] for c in ("step_time_s", "step_time_lo_s", "step_time_hi_s"))
    basis = predicted["collective_basis"]
    if basis == MEASURED:
        basis = f"{MEASURED} at {log.ranks} ranks (the exported log's own times)"
    return dict(
        row,
        collective_basis=basis,
        algorithm=predicted["algorithm"],
        one_process_step_s=device.step_s,
        predicted_step_s=step,
        predicted_lo_s=lo,
        predicted_hi_s=hi,
        relative_error=step / measured.step_s - 1.0,
        within_interval=bool(lo <= measured.step_s <= hi),
        predicted_img_s=predicted["img_s"],
        img_s_relative_error=predicted["img_s"] / measured.img_s - 1.0,
        status=OK,
        reason=None,
    )


# -- the tables ----------------------------------------------------------------------------


def not_checked(reason: str, columns: list[str]) -> pd.DataFrame:
    """One status row saying why the study has nothing to check."""
    where = "reason" if "reason" in columns else "note"
    return pd.DataFrame([{"status": NOT_CHECKED, where: reason}]).reindex(columns=columns)


def nothing_to_check(cells: pd.DataFrame, logs: Mapping[tuple, ExportedLog]) -> str | None:
    """Why the study cannot be checked at all, or None."""
    if cells.empty or not multi_node(cells).any():
        return "no multi-node synthetic cell: nothing measured to predict"
    if not logs:
        return (
            "no collectives cell of two or more ranks without a remedy (mode collectives): "
            "no log to export"
        )
    return None


def check_cells(
    cells: pd.DataFrame,
    collectives: pd.DataFrame,
    buckets: pd.DataFrame,
    study: str,
    emulated: Collection[str] | None = None,
) -> pd.DataFrame:
    """Every multi-node synthetic configuration predicted through the exported logs: a row
    per scheme that applies, or a status row; one status row where nothing can be checked."""
    logs = exported_logs(collectives, study)
    why = nothing_to_check(cells, logs)
    if why is not None:
        return not_checked(why, CELL_COLUMNS)
    inputs = Inputs(cells[usable(cells)], timelines(buckets), buckets, cells, emulated)
    fewest = fewest_logs(logs)
    rows = []
    for measured in measured_configurations(cells):
        key = measured.key
        strategy, network, per_node = key["strategy"], key[NETWORK], key["devices_per_node"]
        same = logs.get((strategy, network, int(key[NODES]), int(per_node)))
        rows.append(predict_cell(measured, SAME_RANKS, same, inputs))
        low = fewest.get((strategy, network, int(per_node)))
        if low is not None and low.ranks < int(key[WORLD_SIZE]):
            rows.append(predict_cell(measured, FEWEST_LOG, low, inputs))
    return pd.DataFrame(rows).reindex(columns=CELL_COLUMNS)
