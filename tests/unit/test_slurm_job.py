"""dpscale.launch.snakemake_hooks.slurm_job: a SLURM job's Snakemake process asks to die with
its shell, and no other process does."""

from __future__ import annotations

import ctypes
import multiprocessing
import signal

from dpscale.launch.snakemake_hooks.slurm_job import end_with_job_shell

PR_GET_PDEATHSIG = 2


def _parent_death_signal() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    value = ctypes.c_int(0)
    assert libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0) == 0
    return value.value


def _child(spawned: bool, environ: dict[str, str], out: multiprocessing.Queue) -> None:
    acted = end_with_job_shell(spawned, environ)
    out.put((acted, _parent_death_signal()))


def _in_child(spawned: bool, environ: dict[str, str]) -> tuple[bool, int]:
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    process = context.Process(target=_child, args=(spawned, environ, out))
    process.start()
    result = out.get(timeout=30)
    process.join(timeout=30)
    return result


def test_a_spawned_job_in_a_slurm_job_dies_with_its_parent():
    assert _in_child(True, {"SLURM_JOB_ID": "42"}) == (True, signal.SIGKILL)


def test_the_run_a_user_started_is_left_alone_even_inside_an_allocation():
    assert _in_child(False, {"SLURM_JOB_ID": "42"}) == (False, 0)


def test_a_spawned_job_outside_slurm_is_left_alone():
    assert _in_child(True, {}) == (False, 0)
    assert _in_child(True, {"SLURM_JOB_ID": ""}) == (False, 0)
