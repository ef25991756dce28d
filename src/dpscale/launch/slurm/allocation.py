"""Launching one cell's processes inside a SLURM allocation.

The launcher (``dpscale.launch``) runs once per cell, in the job that snakemake's SLURM
executor submitted for it (resources from ``dpscale.launch.slurm.resources``), and stays the
one process that always leaves a result. How it starts the cell's processes:

* one-process cells (``torch-dp``, ``mxnet-device``, 1-device cells): the job is one task
  with all the node's devices; the plugin already runs the launcher inside that task
  (``srun -n1``), so the runner is started directly, as on a workstation.
* multi-process cells (one process per device): the job has one task per device
  (``mpi="srun"``: the launcher runs in the batch step, on the allocation's first node). The
  launcher first runs a probe step (one task per node) that reports what each node really
  got, then starts one SLURM task per device with the srun line of :func:`srun_prefix`,
  rendered by the strategy's launch kind (dpscale.launch.kinds). Every task runs
  ``python -m dpscale.launch.slurm.task KIND -- RUNNER...``, which turns SLURM_PROCID /
  SLURM_LOCALID / SLURM_NODEID (dpscale.launch.slurm.rank) into the framework's rank
  variables.

Everything here is a pure function of the cell and an :class:`Allocation` (parsed from the
environment, with ``scontrol`` only to fill in what the environment lacks), so the command
lines are tested without SLURM. What a task reads about itself once srun started it is in
dpscale.launch.slurm.rank. Stdlib only.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from dpscale.plan.cell import Cell
from dpscale.runner.sysinfo import visible_gpu_count as _visible_gpus

SCONTROL_TIMEOUT_S = 20

Runner = Callable[[Sequence[str]], str | None]  # runs a command, returns stdout or None


# ------------------------------------------------------------------ node lists


def _split_top_level(text: str) -> list[str]:
    """Split at commas that are not inside brackets."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _expand_range(spec: str) -> list[str]:
    values = []
    for part in spec.split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            width = len(low)
            values += [str(i).zfill(width) for i in range(int(low), int(high) + 1)]
        elif part:
            values.append(part)
    return values


def expand_nodelist(nodelist: str) -> list[str]:
    """``node[01-03],gpu5`` -> ``['node01', 'node02', 'node03', 'gpu5']`` (SLURM hostlist
    syntax: comma lists, bracketed ranges with zero padding, several bracket groups)."""
    names: list[str] = []
    for item in _split_top_level(nodelist):
        match = re.match(r"^([^\[]*)\[([^\]]+)\](.*)$", item)
        if not match:
            names.append(item)
            continue
        prefix, spec, rest = match.groups()
        tails = expand_nodelist(rest) if rest else [""]
        names += [f"{prefix}{value}{tail}" for value in _expand_range(spec) for tail in tails]
    return names


def expand_tasks_per_node(text: str) -> list[int]:
    """``2(x3),1`` -> ``[2, 2, 2, 1]`` (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE)."""
    counts: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not match:
            raise ValueError(f"cannot parse {text!r} as SLURM per-node counts")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def run_quietly(command: Sequence[str]) -> str | None:
    """stdout of a short SLURM client command, or None when it is missing or fails."""
    if shutil.which(command[0]) is None:
        return None
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def hostnames(nodelist: str, run: Runner = run_quietly) -> list[str]:
    """Node names of a SLURM node list: ``scontrol show hostnames`` when it is there, else
    :func:`expand_nodelist`."""
    out = run(["scontrol", "show", "hostnames", nodelist])
    names = out.split() if out else []
    return names or expand_nodelist(nodelist)


def parse_scontrol_records(text: str) -> list[dict[str, str]]:
    """``scontrol show ... -o`` output: one record per line of ``Key=Value`` words."""
    records = []
    for line in text.splitlines():
        pairs = re.findall(r"(?:^|\s)([A-Za-z][\w/:]*)=(\S*)", line)
        if pairs:
            records.append(dict(pairs))
    return records


def node_addresses(nodes: Sequence[str], run: Runner = run_quietly) -> dict[str, str]:
    """Each node's address as SLURM knows it (``NodeAddr``); the name where unknown."""
    addresses = {name: name for name in nodes}
    if not nodes:
        return addresses
    out = run(["scontrol", "show", "node", "-o", ",".join(nodes)])
    for record in parse_scontrol_records(out or ""):
        name, addr = record.get("NodeName"), record.get("NodeAddr")
        if name in addresses and addr:
            addresses[name] = addr
    return addresses


def queue_wait_s(job_id: str, run: Runner = run_quietly) -> float | None:
    """How long the job waited in the queue: StartTime - SubmitTime of ``scontrol show job``
    (the scheduler's clock, whole seconds); None where SLURM does not say."""
    records = parse_scontrol_records(run(["scontrol", "show", "job", "-o", job_id]) or "")
    job = records[0] if records else {}
    try:
        submitted = datetime.fromisoformat(job["SubmitTime"])
        started = datetime.fromisoformat(job["StartTime"])
    except (KeyError, ValueError):
        return None
    return (started - submitted).total_seconds()


# ------------------------------------------------------------------ the allocation


@dataclass(frozen=True)
class Allocation:
    """What a SLURM job was given, as far as the launcher can see from where it runs."""

    job_id: str
    nodes: tuple[str, ...]  # expanded, in SLURM's order: nodes[0] runs the batch step
    ntasks: int | None = None
    tasks_per_node: tuple[int, ...] = ()
    cpus_per_node: tuple[int, ...] = ()
    gpus_on_node: int | None = None  # this node (SLURM_GPUS_ON_NODE)
    gpus_total: int | None = None  # whole job (scontrol's TRES gres/gpu)
    cuda_visible_devices: str | None = None
    partition: str | None = None
    in_step: bool = False  # inside a job step: a nested srun would wait for its resources
    source: str = "env"  # "env", or "scontrol" when the environment had only the job id
    node_addresses: dict[str, str] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def first_address(self) -> str:
        return self.node_addresses.get(self.nodes[0], self.nodes[0])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("nodes", "tasks_per_node", "cpus_per_node"):
            data[key] = list(data[key])
        return data


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _gpus_in_tres(tres: str) -> int | None:
    match = re.search(r"gres/gpu(?::[^=,]+)?=(\d+)", tres or "")
    return int(match.group(1)) if match else None


def allocation_from_env(
    env: Mapping[str, str], run: Runner = run_quietly, addresses: bool = True
) -> Allocation | None:
    """The allocation this process runs in, or None outside SLURM.

    Reads SLURM_JOB_NODELIST, SLURM_NTASKS, SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE,
    SLURM_GPUS_ON_NODE, CUDA_VISIBLE_DEVICES. snakemake's SLURM executor removes every
    SLURM_* variable but the job id from the job's environment; what is missing then comes
    from ``scontrol show job``.
    """
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job_id:
        return None
    values = dict(env)
    source = "env"
    if not values.get("SLURM_JOB_NODELIST"):
        source = "scontrol"
        records = parse_scontrol_records(run(["scontrol", "show", "job", "-o", job_id]) or "")
        job = records[0] if records else {}
        values.update(
            {
                "SLURM_JOB_NODELIST": job.get("NodeList", ""),
                "SLURM_NTASKS": job.get("NumTasks", ""),
                "SLURM_JOB_PARTITION": job.get("Partition", ""),
                "DPSCALE_TRES": job.get("TRES", ""),
            }
        )
    nodelist = values.get("SLURM_JOB_NODELIST") or values.get("SLURM_NODELIST") or ""
    nodes = tuple(hostnames(nodelist, run)) if nodelist else ()
    tasks_per_node = cpus_per_node = ()
    if values.get("SLURM_TASKS_PER_NODE"):
        tasks_per_node = tuple(expand_tasks_per_node(values["SLURM_TASKS_PER_NODE"]))
    if values.get("SLURM_JOB_CPUS_PER_NODE"):
        cpus_per_node = tuple(expand_tasks_per_node(values["SLURM_JOB_CPUS_PER_NODE"]))
    return Allocation(
        job_id=job_id,
        nodes=nodes,
        ntasks=_int(values.get("SLURM_NTASKS")),
        tasks_per_node=tasks_per_node,
        cpus_per_node=cpus_per_node,
        gpus_on_node=_int(values.get("SLURM_GPUS_ON_NODE")),
        gpus_total=_gpus_in_tres(values.get("DPSCALE_TRES", "")),
        cuda_visible_devices=values.get("CUDA_VISIBLE_DEVICES"),
        partition=values.get("SLURM_JOB_PARTITION") or None,
        in_step=bool(values.get("SLURM_STEP_ID")),
        source=source,
        node_addresses=node_addresses(nodes, run) if addresses else {},
    )


# What a launcher's srun may inherit: the job's identity, not another step's task layout
# (SLURM_NTASKS, SLURM_CPUS_PER_TASK, ... from salloc or a batch script are srun defaults).
KEEP_FOR_SRUN = ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CONF", "SLURM_CLUSTER_NAME")


def srun_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the SLURM_*, SRUN_* and SBATCH_* settings srun would take as defaults."""
    return {
        key: value
        for key, value in env.items()
        if key in KEEP_FOR_SRUN or not key.startswith(("SLURM_", "SRUN_", "SBATCH_"))
    }


# ------------------------------------------------------------------ what the job got


def probe_command(
    cell: Cell, python: Sequence[str], allocation: Allocation | None = None
) -> list[str]:
    """One task per node that prints what the node gave the job (dpscale.launch.slurm.task)."""
    return [
        *srun_prefix(cell, tasks_per_node=1, allocation=allocation),
        *python,
        "-m",
        "dpscale.launch.slurm.task",
        "--probe",
    ]


def parse_probe(stdout: str) -> list[dict[str, Any]]:
    """The probe's JSON lines, sorted by node index."""
    nodes = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                nodes.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return sorted(nodes, key=lambda n: int(n.get("node_index") or 0))


def visible_gpu_count(node: Mapping[str, Any]) -> int:
    """GPUs a process on this probed node can use (see runner.sysinfo.visible_gpu_count)."""
    return _visible_gpus(len(node.get("gpus") or []), node.get("cuda_visible_devices"))


def shortage(cell: Cell, allocation: Allocation, probe: Sequence[Mapping[str, Any]]) -> str | None:
    """Why this job cannot measure the cell as asked (fewer nodes, tasks, CPUs or GPUs than
    the cell needs), or None."""
    nodes, per_node = cell.nodes, cell.devices_per_node
    if allocation.num_nodes < nodes:
        return (
            f"cell asks for {nodes} nodes, the job got {allocation.num_nodes} "
            f"({','.join(allocation.nodes) or 'none'})"
        )
    if allocation.ntasks is not None and allocation.ntasks < cell.world_size:
        return (
            f"cell needs {cell.world_size} tasks ({nodes} nodes x {per_node}), the job got "
            f"{allocation.ntasks}"
        )
    if len(probe) < nodes:
        return f"only {len(probe)} of the job's {nodes} nodes answered the probe step"
    for node in probe[:nodes]:
        name = node.get("node") or node.get("host")
        if cell.accelerator == "cuda":
            seen = visible_gpu_count(node)
            if seen < per_node:
                return (
                    f"cell asks for {per_node} GPUs per node, node {name} sees {seen} "
                    f"(CUDA_VISIBLE_DEVICES={node.get('cuda_visible_devices')})"
                )
        cpus = node.get("job_cpus_on_node")
        wanted = per_node * cell.threads_per_device
        if cpus is not None and cpus < wanted:
            return (
                f"cell needs {per_node} device(s) x {cell.threads_per_device} thread(s) = "
                f"{wanted} CPUs per node, node {name} gave the job {cpus}"
            )
    return None


# ------------------------------------------------------------------ command lines


def srun_prefix(
    cell: Cell, tasks_per_node: int | None = None, allocation: Allocation | None = None
) -> list[str]:
    """``srun`` for one task per device (or ``tasks_per_node`` per node) on the cell's
    nodes; block distribution puts tasks 0..D-1 on the first node. When the job has more
    nodes than the cell needs, the first ones are named (rank 0 on ``nodes[0]``)."""
    per_node = cell.devices_per_node if tasks_per_node is None else tasks_per_node
    flags = ["srun", f"--nodes={cell.nodes}"]
    if allocation is not None and allocation.num_nodes > cell.nodes:
        flags.append(f"--nodelist={','.join(allocation.nodes[: cell.nodes])}")
    flags += [
        f"--ntasks={cell.nodes * per_node}",
        f"--ntasks-per-node={per_node}",
        f"--cpus-per-task={cell.threads_per_device if tasks_per_node is None else 1}",
        "--distribution=block",
        "--kill-on-bad-exit=1",
    ]
    if cell.accelerator == "cuda":
        # every task sees all of its node's GPUs and pins the one of its local rank
        flags.append(f"--gres=gpu:{cell.devices_per_node}")
    return flags


def srun_spread(cell: Cell, tasks: int, allocation: Allocation | None = None) -> list[str]:
    """``srun`` for ``tasks`` one-CPU tasks dealt round robin over the cell's first nodes:
    task k on node k mod N (``--distribution=cyclic`` over min(tasks, N) nodes), as MXNet's
    launcher spreads its parameter servers. ``--overlap``: the ranks' step, which asks for
    all of the job's CPUs, shares theirs (as it shared them with servers started on the
    first node outside any step) instead of waiting for this step to end."""
    nodes = min(tasks, cell.nodes)
    flags = ["srun", f"--nodes={nodes}"]
    if allocation is not None and allocation.num_nodes > nodes:
        flags.append(f"--nodelist={','.join(allocation.nodes[:nodes])}")
    return flags + [
        f"--ntasks={tasks}",
        "--cpus-per-task=1",
        "--distribution=cyclic",
        "--overlap",
        "--kill-on-bad-exit=1",
    ]
