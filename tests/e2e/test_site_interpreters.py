"""The config's ``interpreters``: a site's own Python or a container's runs a framework's
processes instead of the environment dpscale builds; bad values stop the workflow first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from dpscale.launch.setup.envs import ensure_env

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = pytest.mark.side_by_side

STUDY = {
    "study": "site",
    "strategies": ["torch-ddp"],
    "models": [{"name": "resnet18", "stem": "imagenet", "image_size": 32, "classes": 10}],
    "batch_sizes": [2],
    "devices_per_node": [2],
    "nodes": [1],
    "modes": ["synthetic"],
    # again: []: a cell that reads noisy beside other tests is not measured a second time
    "measure": {
        "warmup_steps": 1,
        "windows": 2,
        "steps_per_window": 2,
        "timeout_s": 300,
        "again": [],
    },
}
# stands in for `apptainer exec IMAGE CMD...`: notes each start, says it is a container (as
# Apptainer does, APPTAINER_CONTAINER) and finds `python` on the container's PATH
FAKE_APPTAINER = """#!/bin/sh
[ "$1" = exec ] || exit 64
image=$2; shift 2
echo "$*" >> {log}
export APPTAINER_CONTAINER="$image" PATH="{bin}:$PATH"
exec "$@"
"""


def snakemake(study: dict, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    command = [sys.executable, "-m", "snakemake", *args, "--configfile", str(path)]
    command += ["--config", f"results_dir={tmp_path / 'results'}"]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)


def results(tmp_path: Path) -> list[dict]:
    cells = sorted((tmp_path / "results" / "site" / "cells").rglob("*.json"))
    return [json.loads(p.read_text()) for p in cells]


@pytest.fixture(scope="module")
def torch_env() -> Path:
    return ensure_env("torch")


def test_a_site_interpreter_runs_the_ranks_and_the_result_names_it(torch_env, tmp_path):
    site = tmp_path / "sw" / "pytorch"  # the same installation, reached by another path
    site.parent.mkdir()
    site.symlink_to(torch_env)
    python = str(site / "bin" / "python")
    run = snakemake({**STUDY, "interpreters": {"torch": python}}, tmp_path, "cells")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "environment torch" not in run.stderr  # nothing was built
    (result,) = results(tmp_path)
    assert result["status"] == "ok", result["reason"]
    system = result["system"]
    assert system["interpreter"]["launched_as"] == {
        "env": "torch",
        "source": "configured",
        "command": [python],
    }
    ranks = system["rank_interpreters"]
    assert [r["python_executable"] for r in ranks] == [python, python]


def test_a_command_prefix_starts_every_rank_of_an_emulated_two_node_cell(torch_env, tmp_path):
    log = tmp_path / "apptainer.log"
    wrapper = tmp_path / "apptainer"
    wrapper.write_text(FAKE_APPTAINER.format(log=log, bin=torch_env / "bin"))
    wrapper.chmod(0o755)
    study = {
        **STUDY,
        "devices_per_node": [1],
        "nodes": [2],
        "networks": [{"name": "lan", "rate": "1gbit"}],
        "interpreters": {"torch": [str(wrapper), "exec", "/images/pytorch.sif", "python"]},
    }
    run = snakemake(study, tmp_path, "cells")
    assert run.returncode == 0, run.stderr[-3000:]
    (result,) = results(tmp_path)
    assert result["status"] == "ok", result["reason"]
    ranks = result["system"]["rank_interpreters"]
    assert [r["container"]["image"] for r in ranks] == ["/images/pytorch.sif"] * 2
    starts = log.read_text().splitlines()
    rank_starts = [s for s in starts if "-m dpscale.launch.slurm.task torch" in s]
    assert len(rank_starts) == 2  # each emulated node's task entered the "container"
    assert all("-- python -m dpscale.strategies.torch_ddp" in s for s in rank_starts)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("/sw/nowhere/bin/python3", "/sw/nowhere/bin/python3 does not exist or is not executable"),
        (sys.executable, "the probe printed: ModuleNotFoundError: No module named 'torch'"),
        ([], "[] should be non-empty"),
    ],
    ids=["missing path", "no torch", "empty command"],
)
def test_a_bad_interpreter_stops_the_workflow_before_any_job_with_one_line(tmp_path, value, says):
    run = snakemake({**STUDY, "interpreters": {"torch": value}}, tmp_path, "cells")
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if "config error" in line]
    assert errors == [f"dpscale: config error: interpreters.torch: {says}"]
    assert not (tmp_path / "results").exists()
