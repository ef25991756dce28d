"""Tidy tables of collectives cells: one row per (cell, message size), and one per cell that
replayed a training step's gradients. ``source`` is ``measured`` for dpscale's own cells and
imported:<kind>:<file> for an all_reduce_perf log a user brought (analysis.results.imports): both
stay in the tables, each fitted on its own (analysis.laws.comm_fits)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from dpscale.plan import ring
from dpscale.plan.columns import NETWORK, SPREAD
from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.link import Link
from dpscale.plan.remedies import NONE, Comm

LAYOUT = ["study", "strategy", "framework", NETWORK, "comm", *SPREAD]
MEASURED = "measured"
# one fit per group: imported rows are never pooled with measured ones
FIT_GROUP = [*LAYOUT, "source"]
COLLECTIVES_COLUMNS = [
    *FIT_GROUP,
    "cell_id",
    "message_bytes",
    "time_s",
    "time_lo",
    "time_hi",
    "windows",
    "algbw_GB_s",
    "busbw_GB_s",
    "busbw_lo_GB_s",
    "busbw_hi_GB_s",
    "wire_bytes",
    "wire_busbw_GB_s",
    "link_GB_s",
    "op",
    "backend",
    "quality",
]


def _size_row(base: dict[str, Any], size: dict[str, Any]) -> dict[str, Any]:
    """time_s: the median per-call time over windows; time_lo/hi: the 10th and 90th
    percentiles of the windows' per-call times (the spread of the windows, as cells.csv's
    img_s_p10/p90)."""
    summary, nbytes, ranks = size["summary"], size["message_bytes"], base["world_size"]

    def busbw(seconds: float) -> float:
        return ring.bus_bandwidth(ring.algorithm_bandwidth(nbytes, seconds), ranks) / 1e9

    return {
        **base,
        "message_bytes": nbytes,
        "time_s": summary["median"],
        "time_lo": summary["p10"],
        "time_hi": summary["p90"],
        "windows": summary["n"],
        "algbw_GB_s": ring.algorithm_bandwidth(nbytes, summary["median"]) / 1e9,
        "busbw_GB_s": busbw(summary["median"]),
        "busbw_lo_GB_s": busbw(summary["p90"]),  # the slower windows
        "busbw_hi_GB_s": busbw(summary["p10"]),
        # what a remedy sent (plan.remedies.wire_bytes), and the link's bandwidth on those bytes
        "wire_bytes": size.get("wire_bytes", nbytes),
        "wire_busbw_GB_s": size.get("wire_busbw_GB_s", busbw(summary["median"])),
    }


def comm_key(cell: dict[str, Any]) -> str:
    """The cell's communication remedy (plan.remedies), ``none`` for cells without one."""
    return Comm(**cell["comm"]).key if cell.get("comm") else NONE.key


def link_rate_GB_s(cell: dict[str, Any]) -> float:
    """The line rate of an emulated link in GB/s (config ``rate``), NaN for the host's own
    network or a real one (whose rate dpscale is not told)."""
    network = cell.get("network") or {}
    if not network.get("rate"):
        return math.nan
    link = Link.from_rate(
        network.get("name", ""),
        network["rate"],
        field="network",
        emulated=True,
        source="configured rate",
    )
    return link.bytes_per_s / 1e9


def _layout(result: dict[str, Any]) -> dict[str, Any]:
    """The LAYOUT columns of a collectives cell's result."""
    cell = result["cell"]
    return {
        "study": cell["study"],
        "strategy": cell["strategy"],
        "framework": result.get("framework"),
        "network": (cell.get("network") or {}).get("name", HOST_NETWORK),
        "comm": comm_key(cell),
        "nodes": cell["nodes"],
        "devices_per_node": cell["devices_per_node"],
        "world_size": cell["world_size"],
    }


def collectives_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per message size of every ok collectives cell (others have no sizes)."""
    rows = []
    for result in results:
        cell, record = result["cell"], result.get("collectives")
        if cell["mode"] != "collectives" or result["status"] != "ok" or not record:
            continue
        base = {
            **_layout(result),
            "source": MEASURED,
            "cell_id": cell["cell_id"],
            "link_GB_s": link_rate_GB_s(cell),
            "op": record["op"],
            "backend": record["backend"],
            "quality": result.get("quality"),
        }
        rows += [_size_row(base, size) for size in record["sizes"]]
    table = pd.DataFrame(rows, columns=COLLECTIVES_COLUMNS)
    return table.sort_values([*FIT_GROUP, "message_bytes"]).reset_index(drop=True)


def with_imported(measured: pd.DataFrame, imported: pd.DataFrame) -> pd.DataFrame:
    """The measured rows and the imported ones (analysis.results.imports) in one table, each with
    its source."""
    frames = [f.reindex(columns=COLLECTIVES_COLUMNS) for f in (measured, imported) if not f.empty]
    if not frames:
        return measured.reindex(columns=COLLECTIVES_COLUMNS)
    table = pd.concat(frames, ignore_index=True)
    return table.sort_values([*FIT_GROUP, "message_bytes"]).reset_index(drop=True)


REPLAY_COLUMNS = [
    *LAYOUT,
    "model",
    "cell_id",
    "buckets",
    "collectives_per_step",
    "logical_bytes_per_step",
    "wire_bytes_per_step",
    "wire_ratio",
    "step_s",
    "step_ci95",
    "work_s",
    "work_ci95",
    "quality",
]


def gradient_replay_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per ok collectives cell that replayed a training step's gradient traffic:
    its buckets and collectives, the bytes it sent, the step's time (mean, 95%), and the
    remedy's own work on the same gradients with nothing sent, where it has any."""
    rows = []
    for result in results:
        cell = result["cell"]
        replay = (result.get("collectives") or {}).get("gradient_replay")
        if cell["mode"] != "collectives" or result["status"] != "ok" or not replay:
            continue
        rows.append(
            {
                **_layout(result),
                "model": cell["model"]["key"],
                "cell_id": cell["cell_id"],
                "buckets": replay["buckets"],
                "collectives_per_step": replay["collectives_per_step"],
                "logical_bytes_per_step": replay["logical_bytes_per_step"],
                "wire_bytes_per_step": replay["wire_bytes_per_step"],
                "wire_ratio": replay["logical_bytes_per_step"] / replay["wire_bytes_per_step"],
                "step_s": replay["summary"]["mean"],
                "step_ci95": replay["summary"]["ci95"],
                "work_s": (replay.get("work_summary") or {}).get("mean"),
                "work_ci95": (replay.get("work_summary") or {}).get("ci95"),
                "quality": result.get("quality"),
            }
        )
    return pd.DataFrame(rows, columns=REPLAY_COLUMNS).sort_values(LAYOUT).reset_index(drop=True)
