"""Start-up, from the launch to the first timed window, with the clock read at each boundary.

Each rank reads ``time.time()`` at every boundary it passes (the first reading of a name
counts); rank 0 then turns every rank's readings into phases. The origin is the launcher's
clock just before it started the cell's command (``DPSCALE_LAUNCH_TIME``); the rank's own
process start comes from the kernel (``/proc/self/stat``, clock-tick resolution).

Phases, each ending at its boundary (MLPerf's ``init_start`` is the launch; its ``init_stop``
and ``run_start`` fall at the end of ``broadcast``):

- ``launch``: the launcher (torchrun, horovodrun, mxnet_ps, srun) started this process;
- ``import``: interpreter, dpscale and the framework imported;
- ``init``: process group, Horovod or kvstore joined, then a first barrier, so a lazily
  created communicator is made here and not in the first step;
- ``build``: the model built and moved to its device;
- ``broadcast``: rank 0's parameters on every rank (where the framework does it eagerly);
- ``first_step``: the first step (graph tracing and compilation, autotuning);
- ``warmup``: the remaining warm-up steps, up to the first timed window.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dpscale.plan.result import STARTUP_PHASES as PHASES
from dpscale.runner.faults import FAULT_ENV

LAUNCH_TIME_ENV = "DPSCALE_LAUNCH_TIME"
# the boundary that ends each phase, in order
BOUNDARIES = ("started", "imported", "initialised", "built", "broadcast", "first_step", "window")
# test-only: DPSCALE_FAULT=stall_init:N makes rank N sleep this long inside its init phase
STALL_INIT_S = 3.0

_readings: dict[str, float] = {}


def mark(boundary: str, at: float | None = None) -> None:
    """Read the clock (or take ``at``) at ``boundary``, one of BOUNDARIES; only the first
    reading of a boundary counts."""
    if boundary not in BOUNDARIES:
        raise ValueError(f"unknown start-up boundary {boundary!r}; allowed: {BOUNDARIES}")
    _readings.setdefault(boundary, time.time() if at is None else at)


def first_barrier(rank: int, barrier: Callable[[], Any]) -> None:
    """End the init phase with the framework's first barrier (every rank has joined)."""
    if os.environ.get(FAULT_ENV, "") == f"stall_init:{rank}":
        time.sleep(STALL_INIT_S)  # a rank slow to initialise, as a slow node or driver would
    barrier()
    mark("initialised")


def process_start_time(proc: Path = Path("/proc")) -> float | None:
    """This process's start (``time.time()`` scale) from the kernel; None where unknown."""
    try:
        ticks = int((proc / "self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float((proc / "uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def readings() -> dict[str, float | None]:
    """This rank's clock readings: the launch, its process start and every boundary passed."""
    launch = os.environ.get(LAUNCH_TIME_ENV)
    return {
        "launch": float(launch) if launch else None,
        **{b: _readings.get(b) for b in BOUNDARIES},
        "started": _readings.get("started") or process_start_time(),
    }


def boundary_times(every: Sequence[Mapping[str, float | None]]) -> dict[str, float]:
    """The cell's boundaries: each when its last rank passed it (a synchronous job moves on
    only then); a boundary no rank passed (a strategy without that step) takes the previous
    one's time, and never comes before it."""
    origin = [r["launch"] for r in every if r.get("launch") is not None]
    times = {"launch": min(origin) if origin else min(r["started"] or 0.0 for r in every)}
    previous = times["launch"]
    for boundary in BOUNDARIES:
        passed = [r[boundary] for r in every if r.get(boundary) is not None]
        previous = max([previous, *passed])
        times[boundary] = previous
    return times


def phases(every: Sequence[Mapping[str, float | None]]) -> dict[str, Any]:
    """The cell's start-up: phase lengths (s), their sum (launch to the first window) and
    every rank's own readings relative to the launch."""
    times = boundary_times(every)
    starts = ("launch", *BOUNDARIES[:-1])
    lengths = {
        p: times[end] - times[start]
        for p, start, end in zip(PHASES, starts, BOUNDARIES, strict=True)
    }
    origin = times["launch"]
    return {
        "launch_time": origin,
        "launch_time_known": any(r.get("launch") is not None for r in every),
        "phases_s": lengths,
        "to_first_window_s": times["window"] - origin,
        # MLPerf's log points, as seconds after init_start (the launch)
        "mlperf_s": {
            "init_stop": times["broadcast"] - origin,
            "run_start": times["window"] - origin,
        },
        "per_rank_s": [
            {b: (r[b] - origin if r.get(b) is not None else None) for b in BOUNDARIES}
            for r in every
        ],
    }


# mlperf-logging's event types of the three points (its INTERVAL_START/END pairs)
MLLOG_POINTS = (
    ("init_start", "INTERVAL_START"),
    ("init_stop", "INTERVAL_END"),
    ("run_start", "INTERVAL_START"),
)


def mllog_lines(summary: Mapping[str, Any]) -> list[str]:
    """MLPerf's ``:::MLLOG`` lines (mlperf-logging's format) for init_start (the launch),
    init_stop and run_start, from :func:`phases`: what MLPerf's tools read from a log."""
    offsets = {"init_start": 0.0, **summary["mlperf_s"]}
    return [
        ":::MLLOG "
        + json.dumps(
            {
                "namespace": "",
                "time_ms": round((summary["launch_time"] + offsets[key]) * 1000),
                "event_type": kind,
                "key": key,
                "value": None,
                "metadata": {"file": __file__, "lineno": 0},
            }
        )
        for key, kind in MLLOG_POINTS
    ]
