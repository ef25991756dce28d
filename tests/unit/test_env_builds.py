"""CUDA builds chosen by the study (issue 75): `accelerator: cuda` builds each framework's
newest CUDA build at or below the nodes' driver, from requirement files beside the CPU ones,
under a hash and a folder name of its own; a lock per build; a build that cannot run on the
study's GPU skips its cells at plan time; bfloat16 on an older GPU is one config error."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from dpscale.launch.setup import envs
from dpscale.plan import env_builds, gpu_support
from dpscale.plan.errors import ConfigError
from dpscale.plan.paths import ENVS_DIR
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES
from dpscale.runner.support import UnsupportedGpu, require_gpu_code


@pytest.fixture
def envs_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "envs"
    folder.mkdir()
    for name in ("fw.txt", "fw.cuda12.txt", "fw.cuda13.txt", "old.txt", "old.cuda11.txt"):
        (folder / name).write_text(f"# {name}\n")
    return folder


def cuda(major: int | None = None, **more) -> dict:
    return {"accelerator": "cuda", "cuda_major": major, **more}


@pytest.mark.parametrize(
    ("major", "fw", "old"),
    [(13, "cuda13", "cuda11"), (12, "cuda12", "cuda11"), (14, "cuda13", "cuda11")],
)
def test_each_environment_takes_its_newest_build_at_or_below_the_driver(envs_dir, major, fw, old):
    chosen = env_builds.env_variants(cuda(major), ["fw", "old"], envs_dir)
    assert chosen == {"fw": fw, "old": old}


def test_a_cpu_study_builds_the_cpu_files_whatever_cuda_major_says(envs_dir):
    chosen = env_builds.env_variants({"accelerator": "cpu", "cuda_major": 12}, ["fw"], envs_dir)
    assert chosen == {"fw": "cpu"}
    assert env_builds.requirements_file("fw", "cpu", envs_dir).name == "fw.txt"


def test_without_a_major_the_planning_host_s_driver_decides_else_12(envs_dir, monkeypatch):
    monkeypatch.setattr(env_builds, "driver_cuda_major", lambda: 13)
    assert env_builds.env_variants(cuda(), ["fw"], envs_dir) == {"fw": "cuda13"}
    monkeypatch.setattr(env_builds, "driver_cuda_major", lambda: None)
    assert env_builds.env_variants(cuda(), ["fw"], envs_dir) == {"fw": "cuda12"}


def test_the_driver_s_major_is_read_from_nvidia_smi_s_header():
    header = "| NVIDIA-SMI 570.86.15   Driver Version: 570.86.15   CUDA Version: 12.8     |"
    assert env_builds.DRIVER_CUDA.search(header).group(1) == "12"


def test_an_environment_without_a_build_for_the_driver_is_one_line_naming_it(envs_dir):
    with pytest.raises(ConfigError) as error:
        env_builds.env_variants(cuda(11), ["fw", "old"], envs_dir)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("cuda_major: 11 has no build of environment 'fw'")
    assert "allowed: [12, 13]" in message


def test_a_cuda_build_has_its_own_hash_folder_name_lock_and_wheel_cache(envs_dir, monkeypatch):
    monkeypatch.setenv("DPSCALE_WHEEL_CACHE", "/cache")
    cpu = envs.env_folder_name("fw", envs_dir)
    gpu = envs.env_folder_name("fw", envs_dir, variant="cuda12")
    assert cpu.startswith("fw-") and gpu.startswith("fw-cuda12-")
    assert cpu.rsplit("-", 1)[1] != gpu.rsplit("-", 1)[1]
    assert envs.split_folder_key(gpu.rsplit("-", 1)[0]) == ("fw", "cuda12")
    assert envs.split_folder_key("tf-horovod") == ("tf-horovod", "cpu")
    assert envs.lock_path("fw", envs_dir, variant="cuda12").name == "fw.cuda12.lock"
    assert envs.lock_path("fw", envs_dir).name == "fw.lock"
    assert envs.wheel_cache("fw", envs_dir, "cuda12") != envs.wheel_cache("fw", envs_dir)


def test_a_cpu_lock_never_pins_a_cuda_build(envs_dir):
    (envs_dir / "fw.lock").write_text("torch==2.13.0+cpu\n")
    assert envs.env_files("fw", envs_dir, variant="cuda12").lock is None


def test_the_post_script_is_told_its_build(envs_dir, tmp_path, monkeypatch):
    (envs_dir / "fw.post.sh").write_text("true\n")
    seen: list[dict] = []

    def run(command: list[str], log, env: dict | None = None) -> None:
        if command[1:3] == ["-m", "venv"]:
            Path(command[3]).mkdir(parents=True)
        if env:
            seen.append(env)

    monkeypatch.setattr(envs, "_run", run)
    monkeypatch.setattr(envs, "_freeze", lambda python: "numpy==1.23.5\n")
    with open(tmp_path / "log", "w") as log:
        envs.build_env("fw", tmp_path / "fw-cuda12-x", envs_dir, log=log, variant="cuda12")
    assert seen[0]["DPSCALE_ENV_VARIANT"] == "cuda12"


def test_every_shipped_framework_has_a_cuda_build_for_a_cuda_12_driver():
    needed = sorted({strategy.env for strategy in STRATEGIES.values()})
    chosen = env_builds.env_variants(cuda(12), needed, ENVS_DIR)
    assert all(variant.startswith("cuda") for variant in chosen.values())
    for env, variant in chosen.items():
        text = env_builds.requirements_file(env, variant, ENVS_DIR).read_text()
        cpu = env_builds.requirements_file(env, "cpu", ENVS_DIR).read_text()
        # the framework's version is the CPU build's: a GPU study measures the same release
        assert _pins(text) & _pins(cpu), env


def _pins(text: str) -> set[str]:
    versions = {line.split("==")[1].split("+")[0] for line in text.splitlines() if "==" in line}
    return {v for v in versions if v.startswith(("2.13.", "2.15.", "1.9."))}


@pytest.mark.parametrize(
    ("gpu", "capability"),
    [("a100_80gb", (8, 0)), ("A10", (8, 6)), ("h200", (9, 0)), ("l40s", (8, 9)), ("mi250", None)],
)
def test_a_site_s_gpu_name_gives_its_compute_capability(gpu, capability):
    assert gpu_support.gpu_capability(gpu) == capability


@pytest.mark.parametrize(
    ("archs", "capability", "runs"),
    [
        ({"sass": [80, 86], "ptx": []}, (8, 9), True),  # sm_86 code runs on 8.9
        ({"sass": [80, 86], "ptx": []}, (9, 0), False),  # never across a major
        ({"sass": [70], "ptx": [80]}, (9, 0), True),  # PTX compiled at start
        ({"sass": [70], "ptx": [80]}, (7, 5), True),
        ({"sass": [86], "ptx": [86]}, (8, 0), False),  # code for a newer GPU
    ],
)
def test_a_build_runs_where_its_code_or_its_ptx_covers_the_gpu(archs, capability, runs):
    assert gpu_support.runs_on(archs, capability) is runs


def study(**config) -> dict:
    base = yaml.safe_load((REPO / "config.yaml").read_text())
    return {**base, **config}


def test_mxnet_cells_on_an_h100_are_skipped_at_plan_time_with_why():
    config = study(
        accelerator="cuda",
        strategies=["torch-ddp", "mxnet-device"],
        cluster={"gpu_model": "h100"},
        cuda_major=12,
    )
    _, cells = plan_study(config, STRATEGIES, writes=False)
    mxnet = [c for c in cells if c.strategy == "mxnet-device"]
    torch = [c for c in cells if c.strategy == "torch-ddp"]
    assert mxnet and all("compute capability 9.0" in c.skip_reason for c in mxnet)
    assert torch and not any(c.skip_reason for c in torch if c.nodes == 1)


def test_mxnet_cells_on_an_a100_run():
    config = study(accelerator="cuda", strategies=["mxnet-device"], cluster={"gpu_model": "a100"})
    _, cells = plan_study(config, STRATEGIES, writes=False)
    assert not any("compute capability" in (c.skip_reason or "") for c in cells)


def test_bfloat16_on_a_v100_is_one_line_naming_the_precision():
    config = study(accelerator="cuda", precision="amp_bf16", cluster={"gpu_model": "v100"})
    with pytest.raises(ConfigError, match=r"^precision: 'amp_bf16' needs compute capability 8.0"):
        plan_study(config, STRATEGIES, writes=False)


def test_a_cuda_major_without_builds_is_refused_before_any_job():
    config = study(accelerator="cuda", cuda_major=11, strategies=["horovod-tf"])
    with pytest.raises(ConfigError, match=r"^cuda_major: 11 has no build of environment"):
        plan_study(config, STRATEGIES, writes=False)


def post_script(tmp_path: Path, nvcc_release: str | None) -> subprocess.CompletedProcess:
    """envs/tf-horovod.post.sh's CUDA build with only a fake nvcc (or none) on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sed", "dirname", "readlink", "mkdir", "ln"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    if nvcc_release:
        nvcc = bin_dir / "nvcc"
        nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {nvcc_release}'\n")
        nvcc.chmod(0o755)
    environ = {
        "PATH": str(bin_dir),
        "PYTHON": sys.executable,
        "PIP": f"{sys.executable} -m pip",
        "VIRTUAL_ENV": str(tmp_path / "venv"),
        "DPSCALE_WHEELS": str(tmp_path / "wheels"),
        "DPSCALE_ENV_VARIANT": "cuda12",
    }
    script = ENVS_DIR / "tf-horovod.post.sh"
    return subprocess.run(
        [shutil.which("bash"), "-euo", "pipefail", str(script)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(("release", "found"), [(None, "none"), ("13.0, V13.0.88", "CUDA 13 at")])
def test_horovod_s_nccl_build_without_a_cuda_12_toolkit_stops_in_one_line(tmp_path, release, found):
    done = post_script(tmp_path, release)
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA 12 toolkit" in lines[0] and found in lines[0]


@pytest.mark.parametrize(
    ("arch_list", "capability", "runs"),
    [
        (["sm_75", "sm_80", "sm_90"], (7, 0), False),  # torch's CUDA 13 build on a V100
        (["sm_75", "sm_80", "sm_90"], (8, 9), True),
        (["sm_70", "compute_80"], (9, 0), True),
        ([], (7, 0), True),  # a framework that does not say
    ],
)
def test_a_rank_on_a_gpu_its_build_cannot_run_fails_in_one_line(arch_list, capability, runs):
    if runs:
        require_gpu_code("torch 2.13.0+cu130", capability, arch_list)
        return
    with pytest.raises(UnsupportedGpu) as error:
        require_gpu_code("torch 2.13.0+cu130", capability, arch_list)
    assert "\n" not in str(error.value) and "compute capability 7.0" in str(error.value)
