"""One SLURM task of a multi-process cell: set the framework's rank variables from the
task's SLURM ids, then become the runner.

    python -m dpscale.slurm_task torch|horovod|mxnet -- RUNNER...
    python -m dpscale.slurm_task --probe        # print what this node gave the job (JSON)

Started by ``srun`` (see dpscale.slurm) with block distribution, so SLURM_PROCID is the
global rank, SLURM_LOCALID the rank on the node (the device it pins) and SLURM_NODEID the
node's index. Stdlib only: runs with any framework environment's Python.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import socket
import struct
import sys
from collections.abc import Mapping

from dpscale.core.sysinfo import nvidia_gpus, usable_cpus

KINDS = ("torch", "horovod", "mxnet")
SIOCGIFADDR = 0x8915


def _per_node(text: str, index: int) -> int | None:
    counts: list[int] = []
    for part in text.split(","):
        count, _, repeat = part.partition("(x")
        counts += [int(count)] * int(repeat.rstrip(")") or 1)
    return counts[index] if index < len(counts) else None


def slurm_ids(env: Mapping[str, str]) -> dict[str, int | str]:
    """rank, local rank, node index, world size, tasks on this node, nodes, node name."""
    node_index = int(env.get("SLURM_NODEID", 0))
    size = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or 1)
    per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    local_size = (_per_node(per_node, node_index) if per_node else None) or size
    return {
        "rank": int(env["SLURM_PROCID"]),
        "local_rank": int(env.get("SLURM_LOCALID", 0)),
        "node_index": node_index,
        "size": size,
        "local_size": local_size,
        "nodes": int(env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES") or 1),
        "node": env.get("SLURMD_NODENAME") or socket.gethostname(),
    }


def node_address(env: Mapping[str, str], node: str) -> str:
    """This node's address: from the launcher's map (SLURM's NodeAddr), else the name."""
    try:
        return json.loads(env.get("DPSCALE_NODE_ADDRS") or "{}").get(node, node)
    except json.JSONDecodeError:
        return node


def resolved(address: str) -> str:
    """An IP address for ps-lite, which passes hosts around as given: the name's, if any."""
    try:
        return socket.gethostbyname(address)
    except OSError:
        return address


def interface_for(address: str) -> str | None:
    """The network interface that owns ``address`` (for Gloo), or None."""
    try:
        ip = socket.gethostbyname(address)
    except OSError:
        return None
    if ipaddress.ip_address(ip).is_loopback:
        return "lo"
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                packed = fcntl.ioctl(
                    sock.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15])
                )
            except OSError:
                continue
        if socket.inet_ntoa(packed[20:24]) == ip:
            return name
    return None


def task_env(kind: str, env: Mapping[str, str]) -> dict[str, str]:
    """The variables ``kind``'s runtime reads to find its rank (added to ``env``)."""
    ids = slurm_ids(env)
    if kind == "torch":  # init_process_group's env:// (MASTER_ADDR/PORT from the launcher)
        return {
            "RANK": str(ids["rank"]),
            "WORLD_SIZE": str(ids["size"]),
            "LOCAL_RANK": str(ids["local_rank"]),
            "LOCAL_WORLD_SIZE": str(ids["local_size"]),
            "GROUP_RANK": str(ids["node_index"]),
        }
    if kind == "horovod":  # what horovodrun --gloo gives each slot (create_slot_env_vars)
        out = {
            "HOROVOD_HOSTNAME": str(ids["node"]),
            "HOROVOD_RANK": str(ids["rank"]),
            "HOROVOD_SIZE": str(ids["size"]),
            "HOROVOD_LOCAL_RANK": str(ids["local_rank"]),
            "HOROVOD_LOCAL_SIZE": str(ids["local_size"]),
            "HOROVOD_CROSS_RANK": str(ids["node_index"]),
            "HOROVOD_CROSS_SIZE": str(ids["nodes"]),
        }
        if not env.get("HOROVOD_GLOO_IFACE"):
            iface = interface_for(node_address(env, str(ids["node"])))
            if iface:
                out["HOROVOD_GLOO_IFACE"] = iface
        return out
    if kind == "mxnet":  # a ps-lite worker (DMLC_ROLE and the root from dpscale.mxnet_ps)
        out = {"DMLC_ROLE": "worker", "DPSCALE_LOCAL_RANK": str(ids["local_rank"])}
        if not env.get("DMLC_INTERFACE"):
            out["DMLC_NODE_HOST"] = resolved(node_address(env, str(ids["node"])))
        return out
    raise ValueError(f"kind {kind!r} is not one of {KINDS}")


def probe(env: Mapping[str, str]) -> dict[str, object]:
    """What this node gave the job, as this task sees it."""
    node_index = int(env.get("SLURM_NODEID", 0))
    return {
        "node": env.get("SLURMD_NODENAME"),
        "node_index": node_index,
        "host": socket.gethostname(),
        # the job's CPUs on this node (SLURM_CPUS_ON_NODE would be this 1-CPU step's)
        "job_cpus_on_node": _per_node(env.get("SLURM_JOB_CPUS_PER_NODE") or "", node_index)
        if env.get("SLURM_JOB_CPUS_PER_NODE")
        else None,
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
        sys.exit(f"usage: python -m dpscale.slurm_task {{{'|'.join(KINDS)}}} -- COMMAND...")
    kind, command = args[0], args[2:]
    env = dict(os.environ)
    env.update(task_env(kind, env))
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main()
