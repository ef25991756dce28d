"""``dpscale doctor`` as a user runs it: on the default study with its built environments it
prints its tables within 30 s, says this CPU machine has no GPU, and exits 0; an environment
that is broken (its Python fails) or missing (a site interpreter that is not there) is one
problem line naming it, and a non-zero exit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SIDE_BY_SIDE, built_envs
from dpscale.cli_workflow import planned
from dpscale.launch.setup.envs import COMPLETE_FLAG, env_prefix

DONE_WITHIN_S = 30


def doctor(*words: str, cwd: Path = REPO) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "dpscale.cli", "doctor", *words],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, time.monotonic() - started


def problem_lines(output: str) -> list[str]:
    after = output.split("\nProblems", 1)[1].split("\n\n", 1)[0]
    return [line for line in after.splitlines() if line.startswith("- ")]


# slow: builds the default study's environments where they are not built (then times only
# the doctor); not side by side: it times the command, which a busy machine slows
@pytest.mark.slow
def test_the_default_study_on_this_cpu_machine_is_healthy_within_30_s():
    config, _ = planned([], writes=False)
    built_envs(config["strategies"])
    done, seconds = doctor()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    out = done.stdout
    assert seconds < DONE_WITHIN_S, f"dpscale doctor took {seconds:.1f} s"
    assert out.startswith("## dpscale doctor: study default on ")
    assert "| check | on this node |" in out and "| environment | strategies |" in out
    assert "| GPUs | no GPU: " in out and "the study's accelerator is cpu: it needs none" in out
    assert "Problems: none" in out
    for env in ("torch", "tf-horovod", "mxnet"):
        row = next(line for line in out.splitlines() if line.startswith(f"| {env} |"))
        assert "(built)" in row and row.rstrip(" |").endswith(" s"), row
    assert "| tf-horovod |" in out and "horovod 0.28.1" in out and "tensorflow 2.15" in out


def study_file(folder: Path, **config) -> Path:
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump({"study": "doctor", "strategies": ["torch-dp"], **config}))
    return path


@SIDE_BY_SIDE
def test_an_environment_whose_python_fails_is_one_line_naming_it(tmp_path):
    prefix = env_prefix("torch", tmp_path / "envs")
    python = prefix / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho 'ImportError: libtorch_cpu.so: cannot open' >&2\nexit 1\n")
    python.chmod(0o755)
    (prefix / COMPLETE_FLAG).write_text("built\n")
    done, _ = doctor(str(study_file(tmp_path, env_dir=str(tmp_path / "envs"))))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert problem_lines(done.stdout) == [
        f"- environment torch ({python}): the probe exited with code 1: ImportError: "
        f"libtorch_cpu.so: cannot open: remove {prefix} and build it again (dpscale run builds "
        f"it; its build log is {prefix.parent / 'logs' / prefix.name}.log)"
    ]
    assert "| torch | torch-dp |" in done.stdout


@SIDE_BY_SIDE
def test_a_site_interpreter_that_is_not_there_is_one_line_naming_it(tmp_path):
    missing = str(tmp_path / "sw" / "python3")
    done, _ = doctor(str(study_file(tmp_path, interpreters={"torch": missing})))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert problem_lines(done.stdout) == [
        f"- interpreters.torch: {missing} does not exist or is not executable on this node: "
        "give the path the node has, or load its module before dpscale"
    ]


@SIDE_BY_SIDE
def test_a_probe_that_hangs_is_stopped_at_its_timeout_and_named(tmp_path):
    hangs = tmp_path / "python3"
    hangs.write_text("#!/bin/sh\nsleep 120\n")
    hangs.chmod(0o755)
    done, seconds = doctor(
        str(study_file(tmp_path, interpreters={"torch": str(hangs)})), "--timeout", "1"
    )
    assert done.returncode == 1 and seconds < 30, done.stdout[-3000:] + done.stderr[-2000:]
    (line,) = problem_lines(done.stdout)
    assert line.startswith(f"- interpreters.torch ({hangs}): the probe did not finish in 1 s: ")
    assert "--timeout S" in line
