"""What the launcher does to this machine while a cell measures (config ``interventions``),
to check the loss breakdown term by term (docs/decisions/loss-breakdown-interventions.md).

- ``cpus``: the launcher's CPU affinity, which every process it starts inherits (more ranks
  per core: the contention term);
- ``slow_rank``: one rank of emulated nodes capped at a fraction of one core by a cgroup CPU
  quota (a straggler: the waiting term). The rank is the task netns_run starts with
  ``SLURM_PROCID`` = its index; a thread moves every process of this launch that carries it
  into the cgroup (an emulated node's mount namespace hides /sys/fs/cgroup from the ranks,
  so the launcher, outside, does it), from the start until the cell ends.

Stdlib only; needs root, as emulated nodes do.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

from dpscale.plan.cell import Cell

CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
CGROUP_V2 = Path("/sys/fs/cgroup")
PERIOD_US = 100_000  # the quota's period: 100 ms, the kernel's default
MOVE_EVERY_S = 0.1  # how often the slowed rank's new processes are moved into the cgroup
TASK_ENV = "SLURM_PROCID"  # which task of netns_run a process belongs to


def cgroup_root() -> tuple[Path, str] | None:
    """Where this machine lets a CPU quota be set: (folder, ``v1`` or ``v2``), or None."""
    if (CGROUP_V1_CPU / "cpu.cfs_quota_us").exists() and os.access(CGROUP_V1_CPU, os.W_OK):
        return CGROUP_V1_CPU, "v1"
    controllers = CGROUP_V2 / "cgroup.subtree_control"
    writable = os.access(CGROUP_V2, os.W_OK)
    if controllers.exists() and "cpu" in controllers.read_text().split() and writable:
        return CGROUP_V2, "v2"
    return None


def unavailable(cell: Cell) -> str | None:
    """Why this machine cannot apply the cell's interventions, or None."""
    wanted = cell.interventions
    if wanted.cpus is not None:
        have = sorted(os.sched_getaffinity(0))
        missing = sorted(set(wanted.cpus) - set(have))
        if missing:
            return f"interventions.cpus: cores {missing} are not this machine's; it has {have}"
    if wanted.slow_rank is None or wanted.slow_rank >= cell.world_size:
        return None  # a cell smaller than the slowed rank runs as it is
    if not (cell.nodes > 1 and cell.network.emulated):
        return (
            "interventions.slow_rank: applied on emulated nodes only (their launcher starts "
            "each rank as a task); this cell runs on one node or a real network"
        )
    if cgroup_root() is None:
        return (
            "interventions.slow_rank: no writable cgroup CPU controller here "
            f"({CGROUP_V1_CPU}/cpu.cfs_quota_us or {CGROUP_V2}/cpu.max; needs root)"
        )
    return None


def processes_with(*pairs: str) -> list[int]:
    """Pids of this machine's processes whose environment holds every ``NAME=value`` of
    ``pairs`` (but this one's)."""
    wanted = [pair.encode() for pair in pairs]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        if all(pair in environ for pair in wanted):
            found.append(int(entry.name))
    return found


class SlowedRank:
    """A cgroup capped at ``fraction`` of one core, and the thread that moves the slowed
    rank's processes of one launch (``token``) into it."""

    def __init__(self, rank: int, fraction: float, token: str) -> None:
        root, self.version = cgroup_root() or (None, "")
        if root is None:
            raise RuntimeError("no writable cgroup CPU controller")
        self.folder = root / f"dpscale-slow-{uuid.uuid4().hex[:12]}"
        self.rank, self.fraction, self.token = rank, fraction, token
        self.moved: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.folder.mkdir()
        quota = int(self.fraction * PERIOD_US)
        if self.version == "v1":
            (self.folder / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.folder / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (self.folder / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.move_new()
            self._stop.wait(MOVE_EVERY_S)

    def move_new(self) -> None:
        """Every process of the slowed rank not moved yet, into the cgroup (a process's
        threads go with it; its children are born inside)."""
        pids = processes_with(f"DPSCALE_CELL_TOKEN={self.token}", f"{TASK_ENV}={self.rank}")
        for pid in set(pids) - self.moved:
            with suppress(OSError):  # gone meanwhile
                (self.folder / "cgroup.procs").write_text(str(pid))
                self.moved.add(pid)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the cgroup is removed once its processes ended
            try:
                self.folder.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)

    def record(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "cpu_fraction": self.fraction,
            "cgroup": self.version,
            "period_us": PERIOD_US,
            "processes_moved": len(self.moved),
        }


@contextmanager
def applied(cell: Cell, token: str, log: TextIO) -> Iterator[dict[str, Any]]:
    """The cell's interventions, in force while the block runs; yields what was applied
    (the result's ``system.interventions``), filled in as the block ends."""
    wanted, record = cell.interventions, {}
    before = os.sched_getaffinity(0)
    slowed = None
    if wanted.cpus is not None:
        os.sched_setaffinity(0, wanted.cpus)  # every process started from here inherits it
        record["cpus"] = sorted(wanted.cpus)
    if wanted.slow_rank is not None and wanted.slow_rank < cell.world_size:
        slowed = SlowedRank(wanted.slow_rank, wanted.slow_fraction, token)
        slowed.start()
        print(
            f"[dpscale] rank {wanted.slow_rank} capped at {wanted.slow_fraction:g} of a "
            f"core ({slowed.folder})",
            file=log,
            flush=True,
        )
    try:
        yield record
    finally:
        if slowed is not None:
            slowed.stop()
            record["slow_rank"] = slowed.record()
        if wanted.cpus is not None:
            os.sched_setaffinity(0, before)
