"""One SLURM task of a multi-process cell: set the framework's rank variables from the
task's SLURM ids, then become the runner.

    python -m dpscale.launch.slurm.task KIND -- RUNNER...    # KIND: a dpscale.launch.kinds kind
    python -m dpscale.launch.slurm.task --probe              # print what this node gave the job

Started by ``srun`` (see dpscale.launch.slurm.allocation) with block distribution, so
SLURM_PROCID is the global rank, SLURM_LOCALID the rank on the node (the device it pins) and
SLURM_NODEID the node's index. Stdlib only: runs with any framework environment's Python.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Mapping

from dpscale.launch.kinds import KINDS
from dpscale.launch.slurm import rank as slurm_rank
from dpscale.runner.sysinfo import nvidia_gpus, usable_cpus


def task_env(kind: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables ``kind``'s runtime reads to find its rank (added to ``env``)."""
    if kind not in KINDS or KINDS[kind].one_process:
        ranked = sorted(name for name, k in KINDS.items() if not k.one_process)
        raise ValueError(f"kind {kind!r} is not one of {ranked}")
    return KINDS[kind].rank_env(slurm_rank.slurm_ids(env), env)


def probe(env: Mapping[str, str]) -> dict[str, object]:
    """What this node gave the job, as this task sees it."""
    node_index = int(env.get("SLURM_NODEID", 0))
    job_cpus = env.get("SLURM_JOB_CPUS_PER_NODE")
    return {
        "node": env.get("SLURMD_NODENAME"),
        "node_index": node_index,
        "host": socket.gethostname(),
        # the job's CPUs on this node (SLURM_CPUS_ON_NODE would be this 1-CPU step's)
        "job_cpus_on_node": slurm_rank.count_on_node(job_cpus, node_index) if job_cpus else None,
        "cpus_usable": usable_cpus(),
        "gpus_on_node": env.get("SLURM_GPUS_ON_NODE"),
        "job_gpus": env.get("SLURM_JOB_GPUS"),
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "gpus": nvidia_gpus(),
    }


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--probe"]:
        print(json.dumps(probe(os.environ), sort_keys=True), flush=True)
        return
    if len(args) < 3 or args[0] not in KINDS or args[1] != "--":
        sys.exit(f"usage: python -m dpscale.launch.slurm.task {{{'|'.join(KINDS)}}} -- COMMAND...")
    kind, command = args[0], args[2:]
    env = dict(os.environ)
    env.update(task_env(kind, env))
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
