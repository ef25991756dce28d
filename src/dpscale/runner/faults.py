"""A deadline on a cell's first collective, the test-only fault hook that exercises it, and
ranks that exit when their launcher is gone.

Every rank of a multi-process cell marks its arrival (a file in the launch's scratch folder,
``DPSCALE_SCRATCH``, shared by all nodes under SLURM) just before its first training step,
whose gradient all-reduce (or kvstore push/pull) needs every rank. If that step has not
finished ``measure.collective_timeout_s`` after a rank arrived, the rank names the ranks
whose marks are missing in one line (``rank 1 did not reach the collective within 30 s``)
and exits with :data:`MISSED_EXIT`; the launcher reads that line into the cell's reason and
the launch kind's launcher stops the other ranks. Collectives after the first are left to
the frameworks' own timeouts (torch.distributed's process-group timeout,
``HOROVOD_GLOO_TIMEOUT_SECONDS``), which the adapters set from the same key.

``DPSCALE_FAULT=hang_rank:N`` (tests only; inert unless set) makes rank N sleep before its
first step for ``hang_s`` seconds, as a rank stuck in data loading or a deadlock would.

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

FAULT_ENV = "DPSCALE_FAULT"
MISSED_EXIT = 3
ORPHANED_EXIT = 4

Step = Callable[[], None]


def hangs(rank: int) -> bool:
    """Whether the test-only fault hook asks this rank to hang before its first step."""
    return os.environ.get(FAULT_ENV, "") == f"hang_rank:{rank}"


def arrivals_folder(out: Path) -> Path:
    scratch = os.environ.get("DPSCALE_SCRATCH")
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


def first_collective_deadline(
    step: Step, sync: Step, rank: int, size: int, timeout_s: int, folder: Path, hang_s: float
) -> tuple[Step, Step]:
    """``step`` and ``sync`` with a deadline from this rank's first step to the first sync
    after it (the first step's collective has then finished on this rank)."""
    timer: list[threading.Timer] = []

    def guarded_step() -> None:
        if not timer:
            if hangs(rank):
                time.sleep(hang_s)
            (folder / f"arrived.rank{rank}").touch()
            timer.append(threading.Timer(timeout_s, _expire, (folder, rank, size, timeout_s)))
            timer[0].daemon = True
            timer[0].start()
        step()

    def guarded_sync() -> None:
        sync()
        if timer:
            timer[0].cancel()

    return guarded_step, guarded_sync


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
