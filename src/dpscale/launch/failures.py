"""Why a cell did not measure, and the result that says so.

A runner that exits non-zero, times out or writes no (valid) result leaves a log; this module
reads this launch's part of it, tells out of memory from a rank that missed a collective,
stalled or raised, and writes the ``oom``, ``failed`` or ``skipped`` result with that reason
and the log's tail. Kept apart from the launcher, which only decides when to call it.
"""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema

from dpscale.launch.kinds import kind
from dpscale.launch.rank_exits import exit_signal, first_cause, in_causal_order
from dpscale.plan.cell import Cell
from dpscale.plan.result import make_result, read_result, write_result
from dpscale.registry import strategy
from dpscale.runner.sysinfo import describe_system

# Out of memory as the C++ and Python runtimes and the kernel say it; each strategy adds its
# framework's own messages (Strategy.oom_patterns).
OOM_PATTERNS = (
    r"out of memory",
    r"std::bad_alloc",
    r"MemoryError",
    r"can't allocate memory",
    r"Cannot allocate memory",
)
# A rank's own deadline before its first collective (dpscale.runner.measure) names the ranks
# that never arrived; that line is the reason, whatever the launcher says after it.
COLLECTIVE_TIMEOUT = re.compile(r"ranks? [\d, ]+ did not reach the collective within \d+ s")
# ... and the step watchdog of frameworks without collective timeouts (runner.faults) names
# the ranks that stopped stepping
STALLED = re.compile(
    r"ranks? [\d, ]+ stopped after step \d+: rank \d+ waited \d+ s at step \d+"
    r"|every rank entered step \d+; it did not end within \d+ s"
)
LOG_TAIL_CHARS = 4000  # kept in a failed result
OOM_WORDS_CHARS = 240  # of the framework's out-of-memory line, in the reason
# read to tell why a cell failed: a rank's exception can precede pages of launcher output
CLASSIFY_CHARS = 1_000_000
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception): \S")


def log_size(path: Path) -> int:
    """Where this launch's part of the (appended-to) log begins."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def log_since(path: Path, start: int = 0, limit: int = LOG_TAIL_CHARS) -> str:
    """The end of what this launch wrote to the (appended-to) log."""
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            return handle.read().decode(errors="replace")[-limit:]
    except OSError:
        return ""


def classify_failure(
    returncode: int,
    log_text: str,
    oom_patterns: tuple[str, ...] = (),
    rank_prefix: str | None = None,
) -> tuple[str, str]:
    """``oom`` when the log says memory ran out (the runtimes' words and ``oom_patterns``),
    else ``failed`` with the first exception a rank raised (``rank_prefix`` stripped)."""
    prefix = re.compile(f"^(?:{rank_prefix})") if rank_prefix else None
    lines = [(prefix.sub("", line) if prefix else line).strip() for line in log_text.splitlines()]
    oom = re.compile("|".join((*OOM_PATTERNS, *oom_patterns)), re.IGNORECASE)
    said = next((line for line in lines if oom.search(line)), None)
    if said is not None:
        return "oom", f"ran out of memory: {oom_words(said)}"
    lines = [line for line in lines if line]
    errors = [line for line in lines if EXCEPTION_LINE.match(line)]
    detail = (errors or lines or ["no output"])[0 if errors else -1][:300]
    return "failed", f"runner exited with code {returncode}: {detail}"


def oom_words(line: str) -> str:
    """The framework's out-of-memory line, its first three sentences at most: what ran out,
    what it tried to allocate and what the device had ("CUDA out of memory. Tried to
    allocate 12.25 GiB. GPU 0 has a total capacity of 139.80 GiB of which 4.28 GiB is
    free"), not its advice."""
    sentences = re.split(r"(?<=[.;])\s+", line.strip())
    return " ".join(sentences[:3])[:OOM_WORDS_CHARS].rstrip(" .;")


def failure_reason(cell: Cell, returncode: int, log_text: str) -> tuple[str, str]:
    """Status and reason of a runner that exited non-zero: out of memory (with the batch),
    a rank that missed the first collective or stopped stepping (runner.faults' own lines),
    the rank that ended first, killed by a signal, and those that followed (launch.rank_exits),
    else the first exception a rank raised (after the ranks' ends, when the launcher names
    them)."""
    plan = strategy(cell.strategy)
    launch_kind = kind(plan.launch)
    status, reason = classify_failure(
        returncode, log_text, plan.oom_patterns, launch_kind.rank_prefix
    )
    if status == "oom":
        return status, (
            f"ran out of memory at batch {cell.batch_per_device} per device "
            f"(global {cell.global_batch}): {reason.removeprefix('ran out of memory: ')}"
        )
    missed = COLLECTIVE_TIMEOUT.search(log_text)
    if missed:
        return "failed", f"{missed.group(0)} (measure.collective_timeout_s)"
    stalled = STALLED.search(log_text)
    if stalled:
        return "failed", f"{stalled.group(0)} (twice measure.collective_timeout_s)"
    exits = in_causal_order(launch_kind.rank_exits(log_text))
    if not exits:
        return status, reason
    ended = first_cause(exits)
    if exit_signal(exits[0].code):  # killed: the others' errors follow from its death
        return "failed", f"{ended} (the launcher exited with code {returncode})"
    return "failed", f"{ended}; {reason}"  # and the first exception a rank raised


def write_status(
    cell: Cell,
    out: Path,
    status: str,
    reason: str,
    started_at: str,
    log_tail: str | None = None,
    allocation: dict | None = None,
) -> None:
    """A result without a measurement: ``skipped``, ``failed`` or ``oom``, with the reason."""
    system = describe_system(
        {}, threads_used=0, extra={"allocation": allocation} if allocation else None
    )
    result = make_result(
        cell, status, started_at=started_at, system=system, reason=reason, log_tail=log_tail
    )
    write_result(out, result)


def settle(
    cell: Cell,
    out: Path,
    returncode: int | None,
    tail: str,
    started_at: str,
    allocation: dict | None = None,
) -> str:
    """The status of a run that ended (``returncode`` None: timed out): the runner's own
    valid result, else a failed or oom result in its place, with the reason and log tail."""
    if returncode == 0 and out.is_file():
        try:
            return read_result(out)["status"]
        except jsonschema.ValidationError as error:  # a runner that could not check it
            status = "failed"
            reason = f"the runner's result does not match the schema: {error.message}"
    elif returncode is None:
        status, reason = "failed", f"timed out after {cell.measure.timeout_s} s (measure.timeout_s)"
    elif returncode == 0:
        status, reason = "failed", "runner exited 0 but wrote no result"
    else:
        status, reason = failure_reason(cell, returncode, tail)
    out.unlink(missing_ok=True)
    write_status(
        cell,
        out,
        status,
        reason,
        started_at,
        log_tail=tail[-LOG_TAIL_CHARS:],
        allocation=allocation,
    )
    return status
