"""``dpscale doctor``: can this node run the study? A table a user can paste into an issue.

For each environment the study's strategies run in (built under ``env_dir``, or a site's
interpreter or container, ``interpreters``), its probe (dpscale.frameworks.doctor_probe)
runs inside it, all of them at once, each with a timeout: interpreter, framework versions,
the devices each framework sees, the CUDA, cuDNN and NCCL it was built with, oneDNN. Beside
them the node itself (dpscale.launch.setup.node_facts): nvidia-smi's GPUs and driver, the
network interfaces and InfiniBand devices, which of them NCCL would take, and the
``NCCL_SOCKET_IFNAME`` / ``NCCL_IB_HCA`` the study's ``cluster`` section and this shell give.
Then one line per problem, each saying what to do; the command exits non-zero where there
is one. On SLURM it runs the same on a compute node through ``srun`` (:func:`srun_command`).

This module puts the steps together, each in its own: the environments and their probes
(``doctor_targets``), the problems (``doctor_problems``), the text (``doctor_table``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpscale.launch.setup.doctor_problems import all_problems, devices_per_node
from dpscale.launch.setup.doctor_table import render
from dpscale.launch.setup.doctor_targets import PROBE_TIMEOUT_S, probe_all, targets
from dpscale.plan.strategy import Strategy


def doctor(
    config: Mapping[str, Any],
    strategies: Mapping[str, Strategy],
    files: Sequence[Path],
    timeout_s: float = PROBE_TIMEOUT_S,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, list[str]]:
    """The table and the problems (none: the node can run the study)."""
    environ = dict(os.environ if environ is None else environ)
    started = time.monotonic()
    found = targets(config, strategies, files)
    outcomes, node = probe_all(found, timeout_s, environ)
    problems = all_problems(config, found, outcomes, node, environ)
    seconds = time.monotonic() - started
    return render(config, files, found, outcomes, node, environ, problems, seconds), problems


def srun_command(
    config: Mapping[str, Any],
    files: Sequence[Path],
    timeout_s: float,
    environ: Mapping[str, str],
    extra: Sequence[str] = (),
    python: str = sys.executable,
) -> list[str]:
    """The doctor on one compute node shaped as the study's largest one-process cell asks:
    its GPUs (``--gres``), CPUs and memory, the account and partition the shipped profile
    reads (SBATCH_ACCOUNT, SBATCH_PARTITION); ``extra``: srun's own options, given last."""
    cluster = config.get("cluster") or {}
    devices = devices_per_node(config)
    per_device = cluster.get("cpus_per_device") or config.get("threads_per_device") or 1
    words = [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={devices * int(per_device)}",
        f"--mem={devices * int(cluster.get('mem_mb_per_device') or 8000)}",
        f"--time={max(5, int(timeout_s // 60) + 5)}",
        "--job-name=dpscale-doctor",
    ]
    for variable, option in (("SBATCH_ACCOUNT", "--account"), ("SBATCH_PARTITION", "--partition")):
        if environ.get(variable):
            words.append(f"{option}={environ[variable]}")
    if config["accelerator"] == "cuda":
        model = cluster.get("gpu_model")
        words.append(f"--gres=gpu:{model}:{devices}" if model else f"--gres=gpu:{devices}")
    inner = [python, "-m", "dpscale.cli", "doctor", *map(str, files), f"--timeout={timeout_s:g}"]
    return [*words, *extra, *inner]
