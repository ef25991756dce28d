"""Snakemake's SLURM executor while sacct does not answer (slurmdbd down, restarting).

snakemake-executor-plugin-slurm asks ``sacct`` for its jobs' states. When every attempt of a
status check fails, its ``check_active_jobs`` neither reports nor yields the jobs it was
asked about, so they drop out of its list of active jobs and Snakemake waits for them for
ever (plugin 2.8.0). :func:`survive_status_outages` patches the plugin so that

* a failed ``sacct`` query is asked again of ``squeue`` (slurmctld, which keeps a finished
  job for MinJobAge, 300 s by default): the run goes on and each job's end is known;
* when neither answers, the jobs stay active and are asked about at the next check;
* after ``DPSCALE_SLURM_STATUS_OUTAGE_S`` seconds (default 1800) without an answer the run
  stops with one line that says so (the jobs keep running; a rerun finds their results).

Stdlib only; the plugin is imported only when the patch is applied.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from typing import Any

PATCHED = "_dpscale_status_outages"
OUTAGE_ENV = "DPSCALE_SLURM_STATUS_OUTAGE_S"
DEFAULT_OUTAGE_S = 1800.0

# run uuid -> when its status checks began to go unanswered (absent: the last one answered)
_UNANSWERED_SINCE: dict[str, float] = {}


def squeue_for(command: str) -> str | None:
    """The plugin's ``squeue`` query for the run a ``sacct --name RUN`` query asks about."""
    words = shlex.split(command)
    if not words or os.path.basename(words[0]) != "sacct" or "--name" not in words:
        return None
    index = words.index("--name") + 1
    if index >= len(words):
        return None
    run = words[index]
    return shlex.join(["squeue", "--format=%i|%T", "--states=all", "--noheader", "--name", run])


def run_of(command: str) -> str | None:
    words = shlex.split(command)
    return words[words.index("--name") + 1] if "--name" in words[:-1] else None


def outage_limit_s() -> float:
    try:
        return float(os.environ.get(OUTAGE_ENV, DEFAULT_OUTAGE_S))
    except ValueError:
        return DEFAULT_OUTAGE_S


class StatusOutage(Exception):
    """Neither sacct nor squeue answered for longer than the limit."""


def _patched_query(original):
    async def query(command: str, logger: Any):
        found, took = await original(command, logger)
        fallback = squeue_for(command) if found is None else None
        if fallback is not None:
            found, took = await original(fallback, logger)
            if found is not None:
                logger.warning(
                    "dpscale: sacct did not answer (slurmdbd down?); job states from squeue"
                )
        run = run_of(command)
        if run is not None:
            if found is None:
                _UNANSWERED_SINCE.setdefault(run, time.monotonic())
            else:
                _UNANSWERED_SINCE.pop(run, None)
        return found, took

    setattr(query, PATCHED, True)
    return query


def _patched_check(original):
    async def check_active_jobs(self, active_jobs):
        still = []
        async for job in original(self, active_jobs):
            still.append(job)
            yield job
        since = _UNANSWERED_SINCE.get(getattr(self, "run_uuid", None))
        if since is None:
            return
        # nothing answered: the plugin reported and yielded nothing; keep the jobs active
        for job in active_jobs:
            if job not in still:
                yield job
        waited = time.monotonic() - since
        if waited > outage_limit_s():
            message = (
                f"dpscale: neither sacct nor squeue answered for {waited:.0f} s "
                f"({OUTAGE_ENV}); the jobs go on in SLURM: rerun once slurmctld and slurmdbd "
                "answer, and it finds their results"
            )
            print(message, file=sys.stderr, flush=True)
            raise StatusOutage(message)

    setattr(check_active_jobs, PATCHED, True)
    return check_active_jobs


def survive_status_outages() -> bool:
    """Patch the SLURM executor plugin; False (no change) where it is not installed or its
    names moved."""
    try:
        import snakemake_executor_plugin_slurm as plugin
    except ImportError:
        return False
    executor = getattr(plugin, "Executor", None)
    query = getattr(plugin, "query_job_status", None)
    check = getattr(executor, "check_active_jobs", None)
    if executor is None or query is None or check is None:
        return False
    if not getattr(query, PATCHED, False):
        plugin.query_job_status = _patched_query(query)
    if not getattr(check, PATCHED, False):
        executor.check_active_jobs = _patched_check(check)
    return True
