"""A GPU study edits no tracked file (issue 75): Snakemake's dry run of a study on cuda plans
each framework's CUDA build, in the folder its own files' hash names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from conftest import REPO
from dpscale.launch.setup.envs import env_folder_name


def test_the_dry_run_builds_each_framework_s_cuda_build_under_its_own_hash(tmp_path: Path):
    study = tmp_path / "gpu.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "study": "gpu_dry_run",
                "accelerator": "cuda",
                "cuda_major": 13,
                "strategies": ["torch-ddp", "horovod-tf", "mxnet-device"],
                "results_dir": str(tmp_path / "results"),
                "env_dir": str(tmp_path / "envs"),
            }
        )
    )
    snakemake = Path(sys.executable).parent / "snakemake"
    run = subprocess.run(
        [str(snakemake), "-n", "--configfile", str(study), "--until", "build_env"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    planned = run.stdout + run.stderr
    expected = {
        "torch": "cuda13",  # the newest at or below the driver's 13
        "tf-horovod": "cuda12",  # TensorFlow 2.15 has CUDA 12 only; a 13 driver runs it
        "mxnet": "cuda11",
    }
    for env, variant in expected.items():
        folder = env_folder_name(env, variant=variant)
        assert f"{folder}/.dpscale-env-ready" in planned, (env, planned[-3000:])
        assert env_folder_name(env) not in planned, env  # never the CPU build
