"""Which build of each framework environment a study needs: the CPU one, or the CUDA one
its accelerator and its nodes' driver choose, so a GPU study edits no tracked file.

A build is named by a variant: ``cpu``, or ``cuda<major>`` (``cuda12``). Its requirements
are ``envs/<env>.txt`` for ``cpu`` and ``envs/<env>.<variant>.txt`` otherwise, kept beside
each other; the post script ``envs/<env>.post.sh`` is shared and reads the variant from
``$DPSCALE_ENV_VARIANT``. Each environment takes its newest CUDA build at or below the
driver's CUDA major (a driver runs what older toolkits built); one without any is one
config error naming the majors it has (docs/decisions/cuda-builds-by-study.md)."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dpscale.plan.errors import ConfigError
from dpscale.plan.paths import ENVS_DIR

CPU = "cpu"
# the CUDA major a study builds for when neither the study nor a driver on the planning host
# says: TensorFlow 2.15.1 and torch 2.13 publish CUDA 12 builds only
DEFAULT_CUDA_MAJOR = 12
VARIANT_FILE = re.compile(r"^(?P<env>[a-z0-9-]+)\.(?P<variant>cuda\d+)\.txt$")
DRIVER_CUDA = re.compile(r"CUDA Version:\s*(\d+)\.")


def cuda_variant(major: int) -> str:
    return f"cuda{major}"


def study_cuda_major(config: Mapping[str, Any], driver_major: int | None = None) -> int | None:
    """The CUDA major the study's nodes' driver runs: ``cuda_major``, else the planning
    host's driver (``driver_major``, read by :func:`driver_cuda_major` when None), else
    DEFAULT_CUDA_MAJOR; None on cpu."""
    if config.get("accelerator", CPU) != "cuda":
        return None
    major = config.get("cuda_major")
    if major is None:
        major = driver_major if driver_major is not None else driver_cuda_major()
    return int(major) if major is not None else DEFAULT_CUDA_MAJOR


def env_variant(env: str, major: int | None, envs_dir: Path) -> str:
    """The build of ``env`` for a driver of CUDA ``major``: the newest CUDA build at or
    below it (a driver runs what older toolkits built), ``cpu`` when ``major`` is None.
    Raises ConfigError, one line, when ``env`` has none."""
    if major is None:
        return CPU
    majors = cuda_majors(env, envs_dir)
    usable = [m for m in majors if m <= major]
    if not usable:
        raise ConfigError(
            f"cuda_major: {major} has no build of environment {env!r} (its builds need a "
            f"driver of CUDA {majors or 'none'}); allowed: {majors}, or an interpreters.{env} "
            "of the site's own"
        )
    return cuda_variant(max(usable))


def driver_cuda_major() -> int | None:
    """The CUDA major version the host's NVIDIA driver supports (``nvidia-smi``'s header),
    or None where there is no driver (a login node, a CPU machine)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        shown = subprocess.run([smi], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = DRIVER_CUDA.search(shown)
    return int(found.group(1)) if found else None


def requirements_file(env: str, variant: str, envs_dir: Path) -> Path:
    name = f"{env}.txt" if variant == CPU else f"{env}.{variant}.txt"
    return envs_dir / name


def cuda_majors(env: str, envs_dir: Path) -> list[int]:
    """The CUDA majors ``envs_dir`` holds a build of ``env`` for (``<env>.cuda<major>.txt``)."""
    found = []
    for path in envs_dir.glob(f"{env}.cuda*.txt"):
        match = VARIANT_FILE.match(path.name)
        if match and match["env"] == env:
            found.append(int(match["variant"].removeprefix("cuda")))
    return sorted(found)


def env_variants(
    config: Mapping[str, Any], envs: Iterable[str], envs_dir: Path = ENVS_DIR
) -> dict[str, str]:
    """Each environment's build for the study (ConfigError, one line, where one has none)."""
    major = study_cuda_major(config)
    return {env: env_variant(env, major, envs_dir) for env in sorted(set(envs))}


def check_env_variants(config: Mapping[str, Any], envs: Iterable[str], envs_dir: Path) -> None:
    """Every environment the study builds has a build for the study's CUDA major."""
    env_variants(config, envs, envs_dir)
