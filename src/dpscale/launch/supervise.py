"""The cell's processes from start to reaping, and what watching them cost.

Outside SLURM a cell holds its devices' bench lock while it measures, so benchmark processes
of different cells never overlap. Its command starts under dpscale.launch.guard (it dies with
the launcher), in a session of its own, and is waited for with a deadline: SIGTERM, a grace
period, then SIGKILL. Whatever the command left behind (ranks that moved to a session of
their own) is found by the cell's token in ``/proc`` and killed.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, TextIO

from dpscale.launch.emulation import interventions
from dpscale.launch.emulation.netns import process_start
from dpscale.plan.cell import Cell
from dpscale.plan.columns import SYSTEM_HOST
from dpscale.runner import startup

TERM_GRACE_S = 15  # after a timeout: SIGTERM (srun passes it to its tasks), then SIGKILL
SCRATCH_PREFIX = ".dpscale-cell-"
SCRATCH_OWNER = "launcher.json"  # in a scratch folder: the launch that made it


@contextmanager
def bench_lock(cell: Cell, log, shared: bool = False) -> Iterator[None]:
    """This machine's lock for the cell's devices (its CPUs, or the visible GPUs), held while
    the block runs; waits, and says so in ``log``, while another cell holds it.

    A local cell takes it exclusively. A cell inside a SLURM job (``shared``) takes it
    shared: the scheduler keeps jobs apart on their own CPUs, so jobs do not wait for each
    other, but a local cell and a job's cell on one machine (a study beside ``make test``'s
    SLURM cluster) wait for each other. The file is opened read-only (created readable by
    all where missing), so another user's lock file still locks; a job that cannot open it
    (a per-job temporary folder elsewhere, no permission) measures without it and says so."""
    scope = (
        "cpu"
        if cell.accelerator == "cpu"
        else "gpu-" + os.environ.get("CUDA_VISIBLE_DEVICES", "all")
    )
    path = (
        Path(os.environ.get("DPSCALE_LOCK_DIR", tempfile.gettempdir()))
        / f"dpscale-bench-{scope.replace(',', '_')}.lock"
    )
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError as error:
        if not shared:
            raise
        print(f"[dpscale] cannot open {path} ({error}); measuring without it", file=log)
        yield
        return
    with os.fdopen(descriptor, "rb") as handle:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(handle, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[dpscale] waiting for {path} (another cell is measuring)", file=log, flush=True)
            waited = time.monotonic()
            fcntl.flock(handle, mode)
            print(
                f"[dpscale] lock acquired after {time.monotonic() - waited:.0f} s",
                file=log,
                flush=True,
            )
        yield


@contextmanager
def scratch_folder(root: Path | None, log: TextIO) -> Iterator[Path]:
    """The cell's scratch folder under ``root`` (the temporary folder where None), removed
    when the block ends. A launcher killed with SIGKILL cannot remove it, so each records
    its host, pid and start time inside, and each launch first removes the folders beside
    its own whose launcher on this host is gone. A folder without a record is left alone."""
    parent = Path(root or tempfile.gettempdir())
    removed = reap_scratch(parent)
    if removed:
        print(f"[dpscale] removed scratch folders of launchers that died: {removed}", file=log)
    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX, dir=parent) as scratch:
        _record_launcher(Path(scratch))
        yield Path(scratch)


def _record_launcher(folder: Path) -> None:
    """Write this launch's host, pid and start time into ``folder`` (whole or not at all)."""
    owner = {
        SYSTEM_HOST: socket.gethostname(),
        "pid": os.getpid(),
        "start": process_start(os.getpid()),
    }
    partial = folder / f".{SCRATCH_OWNER}.partial"
    partial.write_text(json.dumps(owner))
    partial.replace(folder / SCRATCH_OWNER)


def reap_scratch(parent: Path) -> list[str]:
    """Remove the scratch folders in ``parent`` whose recorded launcher ran on this host and
    no longer runs; their names. A launcher on another node (a shared file system) is not
    judged here. Two launches reaping at once remove each folder once: the one that locks
    its record first removes it, the other leaves it (and does not name it)."""
    host, removed = socket.gethostname(), []
    for folder in sorted(parent.glob(SCRATCH_PREFIX + "*")):
        # no record (yet, or not dpscale's): the open fails and the folder is left alone
        with suppress(OSError), open(folder / SCRATCH_OWNER, "rb") as record:
            if _launcher_gone(record, host) and _claimed(record):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder.name)
    return removed


def _launcher_gone(record: BinaryIO, host: str) -> bool:
    """Whether the scratch folder's ``record`` names a launcher on ``host`` that no longer
    runs (an unreadable record: no)."""
    try:
        owner = json.loads(record.read())
        pid, start = int(owner["pid"]), owner["start"]
    except (ValueError, TypeError, KeyError):
        return False
    return owner.get(SYSTEM_HOST) == host and process_start(pid) != start


def _claimed(record: BinaryIO) -> bool:
    """This launch's alone to remove (a lock on its record, held until it closes), and not
    removed meanwhile by another launch that held it."""
    try:
        fcntl.flock(record, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # another launch is removing it
    return os.fstat(record.fileno()).st_nlink > 0


def guarded(command: list[str], memory_limit_mb: int | None) -> list[str]:
    """The command as dpscale.launch.guard starts it: killed if this launcher dies (so are
    its ranks, runner.faults.exit_with_parent), under an address-space cap when the cell sets
    one."""
    cap = [] if memory_limit_mb is None else [f"--memory-mb={memory_limit_mb}"]
    return [sys.executable, "-m", "dpscale.launch.guard", *cap, "--", *command]


def run_with_deadline(
    command: list[str], env: dict[str, str], log: TextIO, timeout_s: int
) -> int | None:
    """Run ``command`` in a session of its own, output to ``log``; its exit status, or None
    when it ran past ``timeout_s`` and was stopped."""
    process = subprocess.Popen(
        command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        return wait_without_polling(process, timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)  # srun and torchrun pass it on to the ranks
        try:
            process.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return None
    except BaseException:
        os.killpg(process.pid, 9)  # Ctrl-C or SIGTERM from Snakemake: take the ranks down too
        raise


def wait_without_polling(process: subprocess.Popen, timeout_s: float) -> int:
    """Wait without polling: ``Popen.wait(timeout)`` wakes up every 50 ms; a thread blocked
    in ``waitpid`` and a timed join cost nothing while the runner runs."""
    waiter = threading.Thread(target=process.wait, name="wait-runner", daemon=True)
    waiter.start()
    waiter.join(timeout_s)
    if waiter.is_alive():
        raise subprocess.TimeoutExpired(process.args, timeout_s)
    return process.returncode


def processes_with(token: str) -> list[int]:
    """Pids of this machine's processes whose environment holds ``DPSCALE_CELL_TOKEN=token``
    (every process a launch starts inherits it, whatever session or group it moves to)."""
    return interventions.processes_with(f"DPSCALE_CELL_TOKEN={token}")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "?"


def reap_leftovers(token: str, log, wait_s: float = 5.0) -> int:
    """Kill what a cell left behind after its launcher exited (ranks that a launcher moved
    to their own session, such as horovodrun's, survive a kill of its group); bounded."""
    leftovers = processes_with(token)
    described = [f"{pid} {_cmdline(pid)[:160]}" for pid in leftovers]
    for pid in leftovers:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    if leftovers:
        print(f"[dpscale] killed {len(leftovers)} leftover process(es): {described}", file=log)
    return len(leftovers)


def launcher_footprint(proc: Path = Path("/proc")) -> dict[str, float | None]:
    """This process's wall time since it was started (interpreter start-up included; the
    kernel's start time has clock-tick resolution) and its peak memory and that of its
    largest child (``getrusage``: the children that have been waited for)."""
    started = startup.process_start_time(proc)
    wall_s = round(time.time() - started, 3) if started is not None else None
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"wall_s": wall_s, "max_rss_mb": round(own, 1), "max_child_rss_mb": round(children, 1)}
