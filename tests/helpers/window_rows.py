"""One row of windows.csv as the communication model reads it: the tests' fake windows."""

from __future__ import annotations

from typing import Any


def window_row(
    nodes: int,
    devices: int,
    network: str,
    batch: int,
    step_time_s: float,
    window: int = 0,
    strategy: str = "torch-ddp",
    **more: Any,
) -> dict[str, Any]:
    """A synthetic, ok window of model "m" at this layout and batch; ``more``: other columns."""
    return {
        "strategy": strategy,
        "model": "m",
        "mode": "synthetic",
        **more,
        "nodes": nodes,
        "network": network,
        "devices_per_node": devices,
        "world_size": nodes * devices,
        "batch_per_device": batch,
        "quality": "ok",
        "window": window,
        "step_time_s": step_time_s,
    }
