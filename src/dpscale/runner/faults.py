"""Deadlines that turn a hung rank into a failed cell naming it, the test-only fault hooks
that exercise them, and ranks that exit when their launcher is gone.

First collective: every rank of a multi-process cell marks its arrival (a file in the
launch's scratch folder, ``DPSCALE_SCRATCH``, shared by all nodes under SLURM) just before
its first step (synthetic, training, or the first all-reduce of collectives mode), whose
gradient all-reduce (or kvstore push/pull) needs every rank. If that step has not finished
``measure.collective_timeout_s`` after a rank arrived, the rank names the ranks whose marks
are missing in one line (``rank 1 did not reach the collective within 30 s``) and exits with
:data:`MISSED_EXIT`; the launcher reads that line into the cell's reason and the launch
kind's launcher stops the other ranks.

Later collectives: torch.distributed and Horovod end them at their own timeouts, which the
adapters set to twice ``measure.collective_timeout_s``. ps-lite has none: for such ranks a
:class:`StepWatchdog` with the same bound names the rank that stopped stepping
(``rank 1 stopped after step 4: rank 0 waited 30 s at step 5``) and exits with
:data:`STALLED_EXIT`.

``DPSCALE_FAULT=hang_rank:N`` (tests only; inert unless set) makes rank N sleep before its
first step, as a rank stuck in data loading or a deadlock would; ``stall_rank:N`` makes it
sleep after its first step, as a worker that stops pushing would.

:func:`exit_with_parent`: a rank whose parent (torchrun, horovodrun's shell, mxnet_ps, or
dpscale.launch itself) dies exits within a second instead of measuring on as an orphan,
unlocked, next to the rerun of its own cell. dpscale.launch.guard makes the launchers die with
dpscale.launch, so a SIGKILL of the launcher (or of Snakemake and its jobs) ends every rank.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dpscale.runner.temporary import SCRATCH_VARIABLE

FAULT_ENV = "DPSCALE_FAULT"
MISSED_EXIT = 3
ORPHANED_EXIT = 4
STALLED_EXIT = 5

T = TypeVar("T")


def hangs(rank: int) -> bool:
    """Whether the test-only fault hook asks this rank to hang before its first step."""
    return os.environ.get(FAULT_ENV, "") == f"hang_rank:{rank}"


def arrivals_folder(out: Path) -> Path:
    scratch = os.environ.get(SCRATCH_VARIABLE)
    folder = Path(scratch) if scratch else out.resolve().parent / f".{out.name}.arrivals"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def missing_ranks(folder: Path, size: int) -> list[int]:
    return [r for r in range(size) if not (folder / f"arrived.rank{r}").exists()]


def missed_line(missing: list[int], timeout_s: int) -> str:
    who = f"rank {missing[0]}" if len(missing) == 1 else f"ranks {', '.join(map(str, missing))}"
    return f"{who} did not reach the collective within {timeout_s} s"


def _expire(folder: Path, rank: int, size: int, timeout_s: int) -> None:
    missing = missing_ranks(folder, size)
    if missing:
        message = missed_line(missing, timeout_s)
    else:
        message = f"every rank arrived, the first collective did not finish within {timeout_s} s"
    print(f"[dpscale rank {rank}] {message}", file=sys.stderr, flush=True)
    os._exit(MISSED_EXIT)


class FirstCollectiveDeadline:
    """One rank's deadline on the cell's first collective: :meth:`arrive` just before it
    (marks the arrival, starts the clock), :meth:`passed` once it has finished here."""

    def __init__(self, rank: int, size: int, timeout_s: int, folder: Path, hang_s: float):
        self.rank, self.size, self.timeout_s, self.folder = rank, size, timeout_s, folder
        self.hang_s = hang_s
        self.timer: threading.Timer | None = None

    @property
    def arrived(self) -> bool:
        return self.timer is not None

    @property
    def pending(self) -> bool:
        """Arrived, and the first collective has neither passed nor expired."""
        return self.timer is not None and not self.timer.finished.is_set()

    def arrive(self) -> None:
        if hangs(self.rank):
            time.sleep(self.hang_s)
        (self.folder / f"arrived.rank{self.rank}").touch()
        args = (self.folder, self.rank, self.size, self.timeout_s)
        self.timer = threading.Timer(self.timeout_s, _expire, args)
        self.timer.daemon = True
        self.timer.start()

    def passed(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def stalls(rank: int) -> bool:
    """Whether the test-only fault hook asks this rank to stop after its first step."""
    return os.environ.get(FAULT_ENV, "") == f"stall_rank:{rank}"


class StepWatchdog:
    """For frameworks with no timeout of their own on collectives (ps-lite): a rank that has
    waited in one step (or the sync after steps) longer than ``bound_s`` names the ranks
    that stopped stepping and exits (:data:`STALLED_EXIT`).

    Each rank counts the steps it entered in a file of the launch's scratch folder; the
    ranks behind the others are the ones that stopped. The clock runs only inside the calls
    :meth:`call` wraps, so time between steps (evaluation, writing the result) never counts.
    """

    def __init__(self, rank: int, size: int, bound_s: float, folder: Path, stall_s: float):
        self.rank, self.size, self.bound_s, self.folder = rank, size, bound_s, folder
        self.stall_s = stall_s
        self.entered = 0
        self.waiting_since: float | None = None
        self.thread: threading.Thread | None = None

    def step(self, call: Callable[..., T], *args: Any) -> T:
        """Enter the next step (counted for the others to see), then run it under the clock."""
        if self.entered == 1 and stalls(self.rank):
            time.sleep(self.stall_s)
        self.entered += 1
        (self.folder / f"steps.rank{self.rank}").write_text(str(self.entered))
        return self.call(call, *args)

    def call(self, call: Callable[..., T], *args: Any) -> T:
        """Run ``call`` under the clock (a step, a sync, a reduction over the ranks)."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._watch, name="dpscale-steps", daemon=True)
            self.thread.start()
        self.waiting_since = time.monotonic()
        try:
            return call(*args)
        finally:
            self.waiting_since = None

    def _watch(self) -> None:
        poll_s = min(1.0, self.bound_s / 10)
        while True:
            time.sleep(poll_s)
            since = self.waiting_since
            if since is not None and time.monotonic() - since > self.bound_s:
                self._expire()

    def _expire(self) -> None:
        counts = {r: _steps_entered(self.folder, r) for r in range(self.size)}
        message = stalled_line(counts, self.rank, self.bound_s)
        print(f"[dpscale rank {self.rank}] {message}", file=sys.stderr, flush=True)
        os._exit(STALLED_EXIT)


def stalled_line(steps_entered: dict[int, int], rank: int, bound_s: float) -> str:
    """What a rank whose step waited ``bound_s`` says: the ranks that entered fewer steps
    than the others stopped (they never sent what this step waits for)."""
    ahead = max(steps_entered.values())
    behind = sorted(r for r, count in steps_entered.items() if count < ahead)
    if not behind:
        return f"every rank entered step {ahead}; it did not end within {bound_s:.0f} s"
    who = f"rank {behind[0]}" if len(behind) == 1 else f"ranks {', '.join(map(str, behind))}"
    return (
        f"{who} stopped after step {steps_entered[behind[0]]}: rank {rank} waited "
        f"{bound_s:.0f} s at step {ahead}"
    )


def _steps_entered(folder: Path, rank: int) -> int:
    try:
        return int((folder / f"steps.rank{rank}").read_text() or 0)
    except (OSError, ValueError):
        return 0


def exit_with_parent(poll_s: float = 0.5) -> threading.Thread:
    """Exit (:data:`ORPHANED_EXIT`) as soon as this process's parent is gone (it was
    re-parented); a daemon thread, started once by every runner (runner.support)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        print(f"[dpscale] parent {parent} is gone; exiting", file=sys.stderr, flush=True)
        os._exit(ORPHANED_EXIT)

    thread = threading.Thread(target=watch, name="dpscale-exit-with-parent", daemon=True)
    thread.start()
    return thread
