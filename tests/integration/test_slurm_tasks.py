"""SLURM launches that start real processes, with stand-ins for srun: the probe step that
finds fewer nodes than the cell asks, and mxnet_ps starting its workers as srun tasks."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from conftest import make_cell
from dpscale.launch import launcher
from dpscale.launch.slurm import allocation as slurm
from dpscale.launch.starters import mxnet_ps
from dpscale.plan.paths import SRC_DIR
from helpers.slurm_fakes import no_scontrol, node

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = pytest.mark.side_by_side


def test_launcher_fails_a_multi_node_cell_when_the_job_got_one_node(tmp_path, monkeypatch):
    """End to end through dpscale.launch with a fake srun: the probe shows one node."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    srun = fake_bin / "srun"
    probe_line = json.dumps(node("n1", 0, cpus=2, gpus=0, visible=None))
    srun.write_text(f"#!/bin/sh\necho '{probe_line}'\n")
    srun.chmod(0o755)
    for key in list(__import__("os").environ):
        if key.startswith("SLURM_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PATH", f"{fake_bin}:/usr/bin:/bin")
    monkeypatch.setenv("SLURM_JOB_ID", "9")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[1-2]")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setattr(slurm, "run_quietly", no_scontrol)
    cell = make_cell("torch-ddp", devices=1, nodes=2)
    out = cell.result_path(tmp_path / "results")
    status = launcher.launch(cell, out, tmp_path / "env", tmp_path / "cell.log")
    result = json.loads(out.read_text())
    assert status == "failed"
    assert result["reason"] == "only 1 of the job's 2 nodes answered the probe step"
    allocation = result["system"]["allocation"]
    assert allocation["nodes"] == ["n1", "n2"] and allocation["launch"] == "srun"
    assert allocation["probe"][0]["node"] == "n1"
    assert result["system"]["scheduler"]["SLURM_JOB_ID"] == "9"


FAKE_RUNNER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    folder, role = Path(sys.argv[1]), os.environ["DMLC_ROLE"]
    keys = ["DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_NODE_HOST", "DPSCALE_LOCAL_RANK"]
    name = f"{role}-{os.environ.get('DPSCALE_LOCAL_RANK', '')}-{os.getpid()}"
    (folder / name).write_text(json.dumps({k: os.environ.get(k) for k in keys}))
    if role != "worker":
        while len(list(folder.glob("worker-*"))) < 2:
            time.sleep(0.05)
    """
)


# Stands in for srun: starts the command twice as tasks 0 and 1 of one node.
FAKE_SRUN = textwrap.dedent(
    """
    import os, subprocess, sys
    procs = []
    for i in range(2):
        env = dict(os.environ, SLURM_PROCID=str(i), SLURM_LOCALID=str(i), SLURM_NODEID="0",
                   SLURM_STEP_NUM_TASKS="2", SLURM_STEP_TASKS_PER_NODE="2",
                   SLURMD_NODENAME="n1")
        procs.append(subprocess.Popen(sys.argv[1:], env=env))
    sys.exit(max(p.wait() for p in procs))
    """
)


def test_mxnet_ps_starts_workers_through_the_launcher(tmp_path, monkeypatch):
    (tmp_path / "runner.py").write_text(FAKE_RUNNER)
    (tmp_path / "srun.py").write_text(FAKE_SRUN)
    monkeypatch.setenv("PYTHONPATH", str(SRC_DIR))
    monkeypatch.setenv("DPSCALE_NODE_ADDRS", json.dumps({"n1": "10.1.1.1"}))
    seen = tmp_path / "seen"
    seen.mkdir()
    launcher = [sys.executable, str(tmp_path / "srun.py"), sys.executable, "-m"]
    launcher += ["dpscale.launch.slurm.task", "mxnet", "--"]
    command = [sys.executable, str(tmp_path / "runner.py"), str(seen)]
    code = mxnet_ps.run(
        command,
        workers=2,
        servers=1,
        timeout_s=60,
        host="10.1.1.1",
        worker_command=launcher + command,
    )
    assert code == 0
    records = [json.loads(p.read_text()) for p in seen.iterdir()]
    by_role = {}
    for record in records:
        by_role.setdefault(record["DMLC_ROLE"], []).append(record)
    assert len(by_role["scheduler"]) == 1 and len(by_role["server"]) == 1
    assert by_role["scheduler"][0]["DMLC_NODE_HOST"] == "10.1.1.1"
    assert sorted(w["DPSCALE_LOCAL_RANK"] for w in by_role["worker"]) == ["0", "1"]
    assert {w["DMLC_NODE_HOST"] for w in by_role["worker"]} == {"10.1.1.1"}
    assert {r["DMLC_PS_ROOT_URI"] for r in records} == {"10.1.1.1"}
