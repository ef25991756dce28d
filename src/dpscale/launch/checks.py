"""Can this cell run where it was started, and did the job give it what it needs?

Decided where the cell runs, before anything starts: a cell this machine cannot run is
skipped with the reason (oversubscribed CPUs: its processes x their threads, and in a folder
cell their loaders' workers; no emulated network; no multi-node allocation); a SLURM job or
workstation that got less than the cell asks for (nodes, tasks, CPUs, GPUs) fails it. In a
job whose ranks are SLURM tasks a probe step asks each node what it gave the job; the
result's ``system.allocation`` records the answers.
"""

from __future__ import annotations

import os
import subprocess
from typing import TextIO

from dpscale.launch.emulation import interventions, netns
from dpscale.launch.kinds import uses_srun
from dpscale.launch.slurm import allocation as slurm
from dpscale.plan.cell import Cell
from dpscale.plan.layout import HOST_NETWORK
from dpscale.registry import strategy
from dpscale.runner.sysinfo import nvidia_gpus, usable_cpus, visible_gpu_count

PROBE_TIMEOUT_S = 120


def ranks_as_tasks(cell: Cell, allocation: slurm.Allocation | None) -> bool:
    """Start the cell's ranks as SLURM tasks (else: directly, as on a workstation).

    Cells whose launch kind starts one process per device (launch_kinds.uses_srun), in an
    allocation, unless the launcher already runs inside a job step (the plugin's
    ``srun -n1`` for jobs without ``mpi``): a nested srun would wait for the CPUs that step
    holds, so those run their processes locally in the step.
    """
    return (
        allocation is not None
        and not allocation.in_step
        and uses_srun(cell, strategy(cell.strategy).launch)
    )


def runtime_skip_reason(
    cell: Cell, allocation: slurm.Allocation | None = None, srun: bool = False
) -> str | None:
    """Reasons this machine cannot run a cell, decided where the cell runs.

    In a SLURM job whose ranks are SLURM tasks (``srun``) the nodes, CPUs and GPUs are
    checked per node by the probe step instead (a job that got less fails the cell).
    """
    if cell.skip_reason:
        return cell.skip_reason
    emulated = cell.nodes > 1 and cell.network.emulated
    if emulated and allocation is not None:
        return (
            f"network {cell.network.name!r} is emulated on one machine; in a SLURM job use "
            f"{HOST_NETWORK!r} or a real interconnect ({{name, interface}})"
        )
    if emulated:
        reason = netns.unavailable(cell.network.link.latency_s)
        if reason:
            return reason
    elif cell.nodes > 1 and allocation is None:
        return "multi-node launch needs a multi-node allocation; not available in local runs"
    if cell.interventions.any:
        reason = interventions.unavailable(cell)
        if reason:
            return reason
    if cell.accelerator == "cpu" and not srun:
        processes = cell.world_size if emulated else cell.devices_per_node
        wanted = processes * cell.cpus_per_rank
        cpus = allowed_cpus(cell)
        if wanted > cpus and not cell.measure.oversubscribe:
            return (
                f"needs {processes} device(s) x {per_rank_words(cell)} = {wanted} CPUs, this "
                f"machine has {cpus}: oversubscribed timings are meaningless "
                "(measure.oversubscribe runs it and keeps it only where network-bound)"
            )
    return None


def allowed_cpus(cell: Cell) -> int:
    """The CPUs the cell's processes may run on: config interventions.cpus, else the
    launcher's own."""
    return len(cell.interventions.cpus) if cell.interventions.cpus else usable_cpus()


def per_rank_words(cell: Cell) -> str:
    """What each rank keeps busy: its threads, and in a folder cell its loader's workers
    (they decode beside the step, so they count as the rank's threads do)."""
    threads = f"{cell.threads_per_device} thread(s)"
    if not cell.loader_workers:
        return threads
    return f"({threads} + {cell.loader_workers} loader worker(s), image_folder.workers)"


def shortage(
    cell: Cell,
    allocation: slurm.Allocation | None,
    srun: bool,
    python: list[str],
    env: dict[str, str],
    log: TextIO,
) -> tuple[list[dict], str | None]:
    """What each node gave the job (the probe step, when the ranks are SLURM tasks), and why
    that, or this machine, is less than the cell asks for (None: enough)."""
    if srun:
        probe, reason = probe_nodes(cell, allocation, python, env, log)
        return probe, reason or slurm.shortage(cell, allocation, probe)
    return [], device_shortage(cell) or local_allocation_shortage(cell, allocation)


def device_shortage(cell: Cell) -> str | None:
    """Fewer GPUs visible here than the cell puts on a node."""
    if cell.accelerator != "cuda":
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    seen = visible_gpu_count(len(nvidia_gpus()), visible)
    if seen < cell.devices_per_node:
        return (
            f"cell asks for {cell.devices_per_node} GPUs per node, the job sees {seen} "
            f"(CUDA_VISIBLE_DEVICES={visible})"
        )
    return None


def local_allocation_shortage(cell: Cell, allocation: slurm.Allocation | None) -> str | None:
    """A SLURM job that runs the cell's processes in its own step (no srun)."""
    if allocation is None or cell.nodes == 1:
        return None
    return (
        f"cell spans {cell.nodes} nodes, but the launcher runs inside a job step "
        f"(SLURM_STEP_ID set), where it cannot start tasks on other nodes: give the job "
        f"mpi='srun' (dpscale.launch.slurm.resources does for multi-process cells)"
    )


def probe_nodes(
    cell: Cell, allocation: slurm.Allocation, python: list[str], env: dict[str, str], log
) -> tuple[list, str | None]:
    """Run the probe step: what each node gave the job, or why the step failed."""
    command = slurm.probe_command(cell, python, allocation)
    print("[dpscale] $ " + " ".join(command), file=log, flush=True)
    try:
        done = subprocess.run(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return [], f"probe step (srun) did not finish: {error}"
    print(done.stdout, file=log, end="", flush=True)
    if done.returncode != 0:
        return [], (
            f"probe step (srun, one task per node) exited with {done.returncode}: the job "
            f"cannot start {cell.nodes} node(s) x {cell.devices_per_node} task(s) (see log)"
        )
    return slurm.parse_probe(done.stdout), None


def describe_allocation(
    allocation: slurm.Allocation | None, srun: bool, probe: list[dict]
) -> dict | None:
    """What the job got, for the result's ``system.allocation``."""
    if allocation is None:
        return None
    return {
        **allocation.to_dict(),
        "launch": "srun" if srun else "in-step",
        "probe": probe,
        "gpus_per_node_seen": [slurm.visible_gpu_count(node) for node in probe],
    }
