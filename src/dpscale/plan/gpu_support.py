"""What a framework's CUDA build cannot do on the study's GPU, said at plan time.

A GPU runs a build's kernels where the build carries machine code (SASS) for its
architecture (``sm_<major><k>`` with ``k`` at most the GPU's minor: sm_80 code runs on an 8.6
GPU, never on a 9.0 one) or PTX at or below its compute capability (compiled at start). The
builds' code lists were read from the pinned wheels with cuobjdump (``envs/cuda-archs.yaml``,
``benchmarks/cuda_builds.py --cuobjdump``); the GPU's compute capability comes from
``cluster.gpu_model`` where it names a GPU NVIDIA lists, else only the node can tell
(``dpscale doctor``). Mixed precision in bfloat16 needs compute capability 8.0.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpscale.plan.env_builds import CPU, env_variants
from dpscale.plan.errors import ConfigError
from dpscale.plan.paths import ENVS_DIR

ARCHS_FILE = "cuda-archs.yaml"
Capability = tuple[int, int]

# Compute capability by the names sites give GPUs in --gres (lower case, longest first
# matched as a prefix: a100_80gb is an a100). Source: NVIDIA, "CUDA GPUs - Compute
# Capability", https://developer.nvidia.com/cuda-gpus (read 2026-11-28).
GPU_CAPABILITY: dict[str, Capability] = {
    "p100": (6, 0),
    "v100": (7, 0),
    "t4": (7, 5),
    "a100": (8, 0),
    "a30": (8, 0),
    "a10": (8, 6),
    "a40": (8, 6),
    "a6000": (8, 6),
    "l4": (8, 9),
    "l40": (8, 9),
    "h100": (9, 0),
    "h200": (9, 0),
    "gh200": (9, 0),
    "b200": (10, 0),
    "gb200": (10, 0),
}
BF16_FROM: Capability = (8, 0)


def gpu_capability(gpu_model: str | None) -> Capability | None:
    """The compute capability of ``gpu_model`` as a site names it, or None when unknown."""
    if not gpu_model:
        return None
    name = gpu_model.lower()
    for known in sorted(GPU_CAPABILITY, key=len, reverse=True):
        if name.startswith(known):
            return GPU_CAPABILITY[known]
    return None


@functools.lru_cache(maxsize=4)
def build_archs(envs_dir: Path = ENVS_DIR) -> dict[str, dict[str, Any]]:
    """``<env>.<variant>`` -> its library's ``sass`` and ``ptx`` lists (as 80 for 8.0)."""
    # imported here: a rank imports runs_on, and a site's interpreter may lack yaml
    from dpscale.plan.config_files import load_yaml

    path = envs_dir / ARCHS_FILE
    return load_yaml(path) if path.is_file() else {}


def runs_on(archs: Mapping[str, Any], capability: Capability) -> bool:
    """Whether a build with these code lists runs on a GPU of ``capability``."""
    major, minor = capability
    sass = [(code // 10, code % 10) for code in archs.get("sass", [])]
    if any(m == major and k <= minor for m, k in sass):
        return True
    return any((code // 10, code % 10) <= capability for code in archs.get("ptx", []))


def cannot_run(env: str, variant: str, gpu_model: str, envs_dir: Path = ENVS_DIR) -> str | None:
    """Why ``env``'s ``variant`` build cannot run on ``gpu_model``, or None (also when the
    GPU or the build's code lists are unknown)."""
    capability = gpu_capability(gpu_model)
    archs = build_archs(envs_dir).get(f"{env}.{variant}")
    if capability is None or archs is None or runs_on(archs, capability):
        return None
    shown = ", ".join(f"sm_{code}" for code in archs.get("sass", [])) or "none"
    return (
        f"{archs['wheel']} carries GPU code for {shown} and PTX for "
        f"{archs.get('ptx') or 'none'}: a {gpu_model} (compute capability "
        f"{capability[0]}.{capability[1]}) cannot run it (envs/{ARCHS_FILE})"
    )


def gpu_skip_reasons(
    config: Mapping[str, Any], envs: list[str], envs_dir: Path = ENVS_DIR
) -> dict[str, str]:
    """Each environment of ``envs`` whose build cannot run on the study's GPU, with why."""
    gpu_model = (config.get("cluster") or {}).get("gpu_model")
    if config.get("accelerator") != "cuda" or not gpu_model:
        return {}
    reasons = {}
    for env, variant in env_variants(config, envs, envs_dir).items():
        reason = None if variant == CPU else cannot_run(env, variant, gpu_model, envs_dir)
        if reason:
            reasons[env] = reason
    return reasons


def with_gpu_skips(
    cells: list[Any], reasons: Mapping[str, str], env_of: Mapping[str, str]
) -> list[Any]:
    """``cells`` with the GPU's skip reason on each runnable cell of an environment that
    cannot run there (``env_of``: strategy -> environment)."""
    if not reasons:
        return cells
    return [
        dataclasses.replace(cell, skip_reason=reasons[env_of[cell.strategy]])
        if not cell.skip_reason and env_of[cell.strategy] in reasons
        else cell
        for cell in cells
    ]


def check_precision(config: Mapping[str, Any]) -> None:
    """amp_bf16 on a GPU older than compute capability 8.0 is one config error."""
    capability = gpu_capability((config.get("cluster") or {}).get("gpu_model"))
    if config.get("precision") != "amp_bf16" or capability is None or capability >= BF16_FROM:
        return
    raise ConfigError(
        f"precision: 'amp_bf16' needs compute capability 8.0 or newer; cluster.gpu_model "
        f"{config['cluster']['gpu_model']!r} is {capability[0]}.{capability[1]}; allowed: "
        "['fp32', 'amp_fp16']"
    )
