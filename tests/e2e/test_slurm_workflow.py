"""End to end on a real SLURM cluster: the tiny study of tests/data/slurm_tiny.yaml through
``snakemake --profile tests/slurm_profile`` (snakemake's SLURM executor), every cell one job.

Checks that every strategy's cells ran as SLURM jobs and left valid results; that the
multi-process cells started their ranks as SLURM tasks (one per device), on two nodes for
the 2-node cells (tests/helpers/slurm_cluster.py declares two nodes, each its own slurmd on this
machine); that every rank ended with the same parameters; and what sacct recorded.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import MULTI_PROCESS, ONE_PROCESS, REPO, built_envs
from dpscale.plan.result import read_result
from helpers.slurm_cluster import timed_out  # the session fixture slurm_cluster: tests/conftest.py

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.side_by_side]

STUDY = REPO / "tests" / "data" / "slurm_tiny.yaml"
RUN_TIMEOUT_S = 1800  # includes building the framework environments on a fresh machine


def _snakemake(
    cluster,
    results: Path,
    nodes: list[int],
    targets: list[str] | None = None,
    **study_keys: object,
) -> subprocess.CompletedProcess:
    """Run the tiny study (with ``study_keys`` over the file's) through the SLURM profile,
    to ``targets`` (paths under the study's folder), by default its cells' table."""
    study = yaml.safe_load(STUDY.read_text()) | study_keys
    study["nodes"] = nodes  # 2-node cells only where the cluster has two nodes
    config = results / "slurm_tiny.yaml"
    config.write_text(yaml.safe_dump(study))
    # the cells and their table: the analysis and report after it run on the launching
    # host as in any study (tests/e2e/test_workflow.py runs them)
    folder = results / study["study"]
    command = [
        sys.executable,
        "-m",
        "snakemake",
        *[str(folder / target) for target in targets or ["tables/cells.csv"]],
        "--profile",
        str(cluster.profile),
        "--workflow-profile",
        "none",
        "--slurm-status-command",
        cluster.status_command,
        "--configfile",
        str(config),
        "--config",
        f"results_dir={results}",
    ]
    if cluster.partition != "dpscale":  # the test profile names start.sh's default
        command += ["--default-resources", f"slurm_partition={cluster.partition}"]
    env = dict(cluster.env)
    env.pop("SNAKEMAKE_PROFILE", None)
    print("$ " + " ".join(command))
    try:
        return subprocess.run(
            command,
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return timed_out(exc, f"snakemake timed out after {RUN_TIMEOUT_S}s")


def _sacct(cluster, job_ids: list[str]) -> str:
    fields = "JobID,Comment%60,NNodes,NTasks,AllocCPUS,State,ExitCode,Elapsed,NodeList%24"
    return cluster.run("sacct", "-j", ",".join(job_ids), "-o", fields).stdout


def _sacct_rows(cluster, job_ids: list[str]) -> list[dict[str, str]]:
    out = cluster.run(
        "sacct", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,NNodes,NTasks,State"
    ).stdout
    keys = ("JobID", "NNodes", "NTasks", "State")
    return [dict(zip(keys, line.split("|"), strict=False)) for line in out.splitlines() if line]


@pytest.fixture(scope="module")
def slurm_study(slurm_cluster, tmp_path_factory):
    cluster = slurm_cluster
    assert cluster.cpus >= 2, (
        f"2-task cells need 2 CPUs on a node; {cluster.node} has {cluster.cpus}"
    )
    nodes = [1, 2] if len(cluster.nodes) >= 2 else [1]
    results = tmp_path_factory.mktemp("slurm-results")
    built_envs(yaml.safe_load(STUDY.read_text())["strategies"])
    started = time.monotonic()
    run = _snakemake(cluster, results, nodes)
    elapsed = time.monotonic() - started
    context = (
        f"rc={run.returncode}\n--- snakemake output (tail)\n{(run.stdout + run.stderr)[-5000:]}"
        f"\n--- daemon logs\n{cluster.log_tails(15)}"
    )
    assert run.returncode == 0, context
    print(f"slurm_tiny study on SLURM ({len(nodes)} node layouts): {elapsed:.0f} s")
    return cluster, results / "slurm_tiny", nodes, results


def _results(folder: Path) -> dict[str, dict]:
    return {
        str(path.relative_to(folder / "cells").with_suffix("")): read_result(path)
        for path in sorted((folder / "cells").rglob("*.json"))
    }


def test_every_cell_ran_as_its_own_slurm_job_and_left_a_valid_result(slurm_study):
    cluster, folder, nodes, _ = slurm_study
    results = _results(folder)  # read_result validates against the result schema
    results = {cell: result for cell, result in results.items() if "/control-" not in cell}
    assert len(results) == 5 * 2 * len(nodes)  # strategies x devices (1, 2) x nodes
    job_ids = {}
    for cell_id, result in results.items():
        job_id = result["system"]["scheduler"].get("SLURM_JOB_ID")
        assert job_id, f"{cell_id} did not run in a SLURM job: {result['system']['scheduler']}"
        job_ids[cell_id] = job_id
        strategy, layout = cell_id.split("/")[0], cell_id.split("/")[-1]
        skipped = strategy in ONE_PROCESS and not layout.startswith("n1-d1")
        assert result["status"] == ("skipped" if skipped else "ok"), (cell_id, result["reason"])
    assert len(set(job_ids.values())) == len(job_ids), "one job per cell"

    print(_sacct(cluster, sorted(job_ids.values(), key=int)))
    if cluster.accounting:
        rows = {row["JobID"]: row for row in _sacct_rows(cluster, list(job_ids.values()))}
        for cell_id, job_id in job_ids.items():
            assert rows[job_id]["State"] == "COMPLETED", (cell_id, rows[job_id])


def test_multi_process_cells_start_one_slurm_task_per_device(slurm_study):
    cluster, folder, nodes, _ = slurm_study
    results = _results(folder)
    for strategy in MULTI_PROCESS:
        for n in nodes:
            for devices in (1, 2):
                if n * devices == 1:
                    continue
                cell_id = f"{strategy}/resnet18-imagenet32-c10/synthetic/n{n}-d{devices}-b2-r0"
                result = results[cell_id]
                allocation = result["system"]["allocation"]
                assert allocation["launch"] == "srun", cell_id
                assert len(set(allocation["nodes"])) == n, (cell_id, allocation["nodes"])
                assert sorted(p["node"] for p in allocation["probe"]) == allocation["nodes"]
                checksums = result["measurement"]["rank_param_checksums"]
                assert len(checksums) == n * devices and len(set(checksums)) == 1, cell_id
                # the rank that wrote the result was a task of the job's srun step
                scheduler = result["system"]["scheduler"]
                assert scheduler["SLURM_STEP_NUM_TASKS"] == str(n * devices), scheduler
                assert scheduler["SLURM_STEP_NUM_NODES"] == str(n), scheduler
                if cluster.accounting:
                    steps = {
                        row["JobID"]: row
                        for row in _sacct_rows(cluster, [scheduler["SLURM_JOB_ID"]])
                    }
                    ranks = steps[f"{scheduler['SLURM_JOB_ID']}.{scheduler['SLURM_STEP_ID']}"]
                    assert (ranks["NNodes"], ranks["NTasks"]) == (str(n), str(n * devices))
    one_device = results["torch-ddp/resnet18-imagenet32-c10/synthetic/n1-d1-b2-r0"]
    assert one_device["system"]["allocation"]["launch"] == "in-step"


def test_cells_table_shows_the_job_each_cell_ran_in(slurm_study):
    _, folder, _, _ = slurm_study
    cells = pd.read_csv(folder / "tables" / "cells.csv")
    assert cells["slurm_job_id"].notna().all()
    ran = cells[cells["status"] == "ok"]
    multi = ran[ran["world_size"] > 1]
    assert (multi["slurm_nodes"].str.count(";") + 1 == multi["nodes"]).all()
    # the scheduler's queue wait beside the start-up phases (whole seconds, from scontrol)
    assert (ran["queue_wait_s"] >= 0).all() and ran["startup_s"].notna().all()
    columns = ["cell_id", "status", "slurm_job_id", "slurm_nodes", "img_s_mean", "queue_wait_s"]
    print(cells[columns].to_string())


def test_control_cells_run_through_the_profile_like_any_cell(slurm_study):
    """A layout's control cells (config ``controls``) are SLURM jobs with one task per rank,
    as the cell they copy: the barrier control of each strategy that splits its loss, on
    the widest layout the cluster has (its other controls run the same rule)."""
    cluster, folder, nodes, results = slurm_study
    n = max(nodes)
    targets = [
        f"cells/{strategy}/resnet18-imagenet32-c10/control-barrier/n{n}-d2-b2-r0.json"
        for strategy in ("torch-ddp", "horovod-tf")
    ]
    run = _snakemake(cluster, results, nodes, targets, controls=["barrier"])
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    for target in targets:
        result = read_result(folder / target)
        assert result["status"] == "ok", (target, result["reason"])
        assert result["cell"]["control"] == "barrier", result["cell"]
        allocation = result["system"]["allocation"]
        assert allocation["launch"] == "srun" and len(set(allocation["nodes"])) == n, target
        scheduler = result["system"]["scheduler"]
        assert scheduler.get("SLURM_JOB_ID"), (target, scheduler)
        assert scheduler["SLURM_STEP_NUM_TASKS"] == str(n * 2), scheduler
