"""Tables of what users measured elsewhere (config ``imports``): all_reduce_perf rows in the
collectives table's columns, and throughput runs in their own table. Every row carries its
``source`` (imported:<kind>:<label or file>), so nothing imported is read as measured."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.analysis.results.collectives import COLLECTIVES_COLUMNS, FIT_GROUP
from dpscale.analysis.results.import_logs import AllReduceLog, LogError, ThroughputRun
from dpscale.analysis.results.import_logs import read_entry as read_log
from dpscale.plan import ring
from dpscale.plan.columns import LAYOUT
from dpscale.plan.config_rules import import_source
from dpscale.plan.remedies import NONE

THROUGHPUT_COLUMNS = [
    "study",
    "source",
    *LAYOUT,
    "batch_per_device",
    "global_batch",
    "mode",
    "img_s",
    "img_s_pm",
    "img_s_per_device",
    "img_s_per_device_pm",
    "interval",
    "iterations",
    "log",
    "log_line",
]


def read_entry(entry: dict[str, Any]) -> AllReduceLog | list[ThroughputRun]:
    """The entry's log parsed (checked at plan time; a log changed since is a LogError of one
    line naming its file)."""
    try:
        return read_log(entry)
    except LogError as error:
        raise LogError(f"imports: {entry['path']!r} {error}") from None


def _layout(entry: dict[str, Any], study: str) -> dict[str, Any]:
    return {
        "study": study,
        "strategy": entry["kind"],
        "network": entry["network"],
        "nodes": entry["nodes"],
        "devices_per_node": entry["devices_per_node"],
        "world_size": entry["nodes"] * entry["devices_per_node"],
        "source": import_source(entry),
    }


def _all_reduce_rows(entry: dict[str, Any], log: AllReduceLog, study: str) -> list[dict]:
    """The log's sizes; its bandwidths recomputed from its time (it rounds them to 0.01
    GB/s, 0.00 for small messages) with the convention it uses, dpscale's too."""
    base = {
        **_layout(entry, study),
        "framework": "nccl",
        "comm": NONE.key,
        "cell_id": entry["path"],
        "link_GB_s": math.nan,
        "backend": "nccl",
        "quality": "imported" if log.validated else "imported, not validated (#wrong N/A)",
    }
    rows = []
    for row in log.rows:
        seconds = row.time_us * 1e-6
        algbw = ring.algorithm_bandwidth(row.message_bytes, seconds) / 1e9
        busbw = ring.bus_bandwidth(algbw, base["world_size"])
        rows.append(
            {
                **base,
                "message_bytes": row.message_bytes,
                "time_s": seconds,
                "algbw_GB_s": algbw,
                "busbw_GB_s": busbw,
                "wire_bytes": row.message_bytes,
                "wire_busbw_GB_s": busbw,
                "op": f"{log.test}, {log.placement}, {row.dtype} {row.redop}",
            }
        )
    return rows


def imported_collectives(entries: list[dict[str, Any]], study: str) -> pd.DataFrame:
    """One row per message size of every nccl-tests import, in the collectives table's
    columns; no spread (time_lo/hi, windows): all_reduce_perf prints one mean time."""
    rows = []
    for entry in entries:
        if entry["kind"] == "nccl-tests":
            rows += _all_reduce_rows(entry, read_entry(entry), study)
    table = pd.DataFrame(rows, columns=COLLECTIVES_COLUMNS)
    return table.sort_values([*FIT_GROUP, "message_bytes"]).reset_index(drop=True)


def imported_throughput(entries: list[dict[str, Any]], study: str) -> pd.DataFrame:
    """One row per run of every Horovod synthetic or tf_cnn_benchmarks import: global img/s
    with the +- as the log prints it (and what that is, in ``interval``)."""
    rows = []
    for entry in entries:
        if entry["kind"] == "nccl-tests":
            continue
        for run in read_entry(entry):
            rows.append(
                {
                    **_layout(entry, study),
                    "model": run.model,
                    "batch_per_device": run.batch_per_device,
                    "global_batch": run.batch_per_device * run.world_size,
                    "mode": run.mode,
                    "img_s": run.img_s,
                    "img_s_pm": run.img_s_pm,
                    "img_s_per_device": run.img_s_per_device,
                    "img_s_per_device_pm": run.img_s_per_device_pm,
                    "interval": run.interval,
                    "iterations": run.iterations,
                    "log": Path(entry["path"]).name,
                    "log_line": run.line,
                }
            )
    return pd.DataFrame(rows, columns=THROUGHPUT_COLUMNS)
