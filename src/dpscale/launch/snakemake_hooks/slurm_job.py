"""A SLURM job's own Snakemake process ends with the job's shell.

Where SLURM tracks a job's processes by their parents (``proctrack/linuxproc``, the plug-in
of a site or container without cgroups), a process whose parent already ended is reparented
to init and no longer tracked: a job's Snakemake process slow to end on SIGTERM then outlives
its batch shell, and SLURM's SIGKILL misses it (cancelled, timed-out, preempted jobs; the
surviving node of a job that lost one). :func:`end_with_job_shell` asks the kernel to kill
this process when its parent ends (``PR_SET_PDEATHSIG``), which is what SLURM promised
anyway. Called from the workflow's rules at parse time; it acts only in a job Snakemake
spawned (not the run the user started) and only inside a SLURM job.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

from dpscale.launch.guard import die_with_parent

SLURM_JOB_ID = "SLURM_JOB_ID"


def end_with_job_shell(spawned_job: bool, environ: Mapping[str, str] | None = None) -> bool:
    """In a spawned job inside a SLURM job: SIGKILL this process when its parent ends, and
    True; else nothing, and False. ``spawned_job``: Snakemake runs this process for one job
    (``workflow.remote_exec or workflow.subprocess_exec``)."""
    env = os.environ if environ is None else environ
    if not spawned_job or not env.get(SLURM_JOB_ID):
        return False
    die_with_parent(signal.SIGKILL)
    if os.getppid() == 1:  # the shell ended before the signal was asked for
        os.kill(os.getpid(), signal.SIGKILL)
    return True
