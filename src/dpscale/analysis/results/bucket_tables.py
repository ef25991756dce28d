"""Bucket-timeline tables: when each gradient bucket is ready in backward (one row per
cell and bucket), and per cell how much communication backward left exposed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.results.rows import no_remedy
from dpscale.analysis.results.tables import cell_row
from dpscale.plan.columns import DEVICES_PER_NODE, NETWORK, NODES, PLACEMENT, RUN, WORLD_SIZE

# One row per (cell, gradient bucket) of a bucket timeline (result measurement.bucket_timeline):
# the step's parts and the bucket's ready time, medians over the timeline's steps; the
# precision and the device (``gpus``, empty on CPU) last, so a profile table made of several
# studies' timelines (config published_cases.profile) says what each one timed
TIMELINE_CELL = ["cell_id", *RUN, *PLACEMENT, "batch_per_device", "comm"]
TIMELINE_DEVICE = ["precision", "gpus"]
TIMELINE_COLUMNS = [
    *TIMELINE_CELL,
    "steps",
    "forward_s",
    "backward_s",
    "optimizer_s",
    "bucket",
    "bucket_bytes",
    "bucket_parameters",
    "ready_s",
    "ready_lo_s",
    "ready_hi_s",
    "last_ready_s",
    "exposed_s",
    *TIMELINE_DEVICE,
]


TIMELINE_PARTS = ("forward_s", "backward_s", "optimizer_s")


def _timeline_step_columns(timeline: dict[str, Any]) -> dict[str, Any]:
    """A cell's step parts (medians over steps), its last bucket's ready time, and the
    communication left after it (backward - last ready, at least 0, median over steps)."""
    last = np.asarray(timeline["buckets"][-1]["ready_s"], dtype=float)
    backward = np.asarray(timeline["backward_s"], dtype=float)
    return {
        "steps": timeline["steps"],
        **{part: float(np.median(timeline[part])) for part in TIMELINE_PARTS},
        "last_ready_s": float(np.median(last)),
        "exposed_s": float(np.median(np.maximum(backward - last, 0.0))),
    }


def _timeline_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    timeline = (result.get("measurement") or {}).get("bucket_timeline")
    if result["status"] != "ok" or not timeline:
        return []
    row = cell_row(result)
    base = {k: row[k] for k in (*TIMELINE_CELL, *TIMELINE_DEVICE)}
    steps = _timeline_step_columns(timeline)
    return [
        {
            **base,
            **steps,
            "bucket": bucket["index"],
            "bucket_bytes": bucket["bytes"],
            "bucket_parameters": bucket["parameters"],
            "ready_s": float(np.median(bucket["ready_s"])),
            "ready_lo_s": float(min(bucket["ready_s"])),
            "ready_hi_s": float(max(bucket["ready_s"])),
        }
        for bucket in timeline["buckets"]
    ]


def bucket_timeline_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (cell, gradient bucket) of the ok cells with a bucket timeline (torch-ddp
    synthetic cells): when each bucket is ready in backward, and how much of backward is
    left after the last one (``exposed_s``: communication the backward pass did not hide)."""
    rows = [row for result in results for row in _timeline_rows(result)]
    return pd.DataFrame(rows, columns=TIMELINE_COLUMNS)


TIMELINE_SUMMARY_COLUMNS = [
    "cell_id",
    NODES,
    NETWORK,
    WORLD_SIZE,
    "batch_per_device",
    "comm",
    "forward_s",
    "backward_s",
    "optimizer_s",
    "buckets_ready",
    "last_ready_s",
    "compute_vs_one",
    "exposed_s",
    "replay_s",
    "hidden_s",
]
# what a cell computes before its last bucket is ready: forward, then backward up to it
COMPUTE_PARTS = ("forward_s", "last_ready_s")


def timeline_summary(timeline: pd.DataFrame, replay: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of bucket_timeline.csv: its step's parts, when each bucket was
    ready, the communication the backward pass left exposed, and, where the collectives
    cell replayed the same traffic on the same link and ranks (gradient_replay.csv), the
    all-reduce time alone and the share of it hidden (replay - exposed)."""
    if timeline.empty:
        return pd.DataFrame(columns=TIMELINE_SUMMARY_COLUMNS)
    rows = [_timeline_cell(cell) for _, cell in timeline.groupby("cell_id", sort=False)]
    frame = pd.DataFrame(rows)
    keys = ["strategy", NODES, DEVICES_PER_NODE, NETWORK, "comm"]
    if not replay.empty and set(keys) <= set(replay.columns):
        alone = replay[replay["quality"].fillna("ok") != "contaminated"]
        alone = alone.groupby(keys, as_index=False)["step_s"].median()
        frame = frame.merge(alone.rename(columns={"step_s": "replay_s"}), on=keys, how="left")
    frame["replay_s"] = frame.get("replay_s", math.nan)
    frame["hidden_s"] = np.where(
        frame["world_size"] > 1, frame["replay_s"] - frame["exposed_s"], math.nan
    )
    frame["compute_vs_one"] = compute_vs_one(timeline)
    return frame.reindex(columns=TIMELINE_SUMMARY_COLUMNS)


def compute_vs_one(timeline: pd.DataFrame) -> list[float]:
    """Per cell (in the order of ``timeline``'s cells), forward + backward up to the last
    bucket against one process's at the same strategy, model and batch (no remedy): above 1
    where ranks on one machine slow each other's compute (or a remedy's hook adds work)."""
    keys = ["strategy", "model", "batch_per_device"]
    cells = timeline.drop_duplicates("cell_id")
    cells = cells.assign(compute=cells[list(COMPUTE_PARTS)].sum(axis=1))
    one = cells[(cells["world_size"] == 1) & no_remedy(cells["comm"])]
    base = one.groupby(keys, as_index=False)["compute"].median().rename(columns={"compute": "one"})
    merged = cells.merge(base, on=keys, how="left")  # keeps the cells' order
    return list(merged["compute"] / merged["one"])


def _timeline_cell(cell: pd.DataFrame) -> dict[str, Any]:
    first = cell.iloc[0]
    ready = "; ".join(
        f"{size / 1e6:.1f} MB at {at * 1e3:.0f} ms"
        for size, at in zip(cell["bucket_bytes"], cell["ready_s"], strict=True)
    )
    return {
        **{k: first[k] for k in TIMELINE_CELL if k != "model"},
        **{k: first[k] for k in ("forward_s", "backward_s", "optimizer_s", "last_ready_s")},
        "buckets_ready": ready,
        "exposed_s": first["exposed_s"] if first["world_size"] > 1 else math.nan,
    }
