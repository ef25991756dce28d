"""A description of the system a cell ran on, stored with every result."""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from typing import Any

from dpscale.plan.paths import CHECKOUT


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# the CPU's vector extensions that decide which kernels a framework runs (TensorFlow turns
# oneDNN off by default without AVX-512): two studies on two CPUs are told apart by them
VECTOR_EXTENSIONS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "asimd",
    "sve",
)


def cpu_vector_extensions(cpuinfo: str | None = None) -> list[str]:
    """The vector extensions of VECTOR_EXTENSIONS the CPU lists in /proc/cpuinfo (its
    ``flags`` line, or ``Features`` on Arm), in that order; empty where unreadable."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as handle:
                cpuinfo = handle.read(200_000)
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            listed = set(value.split())
            return [name for name in VECTOR_EXTENSIONS if name in listed]
    return []


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def visible_gpu_count(listed_by_nvidia_smi: int, cuda_visible_devices: str | None) -> int:
    """GPUs a process can use: nvidia-smi's list, narrowed by CUDA_VISIBLE_DEVICES when set.

    When nvidia-smi lists none (missing on the node, or failing) the count cannot be
    checked, and CUDA_VISIBLE_DEVICES is taken as it is; the runner then counts the
    framework's own devices and fails a cell that sees fewer (runner.support.require_devices).
    """
    if cuda_visible_devices is None:
        return listed_by_nvidia_smi
    listed = len([d for d in str(cuda_visible_devices).split(",") if d.strip()])
    return min(listed_by_nvidia_smi, listed) if listed_by_nvidia_smi else listed


def nvidia_gpus() -> list[dict[str, str]]:
    """GPUs as nvidia-smi sees them (honours CUDA_VISIBLE_DEVICES only via the framework)."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = "index,name,driver_version,memory.total,uuid"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    keys = query.split(",")
    return [
        dict(zip(keys, (f.strip() for f in line.split(",")), strict=False))
        for line in out.splitlines()
        if line.strip()
    ]


def container() -> dict[str, str | None] | None:
    """The container this process runs in, as its runtime tells it (None: none found).

    Apptainer and Singularity set ``APPTAINER_CONTAINER`` / ``SINGULARITY_CONTAINER`` (the
    image; they report no digest); Podman writes ``/run/.containerenv`` (image and image
    id); Docker leaves ``/.dockerenv`` and says nothing of its image."""
    for runtime in ("apptainer", "singularity"):
        image = os.environ.get(f"{runtime.upper()}_CONTAINER")
        if image:
            return {"runtime": runtime, "image": image, "digest": None}
    try:
        with open("/run/.containerenv", encoding="utf-8") as handle:
            fields = dict(line.strip().split("=", 1) for line in handle if "=" in line)
        unquote = {key: value.strip('"') or None for key, value in fields.items()}
        return {
            "runtime": "podman",
            "image": unquote.get("image"),
            "digest": unquote.get("imageid"),
        }
    except OSError:
        pass
    if os.path.exists("/.dockerenv"):
        return {"runtime": "docker", "image": None, "digest": None}
    return None


def interpreter() -> dict[str, Any]:
    """What ran this process: its executable, the container it is in, and the interpreter
    dpscale was told to use (``DPSCALE_INTERPRETER``, set by dpscale.launch)."""
    configured = os.environ.get("DPSCALE_INTERPRETER")
    return {
        "python_executable": sys.executable,
        "container": container(),
        "launched_as": json.loads(configured) if configured else None,
    }


def git_commit() -> str:
    """dpscale's commit (``-dirty`` with uncommitted changes), or an installed package's
    version (no checkout, maybe no git). Ranks read the launcher's
    (``DPSCALE_COMMIT``): git may be missing in a container, and a short-lived child right
    after the timed windows would be counted as another process's CPU."""
    if os.environ.get("DPSCALE_COMMIT"):
        return os.environ["DPSCALE_COMMIT"]
    if CHECKOUT is None:  # an installed package: its version is what names the code
        return installed_version()
    try:
        commit = subprocess.run(
            ["git", "-C", str(CHECKOUT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(CHECKOUT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def installed_version() -> str:
    """``dpscale <version> (installed)``, as its package metadata says."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"dpscale {version('dpscale')} (installed)"
    except PackageNotFoundError:
        return "unknown"


def describe_system(
    framework_versions: dict[str, str],
    threads_used: int,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    scheduler = {k: v for k, v in os.environ.items() if k in _SLURM_KEYS}
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_vector_extensions": cpu_vector_extensions(),
        "cpus_usable": usable_cpus(),
        "threads_used": threads_used,
        "gpus": nvidia_gpus(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "interpreter": interpreter(),
        "framework_versions": framework_versions,
        "env_file_sha256": os.environ.get("DPSCALE_ENV_HASH", "unknown"),
        # sha256 of the environment's pip-freeze.txt: every package and version installed
        "env_freeze_sha256": os.environ.get("DPSCALE_ENV_FREEZE", "unknown"),
        "dpscale_commit": git_commit(),
        "scheduler": scheduler,
    }
    allocation = os.environ.get("DPSCALE_ALLOCATION")
    if allocation:  # set by dpscale.launch inside a SLURM job: what the job got, per node
        try:
            info["allocation"] = json.loads(allocation)
        except json.JSONDecodeError:
            info["allocation"] = {"unparsed": allocation}
    if extra:
        info.update(extra)
    return info


# What the process that writes the result sees of its SLURM job and step.
_SLURM_KEYS = {
    "SLURM_JOB_ID",
    "SLURM_JOB_NODELIST",
    "SLURM_NNODES",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NTASKS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_CPUS_ON_NODE",
    "SLURM_CPUS_PER_TASK",
    "SLURM_GPUS_ON_NODE",
    "SLURM_JOB_GPUS",
    "SLURM_STEP_GPUS",
    "SLURM_JOB_PARTITION",
    "SLURM_CLUSTER_NAME",
    "SLURM_STEP_ID",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_PROCID",
    "SLURMD_NODENAME",
}
