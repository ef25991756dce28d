"""End to end: a tiny workflow through snakemake's SLURM executor on a real cluster.

Checks the three things dpscale's workflow relies on: a normal rule runs as a
SLURM job, a multi-task rule (``resources: tasks=2, mpi="srun"``) gets one
process per task with distinct SLURM_PROCIDs, and ``localrules`` stay on the
submitting host.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.slurm_cluster import timed_out  # the session fixture slurm_cluster: tests/conftest.py

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.side_by_side]

RUN_TIMEOUT_S = 600

SNAKEFILE = textwrap.dedent(
    """
    localrules: all, summary

    rule all:
        input: "summary.txt"

    rule single:
        output: "single.txt"
        shell: "echo job=$SLURM_JOB_ID ntasks=${{SLURM_NTASKS:-unset}} host=$(hostname) > {output}"

    rule multi:
        output: "multi.txt"
        resources:
            tasks=2,
            mpi="srun",
        shell:
            "{resources.mpi} -n {resources.tasks}"
            " sh -c 'echo procid=$SLURM_PROCID job=$SLURM_JOB_ID ntasks=$SLURM_NTASKS' > {output}"

    rule summary:
        input: "single.txt", "multi.txt"
        output: "summary.txt"
        shell: "cat {input} > {output}; echo local_job=${{SLURM_JOB_ID:-none}} >> {output}"
    """
)


def _snakemake() -> str:
    exe = Path(sys.executable).with_name("snakemake")
    return str(exe) if exe.exists() else "snakemake"


def _run_workflow(cluster, workdir: Path) -> subprocess.CompletedProcess:
    (workdir / "Snakefile").write_text(SNAKEFILE)
    cmd = [
        _snakemake(),
        "--snakefile",
        str(workdir / "Snakefile"),
        "--directory",
        str(workdir / "run"),
        "--profile",
        str(cluster.profile),
        "--workflow-profile",
        "none",
        "--slurm-status-command",
        cluster.status_command,
        "--cores",
        "1",
    ]
    if cluster.partition != "dpscale":  # the test profile names start.sh's default
        cmd += ["--default-resources", f"slurm_partition={cluster.partition}"]
        cmd += ["runtime=10", "mem_mb=500"]
    env = dict(cluster.env)
    env.pop("SNAKEMAKE_PROFILE", None)
    try:
        return subprocess.run(
            cmd,
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return timed_out(exc, f"snakemake timed out after {RUN_TIMEOUT_S}s")


def _context(cluster, result, workdir: Path) -> str:
    logs = []
    for log in sorted((workdir / "run" / ".snakemake" / "slurm_logs").rglob("*.log")):
        logs.append(f"==== {log}\n{log.read_text(errors='replace')[-2000:]}")
    output = (result.stdout + result.stderr)[-4000:]
    return (
        f"rc={result.returncode}\n--- snakemake output (tail)\n{output}\n"
        f"--- SLURM job logs\n{''.join(logs)}\n--- daemon logs\n{cluster.log_tails(15)}"
    )


def _job_states(cluster, job_ids: list[str]) -> dict[str, str]:
    """Final state of each job: sacct when accounting runs, else squeue (MinJobAge=300)."""
    ids = ",".join(job_ids)
    if cluster.accounting:
        out = cluster.run("sacct", "-X", "-n", "-P", "-j", ids, "-o", "JobIDRaw,State").stdout
    else:
        out = cluster.run("squeue", "-h", "-t", "all", "-j", ids, "-o", "%i|%T").stdout
    return dict(line.split("|", 1) for line in out.split() if "|" in line)


def test_tiny_workflow_runs_on_slurm(slurm_cluster, tmp_path):
    cluster = slurm_cluster
    assert cluster.cpus >= 2, "the multi-task rule needs 2 CPUs on the node"
    started = time.monotonic()
    result = _run_workflow(cluster, tmp_path)
    elapsed = time.monotonic() - started
    context = _context(cluster, result, tmp_path)
    assert result.returncode == 0, context

    run = tmp_path / "run"
    single = (run / "single.txt").read_text()
    multi = (run / "multi.txt").read_text()
    summary = (run / "summary.txt").read_text()

    # (a) the normal rule ran inside a SLURM job (one task).
    single_job = re.search(r"job=(\d+) ntasks=(\S+)", single)
    assert single_job, f"single.txt has no SLURM job id: {single!r}\n{context}"
    assert single_job.group(2) == "1", single

    # (b) both tasks of the multi-task rule ran, with distinct SLURM_PROCIDs, in one job.
    tasks = re.findall(r"procid=(\d+) job=(\d+) ntasks=(\d+)", multi)
    assert sorted(p for p, _, _ in tasks) == ["0", "1"], f"multi.txt: {multi!r}\n{context}"
    assert len({j for _, j, _ in tasks}) == 1, multi
    assert {n for _, _, n in tasks} == {"2"}, multi
    multi_job = tasks[0][1]
    assert multi_job != single_job.group(1)

    # (c) the local rule ran on this host, outside SLURM.
    assert "local_job=none" in summary, summary

    # The scheduler saw both jobs finish.
    job_ids = [single_job.group(1), multi_job]
    states: dict[str, str] = {}
    for _ in range(20):  # accounting records can trail the job end by a moment
        states = _job_states(cluster, job_ids)
        if all(states.get(j) == "COMPLETED" for j in job_ids):
            break
        time.sleep(1)
    assert all(states.get(j) == "COMPLETED" for j in job_ids), f"job states {states}\n{context}"

    if cluster.accounting:
        # The multi-task job's srun step ran 2 tasks; visible in sacct.
        steps = cluster.run("sacct", "-n", "-P", "-j", multi_job, "-o", "JobID,NTasks,State").stdout
        assert re.search(rf"^{multi_job}\.0\|2\|COMPLETED$", steps, re.M), steps

    print(f"tiny workflow on SLURM ({cluster.status_command} status): {elapsed:.1f} s")
