"""A non-editable install runs a study from a folder outside the checkout: the workflow's
files travel in the package, results go to the current folder, and framework processes
import the installed dpscale alone. The framework environment is the checkout's (env_dir),
so the test builds no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from dpscale.launch.setup.envs import ensure_env

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]
STUDY = {
    "study": "installed",
    "strategies": ["torch-ddp"],
    "models": [{"name": "resnet18", "stem": "imagenet", "image_size": 32, "classes": 10}],
    "batch_sizes": [2],
    "devices_per_node": [1],
    "nodes": [1],
    "modes": ["synthetic"],
    "measure": {"warmup_steps": 1, "windows": 2, "steps_per_window": 2, "timeout_s": 300},
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv outside the checkout with ``pip install --no-deps <checkout>``; its bin/.
    Its dependencies are the test's own (a .pth names this venv's site-packages, whose own
    .pth files, the checkout's editable dpscale among them, are not read): installing them
    again took most of a minute and is what `make` does on every fresh clone anyway."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    purelib = Path(sysconfig.get_paths(vars={"base": str(venv)})["purelib"])
    (purelib / "dpscale-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    script = Path(sysconfig.get_paths()["scripts"]) / "snakemake"  # pip's, for this venv
    body = script.read_text().split("\n", 1)[1]
    (venv / "bin" / "snakemake").write_text(f"#!{venv / 'bin' / 'python'}\n{body}")
    (venv / "bin" / "snakemake").chmod(0o755)
    started = time.monotonic()
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(REPO)]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=600, env=outside())
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"pip install took {time.monotonic() - started:.0f} s")
    return venv / "bin"


def outside(**extra: str) -> dict[str, str]:
    """The environment without the checkout's src/ on PYTHONPATH (the tests run with it)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**env, **extra}


def dpscale(bin_dir: Path, folder: Path, *args: str, timeout: int = 60) -> str:
    command = [str(bin_dir / "dpscale"), *args]
    env = outside(XDG_CACHE_HOME=str(folder / "cache"))  # the import folder goes there
    done = subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_the_installed_package_runs_a_study_outside_the_checkout(installed, tmp_path):
    env_dir = ensure_env("torch").parent  # built once for every test that needs torch
    folder = tmp_path / "somewhere"
    folder.mkdir()
    (folder / "tiny.yaml").write_text(yaml.safe_dump({**STUDY, "env_dir": str(env_dir)}))
    assert dpscale(installed, folder, "--version").startswith("dpscale ")
    assert "config ok" in dpscale(installed, folder, "check", "tiny.yaml")
    where = subprocess.run(
        [str(installed / "python"), "-c", "import dpscale; print(dpscale.__file__)"],
        env=outside(),
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert not Path(where.strip()).is_relative_to(REPO)
    dpscale(installed, folder, "run", "--configfile", "tiny.yaml", timeout=900)
    out = folder / "results" / "installed"
    result = json.loads(next((out / "cells").rglob("n1-d1-b2-r0.json")).read_text())
    assert result["status"] == "ok", result.get("reason")
    assert result["system"]["dpscale_commit"].endswith("(installed)")
    assert (out / "report.html").stat().st_size > 0
    imports = list((folder / "cache" / "dpscale" / "import").iterdir())
    assert len(imports) == 1 and os.listdir(imports[0]) == ["dpscale"]  # not site-packages


def test_the_installed_package_locks_a_built_environment(installed, tmp_path):
    env_dir = ensure_env("torch").parent
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump({**STUDY, "env_dir": str(env_dir)}))
    dpscale(installed, tmp_path, "lock", "tiny.yaml", "--out", "locks")
    lock = (tmp_path / "locks" / "torch.lock").read_text()
    assert "\ntorch==" in lock and "# frozen from: " in lock
