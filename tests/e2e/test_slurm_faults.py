"""SLURM's own faults on the real local cluster (tests/helpers/slurm_cluster.py: two nodes,
slurmdbd): each ends in a recorded status with SLURM's reason, in bounded time, with nothing
left behind, and the report counts it.

One Snakemake run through the SLURM executor measures six stand-in cells at once (a cell's
job is a ``run:`` block that sleeps, eats memory or writes its result: the faults are
SLURM's, not the cell's), while this test does to their jobs what a cluster does:

=============  ==========================================  ==================================
cell           what happens to its job                     recorded
=============  ==========================================  ==================================
n2-d1-b2       2 nodes; dpscale-n2 set down mid-cell        failed: NODE_FAIL + down reason
n1-d1-b4       ``runtime=1`` minute                         failed: TIMEOUT
n1-d1-b2       ``scancel`` mid-cell                         failed: CANCELLED by uid 0
n1-d1-b8       1.5 GB in a ``--mem=300`` job                oom: the memory limit
n1-d1-b16      preempted (urgent partition), requeued      its own result, written on restart
n1-d1-b32      nothing                                      its own result, untouched
=============  ==========================================  ==================================

slurmdbd is stopped while the jobs run (sacct fails): the executor must still learn how
each job ended (dpscale.launch.snakemake_hooks.slurm_status asks squeue) instead of waiting
for ever; it is started again once it has. The failed results come from the workflow's
``onerror:`` (the same wiring as workflow/rules/bench.smk: dpscale.launch.slurm.faults). The
TIMEOUT case bounds the run: SLURM's minimum limit is one minute, checked every 30 s.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.side_by_side]

RUN_TIMEOUT_S = 240  # the whole run: TIMEOUT alone takes 60-90 s
STEP_TIMEOUT_S = 90  # each wait for a job to reach a point
MODEL = "resnet18-imagenet32-c10"
# layout -> (fault, resources); the order is the submission order (priorities)
CELLS = {
    "n2-d1-b2-r0": (
        "node",
        {"nodes": 2, "where": "dpscale-n1,dpscale-n2", "extra": "--no-requeue"},
    ),
    "n1-d1-b4-r0": ("timeout", {"runtime": 1, "where": "dpscale-n1"}),
    "n1-d1-b2-r0": ("cancel", {"where": "dpscale-n1"}),
    "n1-d1-b8-r0": ("memory", {"mem_mb": 300, "where": "dpscale-n1"}),
    # both CPUs of n2: it starts there only once the 2-node cell left it
    "n1-d1-b16-r0": ("preempt", {"cpus": 2, "where": "dpscale-n2"}),
    "n1-d1-b32-r0": ("ok", {"where": "dpscale-n1"}),
}
DOWN_REASON = "dpscale test: node pulled"

SNAKEFILE = textwrap.dedent(
    """
    import json, os, time
    from pathlib import Path
    from dpscale.workflow_door import (
        CELL_PATTERN, check_study, end_with_job_shell, record_slurm_failures,
        run_started, survive_status_outages,
    )

    STUDY = check_study(workflow.overwrite_configfiles, workflow.config_settings.config)
    checked, planned = STUDY.config, STUDY.cells
    config.update(checked)
    CELLS = {{cell.cell_id: cell for cell in planned}}
    CELLS_DIR = f"{{config['results_dir']}}/{{config['study']}}/cells"
    FAULTS = {faults!r}
    survive_status_outages()
    end_with_job_shell(workflow.remote_exec or workflow.subprocess_exec)
    RUN_STARTED = run_started()

    onerror:
        record_slurm_failures(workflow, CELLS, CELLS_DIR, RUN_STARTED)

    def layout(wc):
        return CELL_PATTERN.format(**wc).rsplit("/", 1)[1]

    def want(key, default):
        return lambda wc: FAULTS[layout(wc)][1].get(key, default)

    rule all:
        input: [f"{{CELLS_DIR}}/{{c}}.json" for c in CELLS if c.rsplit("/", 1)[1] in FAULTS]

    rule bench_cell:
        output: f"{{CELLS_DIR}}/{{CELL_PATTERN}}.json"
        priority: lambda wc: 100 - list(FAULTS).index(layout(wc))
        resources:
            nodes=want("nodes", 1),
            tasks=want("nodes", 1),
            mpi=lambda wc: "srun" if FAULTS[layout(wc)][1].get("nodes", 1) > 1 else None,
            cpus_per_task=want("cpus", 1),
            mem_mb=want("mem_mb", 1000),
            runtime=want("runtime", 10),
            slurm_extra=lambda wc: (
                f"--nodelist={{FAULTS[layout(wc)][1]['where']}} --acctg-freq=task=1 "
                + FAULTS[layout(wc)][1].get("extra", "--hold")
            ),
        params:
            fault=lambda wc: FAULTS[layout(wc)][0],
        run:
            from dpscale.launch.failures import write_status
            from dpscale.launch.slurm.allocation import parse_scontrol_records, run_quietly
            from dpscale.plan.result import now_iso

            job = os.environ["SLURM_JOB_ID"]
            shown = run_quietly(["scontrol", "show", "job", "-o", job]) or ""
            shown = parse_scontrol_records(shown)
            restarts = int(shown[0].get("Restarts", 0)) if shown else 0
            cell = CELLS[CELL_PATTERN.format(**wildcards)]
            marks = Path("marks")
            marks.mkdir(exist_ok=True)
            (marks / f"{{params.fault}}-{{restarts}}").write_text(job)
            if params.fault == "memory":
                hog = bytearray(1500 * 2**20)
                hog[::4096] = b"x" * len(hog[::4096])
                time.sleep(120)
            elif params.fault == "ok" or (params.fault == "preempt" and restarts):
                reason = f"stand-in cell: ran {{restarts + 1}} time(s), SLURM restarts {{restarts}}"
                write_status(cell, Path(output[0]), "skipped", reason, now_iso())
            else:
                time.sleep(300)
    """
)


def _study(results: Path) -> dict:
    return {
        "study": "slurm_faults",
        "results_dir": str(results),
        "strategies": ["torch-ddp"],
        "models": [{"name": "resnet18", "stem": "imagenet", "image_size": 32, "classes": 10}],
        "batch_sizes": [2, 4, 8, 16, 32],
        "devices_per_node": [1],
        "nodes": [1, 2],
        "modes": ["synthetic"],
        "measure": {"warmup_steps": 1, "windows": 2, "steps_per_window": 2, "repeats": 1},
        "controls": [],  # the faults' cells only (the tiny study runs control cells)
    }


def _cell_id(layout: str) -> str:
    return f"torch-ddp/{MODEL}/synthetic/{layout}"


class Waiter:
    """Bounded waits, each failing with what the run said so far."""

    def __init__(self, cluster, output: Path, process: subprocess.Popen):
        self.cluster, self.output, self.process = cluster, output, process

    def context(self) -> str:
        text = self.output.read_text(errors="replace") if self.output.exists() else ""
        queue = self.cluster.run("squeue", "-h", "-t", "all", "-o", "%i|%T|%r|%N").stdout
        return f"--- snakemake (tail)\n{text[-4000:]}\n--- squeue\n{queue}"

    def until(self, what: str, check, timeout: float = STEP_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            if self.process.poll() is not None:
                pytest.fail(f"snakemake ended before {what}\n{self.context()}")
            time.sleep(0.5)
        pytest.fail(f"timed out after {timeout} s waiting for {what}\n{self.context()}")


def _mark(workdir: Path, name: str) -> str | None:
    path = workdir / "marks" / name
    return path.read_text().strip() if path.is_file() else None


def _state(cluster, job: str) -> str:
    return cluster.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T|%r").stdout.strip()


def _slurmdbd_pid(cluster) -> int | None:
    pid_file = cluster.state_dir / "run" / "slurmdbd.pid"
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _stop_slurmdbd(cluster) -> None:
    pid = _slurmdbd_pid(cluster)
    assert pid, "slurmdbd is not running"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and cluster.run("sacct", "-n", "-X").returncode == 0:
        time.sleep(0.2)
    assert cluster.run("sacct", "-n", "-X").returncode != 0, "sacct still answers"


def _start_slurmdbd(cluster) -> None:
    if _slurmdbd_pid(cluster) is None:
        log = cluster.log_dir / "slurmdbd.log"
        with open(log, "a") as handle:
            subprocess.run(
                ["slurmdbd"], env=cluster.env, stdout=handle, stderr=handle, timeout=30, check=False
            )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if cluster.run("sacctmgr", "-n", "list", "cluster").returncode == 0:
            return
        time.sleep(0.5)
    pytest.fail(f"slurmdbd did not come back\n{cluster.log_tails(10)}")


def _processes_of(work: Path) -> dict[int, str]:
    """Processes still running a job of this run (their command line names its folder), with
    their SLURM job."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(work) in args and "--target-jobs" in args:
            job = [e.decode()[13:] for e in environ if e.startswith(b"SLURM_JOB_ID=")]
            found[int(entry.name)] = job[0] if job else "?"
    return found


def _steps_of(jobs: set[str]) -> list[str]:
    """slurmstepd processes of these jobs (their title is ``slurmstepd: [JOB.STEP]``)."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False)
    return [
        line
        for line in ps.stdout.splitlines()
        if (m := re.match(r"slurmstepd: \[(\d+)\.", line)) and m.group(1) in jobs
    ]


@pytest.fixture(scope="module")
def fault_run(slurm_cluster, tmp_path_factory):
    cluster = slurm_cluster
    if not cluster.accounting:
        pytest.skip("the SLURM fault cases need slurmdbd (DPSCALE_SLURM_DBD=0 runs without)")
    assert set(cluster.nodes) >= {"dpscale-n1", "dpscale-n2"}, cluster.nodes
    assert cluster.cpus >= 2, "the cases share each node's two CPUs"
    work = tmp_path_factory.mktemp("slurm-faults")
    results = work / "results"
    study = work / "slurm_faults.yaml"
    study.write_text(yaml.safe_dump(_study(results)))
    (work / "Snakefile").write_text(SNAKEFILE.format(faults=CELLS))
    output = work / "snakemake.log"
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(work / "Snakefile"),
        "--directory",
        str(work),
        "--profile",
        str(cluster.profile),
        "--workflow-profile",
        "none",
        "--slurm-status-command",
        "sacct",
        "--jobs",
        "8",
        "--keep-going",
        "--configfile",
        str(REPO / "config.yaml"),
        str(study),
    ]
    env = dict(cluster.env)
    env.pop("SNAKEMAKE_PROFILE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    started = time.monotonic()
    with open(output, "w") as log:
        process = subprocess.Popen(
            command,
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    wait = Waiter(cluster, output, process)
    jobs: dict[str, str] = {}
    timeline: dict[str, float] = {}
    try:
        # 2 nodes, dpscale-n2 set down under it (the other cells are held until then)
        jobs["node"] = wait.until("the 2-node cell to run", lambda: _mark(work, "node-0"))
        cluster.run(
            "scontrol", "update", "nodename=dpscale-n2", "state=down", f"reason={DOWN_REASON}"
        )
        wait.until("NODE_FAIL", lambda: _state(cluster, jobs["node"]).startswith("NODE_FAIL"))
        cluster.run("scontrol", "update", "nodename=dpscale-n2", "state=resume")
        held = wait.until(
            "the other cells' jobs",
            lambda: (
                ids
                if len(ids := cluster.run("squeue", "-h", "-t", "PD", "-o", "%i").stdout.split())
                == len(CELLS) - 1
                else None
            ),
        )
        # sacct fails from here until the executor has learned a job's end without it
        _stop_slurmdbd(cluster)
        timeline["slurmdbd stopped"] = time.monotonic() - started
        cluster.run("scontrol", "release", ",".join(held))
        deadline = started + RUN_TIMEOUT_S
        while process.poll() is None and time.monotonic() < deadline:
            if "cancel" not in jobs and (job := _mark(work, "cancel-0")):
                jobs["cancel"] = job
                cluster.run("scancel", job)  # mid-cell
            if (
                "cancel" in jobs
                and "dbd" not in timeline
                and re.search(
                    rf"SLURM-job '{jobs['cancel']}' failed", output.read_text(errors="replace")
                )
            ):
                timeline["dbd"] = time.monotonic() - started
                _start_slurmdbd(cluster)
            if "preempt" not in jobs and (job := _mark(work, "preempt-0")):
                jobs["preempt"] = job
                urgent = cluster.run(
                    "sbatch",
                    "--parsable",
                    "-p",
                    f"{cluster.partition}-urgent",
                    "-w",
                    "dpscale-n2",
                    "-c",
                    "2",
                    "-t",
                    "1",
                    "-o",
                    "/dev/null",
                    "--wrap",
                    "sleep 1",
                )
                assert urgent.returncode == 0, urgent.stderr
                jobs["urgent"] = urgent.stdout.strip()
            # SLURM holds a requeued job for its credential lifetime (120 s): let it go now
            if (
                "preempt" in jobs
                and "requeued" not in timeline
                and (_state(cluster, jobs["preempt"]) == "PENDING|BeginTime")
            ):
                timeline["requeued"] = time.monotonic() - started
                cluster.run("scontrol", "update", f"jobid={jobs['preempt']}", "starttime=now")
            time.sleep(0.5)
        if process.poll() is None:
            pytest.fail(f"snakemake did not end within {RUN_TIMEOUT_S} s\n{wait.context()}")
        timeline["snakemake ended"] = time.monotonic() - started
        for fault in ("timeout", "memory", "ok"):
            jobs[fault] = _mark(work, f"{fault}-0")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)  # Snakemake cancels its jobs
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        _start_slurmdbd(cluster)
        cluster.run("scontrol", "update", "nodename=dpscale-n2", "state=resume")
        for job in jobs.values():
            if job:
                cluster.run("scancel", job)
    # KillWait (5 s) and then the jobs' processes exit, slower on a busy machine: a process
    # still there after 30 s outlived its job
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _processes_of(work):
        time.sleep(0.5)
    orphans = _processes_of(work)
    for pid in orphans:  # reaped so later tests are unaffected; test_no_process_outlives...
        os.kill(pid, signal.SIGKILL)
    print(f"SLURM fault run: {timeline}; orphans: {orphans}")
    return cluster, work, results / "slurm_faults", process.returncode, jobs, namespaces, orphans


def _result(folder: Path, layout: str) -> dict:
    path = folder / "cells" / f"{_cell_id(layout)}.json"
    assert path.is_file(), f"no result for {layout}"
    return json.loads(path.read_text())


def test_each_slurm_fault_is_recorded_with_slurms_reason(fault_run):
    cluster, work, folder, returncode, jobs, _, _ = fault_run
    log = (work / "snakemake.log").read_text(errors="replace")
    assert returncode != 0, "cells failed: the run must say so"
    expected = {
        "n2-d1-b2-r0": (
            "failed",
            rf"SLURM job {jobs['node']} lost a node \(NODE_FAIL on "
            rf"dpscale-n\[1-2\]: dpscale-n2: {DOWN_REASON}",
        ),
        "n1-d1-b4-r0": (
            "failed",
            rf"SLURM job {jobs['timeout']} ran past its time limit of "
            r"00:01:00 \(TIMEOUT\)",
        ),
        "n1-d1-b2-r0": (
            "failed",
            rf"SLURM job {jobs['cancel']} was cancelled \(CANCELLED by "
            r"uid 0",
        ),
        "n1-d1-b8-r0": ("oom", rf"SLURM job {jobs['memory']} was killed by its memory limit"),
    }
    for layout, (status, reason) in expected.items():
        result = _result(folder, layout)
        assert (result["status"], result["reason"]) == (status, result["reason"]), layout
        assert re.search(reason, result["reason"]), (layout, result["reason"], log[-3000:])
        assert f"dpscale: {_cell_id(layout)}: {status}: " in log  # said once, in the run
    # the preempted cell ran again and wrote its own result; the untouched one kept its own
    requeued = _result(folder, "n1-d1-b16-r0")
    assert requeued["reason"] == "stand-in cell: ran 2 time(s), SLURM restarts 1", requeued
    assert _mark(work, "preempt-1") == jobs["preempt"]  # the same job, requeued
    assert _result(folder, "n1-d1-b32-r0")["reason"].startswith("stand-in cell: ran 1 time")
    # the executor went on without sacct: it asked squeue
    assert "sacct did not answer (slurmdbd down?); job states from squeue" in log
    # sacct, back, agrees with what was recorded
    states = {}
    for _ in range(20):
        out = cluster.run(
            "sacct",
            "-X",
            "-n",
            "-P",
            "-j",
            ",".join(jobs[k] for k in ("node", "timeout", "cancel", "memory", "preempt")),
            "-o",
            "JobIDRaw,State",
        ).stdout
        states = dict(line.split("|", 1) for line in out.split("\n") if "|" in line)
        if states.get(jobs["preempt"]) == "COMPLETED" and len(states) == 5:
            break
        time.sleep(1)
    assert states[jobs["node"]] == "NODE_FAIL" and states[jobs["timeout"]] == "TIMEOUT", states
    assert states[jobs["cancel"]].startswith("CANCELLED"), states
    assert states[jobs["memory"]] in ("FAILED", "OUT_OF_MEMORY"), states


def test_nothing_is_left_behind(fault_run):
    cluster, _, _, _, jobs, namespaces, orphans = fault_run
    ours = {job for job in jobs.values() if job}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (
        cluster.run("squeue", "-h", "-o", "%i").stdout.split() or _steps_of(ours)
    ):
        time.sleep(0.5)
    assert cluster.run("squeue", "-h", "-o", "%i %T").stdout.strip() == ""
    assert _steps_of(ours) == []
    nodes = cluster.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split("\n")
    assert all(line.split()[1] == "idle" for line in nodes if line.strip()), nodes
    assert (
        subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout == namespaces
    )
    assert cluster.run("sacctmgr", "-n", "list", "cluster").returncode == 0  # slurmdbd is back


def test_no_process_of_a_job_slurm_ended_outlives_it(fault_run):
    """Cancelled, timed out, preempted, memory-killed, and the surviving node of a job that
    lost one: under proctrack/linuxproc (no cgroups here) a job's Snakemake process
    reparented to init when its batch shell ended was untracked, and SLURM's SIGKILL missed
    it; it now dies with that shell (dpscale.launch.snakemake_hooks.slurm_job)."""
    _, _, _, _, _, _, orphans = fault_run
    assert orphans == {}, orphans


def test_status_counts_them_and_rerun_failed_takes_only_them(fault_run):
    _, work, folder, _, _, _, _ = fault_run
    study = work / "slurm_faults.yaml"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))

    def dpscale(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "dpscale.cli", *args]
        return subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    status = dpscale("status", str(study))
    assert status.returncode == 0, status.stderr
    print(status.stdout)
    assert re.search(r"\b3 failed\b", status.stdout) and re.search(r"\b1 oom\b", status.stdout), (
        status.stdout
    )
    assert "NODE_FAIL" in status.stdout and "TIMEOUT" in status.stdout
    rerun = dpscale("rerun-failed", str(study), "--dry-run")
    assert rerun.returncode == 0, rerun.stderr
    named = set(re.findall(r"cells/(torch-ddp/\S+?)\.json", rerun.stdout))
    wanted = {
        _cell_id(layout) for layout in ("n2-d1-b2-r0", "n1-d1-b4-r0", "n1-d1-b2-r0", "n1-d1-b8-r0")
    }
    assert named == wanted, rerun.stdout
