"""dpscale's own collectives cells written as nccl-tests ``all_reduce_perf`` logs, so that the
path a cluster's log takes (import_logs, then laws.cluster_link) can be checked on links
measured here: a log per (strategy, network, comm, layout), one row per message size.

Times are the cells' medians per call (collectives.csv's ``time_s``), in microseconds as
nccl-tests prints them; algbw and busbw follow nccl-tests' definitions (plan.ring). #wrong
reads N/A: dpscale's collectives do not validate the sums (nccl-tests' ``-c 0``)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from dpscale.analysis.results.collectives import MEASURED
from dpscale.plan import ring
from dpscale.plan.columns import NETWORK, SPREAD

GROUP = ["strategy", NETWORK, "comm", *SPREAD]
HEADER = (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)         "
    "   (us)  (GB/s)  (GB/s)       ",
)
FLOAT_BYTES = 4


def _columns(message_bytes: int, seconds: float, ranks: int) -> str:
    algbw = ring.algorithm_bandwidth(message_bytes, seconds) / 1e9
    busbw = ring.bus_bandwidth(algbw, ranks)
    block = f"{seconds * 1e6:8.2f} {algbw:7.2f} {busbw:7.2f}    N/A"
    return block + " " + block


def log_text(rows: pd.DataFrame, source: str) -> str:
    """One layout's collectives rows (one world size) as an all_reduce_perf log."""
    ranks = int(rows["world_size"].iloc[0])
    nodes = int(rows["nodes"].iloc[0])
    per_node = int(rows["devices_per_node"].iloc[0])
    sizes = rows.sort_values("message_bytes")
    lines = [
        f"# exported by dpscale from {source}",
        "# Collective test starting: all_reduce_perf",
        "#",
        "# Using devices",
    ]
    lines += [
        f"#  Rank {rank:2d} Group  0 Pid 0 on node{rank // per_node} device {rank % per_node} cpu"
        for rank in range(ranks)
    ]
    lines += ["#", *HEADER]
    busbws = []
    for size, seconds in zip(sizes["message_bytes"], sizes["time_s"], strict=True):
        count = max(int(size) // FLOAT_BYTES, 1)
        lines.append(
            f"{int(size):12d} {count:13d}     float     sum      -1 "
            + _columns(int(size), float(seconds), ranks)
        )
        busbws.append(ring.bus_bandwidth(ring.algorithm_bandwidth(size, seconds) / 1e9, ranks))
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):.4f}",
        "#",
        f"# Collective test concluded: all_reduce_perf ({nodes} node(s))",
    ]
    return "\n".join(lines) + "\n"


def file_name(key: tuple) -> str:
    strategy, network, comm, nodes, per_node, _ = key
    name = f"{strategy}_{network}_{comm}_n{nodes}-d{per_node}.log"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)


def export_logs(collectives: pd.DataFrame, out: Path, study: str) -> list[Path]:
    """Every layout dpscale measured (not one imported) of at least two ranks, as a log
    under ``out``; the paths written."""
    usable = collectives[(collectives["world_size"] >= 2) & (collectives["source"] == MEASURED)]
    if "time_s" in usable:
        usable = usable[usable["time_s"] > 0]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for key, rows in usable.groupby(GROUP, sort=True):
        path = out / file_name(key)
        ids = ", ".join(sorted(set(rows["cell_id"].astype(str))))
        path.write_text(log_text(rows, f"study {study}, cell(s) {ids}"))
        written.append(path)
    return written
