"""Cells whose SLURM job ended without a result: what SLURM says happened, recorded.

A cell's launcher always leaves a result, unless SLURM ends the job under it: ``scancel``,
the time limit, a node that went down, the memory limit, a preemption. Snakemake's SLURM
executor then reports the job failed and removes whatever output the job left, so the cell
would be neither measured nor counted. On the launching host, when the run ends in error
(the workflow's ``onerror:``), :func:`record_failed_jobs` finds each cell that has no result
but a job of this run (the executor's per-job log, ``<slurm_logs>/rule_bench_cell/<cell's
wildcards>/<jobid>.log``), asks SLURM how that job ended (``sacct``, else ``scontrol`` while
slurmctld still holds the job) and writes the cell's ``failed`` or ``oom`` result with
SLURM's words. ``dpscale status`` counts it; ``dpscale rerun-failed`` measures it again.

It never replaces a result: a cell that has one (measured, or recorded by the launcher) is
left as it is. :func:`outcome` is the one place a SLURM state becomes a status. Stdlib only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpscale.launch.failures import LOG_TAIL_CHARS, write_status
from dpscale.launch.slurm.allocation import Runner, parse_scontrol_records, run_quietly
from dpscale.plan.cell import Cell, parse_cell_id
from dpscale.plan.result import now_iso

# States of a job SLURM has not finished with: no result to write yet.
NOT_OVER = frozenset(
    {
        "PENDING",
        "RUNNING",
        "REQUEUED",
        "REQUEUE_HOLD",
        "REQUEUE_FED",
        "RESIZING",
        "SUSPENDED",
        "COMPLETING",
        "CONFIGURING",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
        "SPECIAL_EXIT",
        "RESV_DEL_HOLD",
    }
)
# slurmstepd's words when it kills a step over its --mem (JobAcctGatherParams=OverMemoryKill;
# the job then ends FAILED with signal 9, not OUT_OF_MEMORY, where no cgroup enforces memory)
# and the cgroup OOM killer's, which some SLURM versions report as FAILED too
MEMORY_KILLED = re.compile(
    r"exceeded (?:job )?memory limit|Detected \d+ oom[_-]kill event", re.IGNORECASE
)


@dataclass(frozen=True)
class JobEnd:
    """How SLURM says a job ended (sacct's or scontrol's fields)."""

    job_id: str
    state: str  # "CANCELLED by 0", "NODE_FAIL", "TIMEOUT", ...
    exit_code: str = ""  # "0:9": exit status and signal
    elapsed: str = ""
    time_limit: str = ""
    nodes: str = ""
    node_reasons: str = ""  # why its nodes are down or drained, where they are
    memory_killed: bool = False  # the job's log says SLURM killed it over its memory limit
    source: str = "sacct"
    start: str = ""  # when it started (ISO), to find its nodes' events


def outcome(end: JobEnd) -> tuple[str, str | None] | None:
    """The cell's (status, reason) for a job that ended so; None while SLURM is not done
    with it (pending, running, requeued after a preemption). COMPLETED is ``ok``: the cell's
    own result says the rest."""
    words = end.state.split()
    state = words[0].rstrip("+") if words else "UNKNOWN"
    job = f"SLURM job {end.job_id}"
    ran = f" after {end.elapsed}" if end.elapsed else ""
    if state in NOT_OVER:
        return None
    if state == "COMPLETED":
        return "ok", None
    if state == "OUT_OF_MEMORY":
        return "oom", (
            f"{job} was killed by its memory limit (OUT_OF_MEMORY){ran}; "
            "raise cluster.mem_mb_per_device"
        )
    if state == "FAILED" and end.memory_killed:
        return "oom", (
            f"{job} was killed by its memory limit (FAILED, exit code {end.exit_code or '?'}: "
            f"slurmstepd says the step exceeded it){ran}; raise cluster.mem_mb_per_device"
        )
    if state == "CANCELLED":
        by = f" by uid {words[2]}" if len(words) >= 3 and words[1] == "by" else ""
        return "failed", f"{job} was cancelled (CANCELLED{by}: scancel or an administrator){ran}"
    if state == "TIMEOUT":
        limit = f" of {end.time_limit}" if end.time_limit else ""
        return "failed", (
            f"{job} ran past its time limit{limit} (TIMEOUT){ran}; raise cluster.runtime_min"
        )
    if state == "NODE_FAIL":
        where = f" on {end.nodes}" if end.nodes else ""
        why = f": {end.node_reasons}" if end.node_reasons else ""
        return "failed", f"{job} lost a node (NODE_FAIL{where}{why}){ran}"
    if state == "PREEMPTED":
        return "failed", f"{job} was preempted (PREEMPTED) and not requeued{ran}"
    if state == "FAILED":
        code = f", exit code {end.exit_code}" if end.exit_code else ""
        return "failed", f"{job} FAILED{code}{ran} (see the job's log)"
    return "failed", f"{job} ended {end.state}{ran}"


# ------------------------------------------------------------------ asking SLURM

SACCT_FIELDS = ("JobIDRaw", "State", "ExitCode", "Elapsed", "Timelimit", "NodeList", "Start")


def job_end(job_id: str, run: Runner = run_quietly, memory_killed: bool = False) -> JobEnd | None:
    """How ``job_id`` ended: sacct (slurmdbd), else scontrol (slurmctld keeps a finished job
    for MinJobAge); None when neither answers. A NODE_FAIL names its nodes' down reasons."""
    end = _from_sacct(job_id, run, memory_killed) or _from_scontrol(job_id, run, memory_killed)
    if end is not None and end.state.startswith("NODE_FAIL") and end.nodes:
        said = node_reasons(end.nodes, run) or node_events(end.nodes, end.start, run)
        end = JobEnd(**{**end.__dict__, "node_reasons": said})
    return end


def _from_sacct(job_id: str, run: Runner, memory_killed: bool) -> JobEnd | None:
    command = ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", ",".join(SACCT_FIELDS)]
    for line in (run(command) or "").splitlines():
        fields = dict(zip(SACCT_FIELDS, line.split("|"), strict=False))
        if fields.get("JobIDRaw") == job_id and fields.get("State"):
            return JobEnd(
                job_id=job_id,
                state=fields["State"],
                exit_code=fields.get("ExitCode", ""),
                elapsed=fields.get("Elapsed", ""),
                time_limit=fields.get("Timelimit", ""),
                nodes=fields.get("NodeList", ""),
                memory_killed=memory_killed,
                start=fields.get("Start", ""),
            )
    return None


def _from_scontrol(job_id: str, run: Runner, memory_killed: bool) -> JobEnd | None:
    records = parse_scontrol_records(run(["scontrol", "show", "job", "-o", job_id]) or "")
    job = records[0] if records else {}
    if not job.get("JobState"):
        return None
    return JobEnd(
        job_id=job_id,
        state=job["JobState"],
        exit_code=job.get("ExitCode", ""),
        elapsed=job.get("RunTime", ""),
        time_limit=job.get("TimeLimit", ""),
        nodes=job.get("NodeList", ""),
        memory_killed=memory_killed,
        source="scontrol",
        start=job.get("StartTime", ""),
    )


def node_reasons(nodes: str, run: Runner = run_quietly) -> str:
    """``node: reason`` of each of ``nodes`` SLURM holds down or drained (``scontrol``)."""
    said = []
    for line in (run(["scontrol", "show", "node", "-o", nodes]) or "").splitlines():
        name = re.search(r"NodeName=(\S+)", line)
        # the reason runs to the next Key= field (it may hold spaces: "maintenance [root@...]")
        reason = re.search(r"\bReason=(.*?)(?=\s+[A-Z][A-Za-z]*=|$)", line)
        if name and reason and reason.group(1) not in ("", "(null)", "None"):
            said.append(f"{name.group(1)}: {reason.group(1)}")
    return "; ".join(said)


def node_events(nodes: str, since: str, run: Runner = run_quietly) -> str:
    """``node: reason`` of the last down or drain event slurmdbd logged for each of ``nodes``
    since the job started (the node may be back by the time anyone asks)."""
    if not since or since in ("Unknown", "None"):
        return ""
    command = ["sacctmgr", "-n", "-P", "list", "event", f"nodes={nodes}", f"start={since}"]
    last: dict[str, str] = {}
    for line in (run([*command, "format=NodeName,Reason"]) or "").splitlines():
        name, _, reason = line.partition("|")
        if name and reason.strip():
            last[name] = reason.strip()
    return "; ".join(f"{name}: {reason}" for name, reason in last.items())


# ------------------------------------------------------------------ the launching host


def job_folder(cell_id: str) -> str:
    """The folder Snakemake's SLURM executor keeps a cell job's logs in: its wildcards'
    values, joined by ``_`` (``get_job_wildcards`` of snakemake-executor-plugin-slurm)."""
    return "_".join(parse_cell_id(cell_id).values()).replace("/", "_")


def last_job(folder: Path, since: float) -> tuple[str, Path] | None:
    """The newest job (id, log) the executor logged in ``folder`` since ``since``."""
    try:
        logs = [p for p in folder.glob("*.log") if p.stem.isdigit()]
        logs = [p for p in logs if p.stat().st_mtime >= since]
    except OSError:
        return None
    if not logs:
        return None
    newest = max(logs, key=lambda p: int(p.stem))
    return newest.stem, newest


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
    except OSError:
        return ""


def record_failed_jobs(
    cells: Mapping[str, Cell],
    cells_dir: str | Path,
    slurm_logdir: str | Path,
    since: float,
    rule: str = "bench_cell",
    run: Runner = run_quietly,
    say: Callable[[str], Any] = print,
) -> dict[str, tuple[str, str]]:
    """Write a result for each cell with none whose job of this run (logged since ``since``)
    SLURM ended without one; returns ``{cell_id: (status, reason)}`` of what it wrote."""
    recorded = {}
    for cell_id, cell in cells.items():
        out = Path(cells_dir) / f"{cell_id}.json"
        if out.exists():
            continue  # measured, or recorded by its launcher: never replaced
        found = last_job(Path(slurm_logdir) / f"rule_{rule}" / job_folder(cell_id), since)
        if found is None:
            continue  # never submitted in this run: the next run measures it
        job_id, log = found
        tail = _tail(log)
        end = job_end(job_id, run, memory_killed=bool(MEMORY_KILLED.search(tail)))
        if end is None:
            status, reason = (
                "failed",
                (
                    f"SLURM job {job_id} ended without a result, and neither sacct nor scontrol "
                    "says how (see the job's log)"
                ),
            )
        else:
            settled = outcome(end)
            if settled is None or settled[0] == "ok":
                continue  # not over, or completed: the cell's own result is the record
            status, reason = settled
        if out.exists():  # written meanwhile: never replaced
            continue
        write_status(cell, out, status, reason, now_iso(), log_tail=tail or None)
        recorded[cell_id] = (status, reason)
        say(f"dpscale: {cell_id}: {status}: {reason}")
    return recorded


def record_after_error(workflow: Any, cells: Mapping[str, Cell], cells_dir: str, since: float):
    """The workflow's ``onerror:``: :func:`record_failed_jobs` where Snakemake ran its jobs
    through the SLURM executor (the executor's log folder, as it chooses it)."""
    try:
        if workflow.executor_plugin.name != "slurm":
            return {}
        logdir = workflow.executor_settings.logdir
    except AttributeError:
        return {}
    if logdir is None:
        folder = Path(".snakemake/slurm_logs").resolve()
    elif str(logdir).startswith("/"):
        folder = Path(logdir)
    else:
        folder = Path(workflow.workdir_init) / logdir
    return record_failed_jobs(cells, cells_dir, folder, since)


def started() -> float:
    """When this run began, for :func:`record_failed_jobs`'s ``since`` (a log written in an
    earlier run is not this run's job); a second of slack for coarse file times."""
    return time.time() - 1.0
