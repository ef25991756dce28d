"""What one benchmark cell asks a SLURM scheduler for, in snakemake-executor-plugin-slurm's
resource names. ``workflow/rules/common.smk`` passes these to rule ``bench_cell``; local runs
ignore them (the local executor only counts ``bench_slot``).

One job per cell, shaped like the processes the cell starts (``dpscale.launch.slurm.allocation``
starts them):

* one-process cells (strategies that drive all devices from one process, and every
  1-device cell): one task on one node with all the cell's devices and
  ``devices x cpus_per_device`` CPUs. No ``mpi`` resource, so the plugin runs the job
  inside ``srun -n1`` and the launcher starts the runner directly in that step.
* multi-process cells (one process per device and more than one device:
  ``dpscale.launch.kinds.uses_srun``): one task per device, ``cpus_per_device`` CPUs
  each, on ``nodes`` nodes, with
  ``mpi="srun"``: the plugin then runs the launcher in the batch step (no outer srun), and
  the launcher starts the ranks with its own ``srun``. ``devices_per_node > 1`` asks
  ``--ntasks-per-node`` (the plugin's ``tasks_per_node``); one device per node asks
  ``--ntasks=nodes``, which with ``--nodes`` places one task per node.

GPUs are asked per node with ``gres="gpu[:<model>]:<devices_per_node>"`` (``--gres`` is per
node), not with the plugin's ``gpu`` (``--gpus``, a total for the job, which SLURM may split
unevenly over the nodes, e.g. 6 + 2 for 2 x 4). On GPU jobs the plugin also turns ``tasks``
into ``--ntasks-per-gpu`` unless ``tasks_per_gpu`` is set; ``tasks_per_gpu=0`` keeps it out
(SLURM would otherwise bind each task to one GPU, while the runners pin the GPU of their
local rank among all the node's GPUs).

``mem_mb`` is per node (``--mem``). ``runtime`` (minutes) defaults to the cell's own
timeout (``measure.timeout_s``) plus ``STARTUP_MARGIN_MIN`` for start-up and imports.
Statically skipped cells only write their result: the smallest job.
"""

from __future__ import annotations

import math
from typing import Any

from dpscale.launch.kinds import uses_srun
from dpscale.plan.cell import Cell
from dpscale.registry import STRATEGIES

STARTUP_MARGIN_MIN = 10
SKIPPED_CELL = {"nodes": 1, "tasks": 1, "cpus_per_task": 1, "mem_mb": 1000, "runtime": 10}
# Every key bench_cell declares; a cell that does not need one gets None (not passed to sbatch).
RESOURCE_KEYS = (
    "nodes",
    "tasks",
    "tasks_per_node",
    "mpi",
    "cpus_per_task",
    "mem_mb",
    "runtime",
    "gres",
    "tasks_per_gpu",
)


def cell_resources(cell: Cell, cluster: dict[str, Any]) -> dict[str, int | str]:
    """The SLURM resources of one cell's job (only the keys it needs).

    ``cluster`` is the study config's ``cluster`` section (defaults filled in).
    """
    if cell.skip_reason:
        return dict(SKIPPED_CELL)
    cpus_per_device = cluster.get("cpus_per_device") or cell.threads_per_device
    per_node = cell.devices_per_node
    resources: dict[str, int | str] = {
        "nodes": cell.nodes,
        "mem_mb": per_node * int(cluster["mem_mb_per_device"]),
        "runtime": cluster.get("runtime_min")
        or math.ceil(cell.measure.timeout_s / 60) + STARTUP_MARGIN_MIN,
    }
    if uses_srun(cell, STRATEGIES[cell.strategy].launch):
        resources["mpi"] = "srun"
        resources["cpus_per_task"] = cpus_per_device
        if per_node > 1:
            resources["tasks_per_node"] = per_node
        else:
            resources["tasks"] = cell.nodes
    else:
        resources["tasks"] = 1
        resources["cpus_per_task"] = per_node * cpus_per_device
    if cell.accelerator == "cuda":
        model = cluster.get("gpu_model")
        resources["gres"] = f"gpu:{model}:{per_node}" if model else f"gpu:{per_node}"
        resources["tasks_per_gpu"] = 0
    return resources


def cell_resource(cell: Cell, cluster: dict[str, Any], name: str) -> int | str | None:
    if name not in RESOURCE_KEYS:
        raise KeyError(f"{name!r} is not one of bench_cell's SLURM resources {RESOURCE_KEYS}")
    return cell_resources(cell, cluster).get(name)
