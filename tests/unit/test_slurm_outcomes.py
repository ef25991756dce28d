"""The SLURM state of a job that ended under its cell, as the cell's status and reason
(dpscale.launch.slurm.faults), and the executor's status queries while sacct is down
(dpscale.launch.snakemake_hooks.slurm_status); SLURM's commands stand-ins."""

from __future__ import annotations

import json

import pytest

from conftest import make_cell
from dpscale.launch.slurm import faults as slurm_faults
from dpscale.launch.slurm.faults import JobEnd, outcome
from dpscale.launch.snakemake_hooks import slurm_status


@pytest.mark.parametrize(
    ("end", "status", "words"),
    [
        (JobEnd("7", "CANCELLED by 0", elapsed="00:00:05"), "failed", "CANCELLED by uid 0"),
        (
            JobEnd("7", "NODE_FAIL", nodes="n[1-2]", node_reasons="n2: pulled"),
            "failed",
            "NODE_FAIL on n[1-2]: n2: pulled",
        ),
        (JobEnd("7", "TIMEOUT", time_limit="00:01:00"), "failed", "time limit of 00:01:00"),
        (JobEnd("7", "OUT_OF_MEMORY"), "oom", "OUT_OF_MEMORY"),
        (JobEnd("7", "FAILED", exit_code="0:9", memory_killed=True), "oom", "memory limit"),
        (JobEnd("7", "PREEMPTED"), "failed", "PREEMPTED"),
        (JobEnd("7", "FAILED", exit_code="1:0"), "failed", "FAILED, exit code 1:0"),
        (JobEnd("7", "BOOT_FAIL"), "failed", "ended BOOT_FAIL"),
    ],
)
def test_a_state_slurm_ended_a_job_in_is_the_cells_status(end, status, words):
    got_status, reason = outcome(end)
    assert got_status == status and words in reason and "SLURM job 7" in reason


@pytest.mark.parametrize("state", ["REQUEUED", "PENDING", "RUNNING", "COMPLETING", "SUSPENDED"])
def test_a_job_slurm_is_not_done_with_has_no_status_yet(state):
    assert outcome(JobEnd("7", state)) is None


def test_a_completed_job_is_ok_and_its_cell_says_the_rest():
    assert outcome(JobEnd("7", "COMPLETED")) == ("ok", None)


def _slurm(answers):
    def run(command):
        return answers.get(command[0])

    return run


def test_the_state_comes_from_scontrol_when_sacct_does_not_answer():
    run = _slurm({"scontrol": "JobId=7 JobState=TIMEOUT Reason=TimeLimit TimeLimit=00:01:00"})
    end = slurm_faults.job_end("7", run)
    assert (end.state, end.source, end.time_limit) == ("TIMEOUT", "scontrol", "00:01:00")


def test_a_cell_without_a_result_gets_slurms_reason_and_one_with_is_left(tmp_path):
    cells = {c.cell_id: c for c in (make_cell(batch=2), make_cell(batch=4))}
    cells_dir, logs = tmp_path / "cells", tmp_path / "slurm_logs"
    kept = cells_dir / f"{make_cell(batch=4).cell_id}.json"
    kept.parent.mkdir(parents=True)
    kept.write_text("{}")
    for cell_id, job in zip(cells, ("41", "42"), strict=True):
        folder = logs / "rule_bench_cell" / slurm_faults.job_folder(cell_id)
        folder.mkdir(parents=True)
        (folder / f"{job}.log").write_text("slurmstepd: error: *** JOB CANCELLED ***\n")
    run = _slurm({"sacct": "41|CANCELLED by 0|0:15|00:00:05|00:10:00|n1|2026-01-01T00:00:00\n"})
    recorded = slurm_faults.record_failed_jobs(cells, cells_dir, logs, since=0, run=run, say=str)
    (cell_id,) = recorded
    result = json.loads((cells_dir / f"{cell_id}.json").read_text())
    assert result["status"] == "failed" and "CANCELLED by uid 0" in result["reason"]
    assert kept.read_text() == "{}"  # never replaced


def test_the_wildcard_folder_is_the_executors():
    cell_id = make_cell(batch=2).cell_id
    assert slurm_faults.job_folder(cell_id) == "_".join(
        ["torch-ddp", "resnet18-cifar32-c10", "synthetic", "1", "1", "2", "0"]
    )


def test_a_sacct_status_query_has_a_squeue_twin():
    sacct = "sacct -X --parsable2 --noheader --format=JobIdRaw,State --name abc-1"
    assert slurm_status.squeue_for(sacct) == (
        "squeue '--format=%i|%T' --states=all --noheader --name abc-1"
    )
    assert slurm_status.squeue_for("squeue --name abc-1") is None
