"""Inside one SLURM task of a multi-process cell: who this rank is, and where its node is.

srun (block distribution, see dpscale.launch.slurm.allocation) starts every rank as
``python -m dpscale.launch.slurm.task``; the launch kinds' ``rank_env`` turns what is read
here (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, the node's address and network interface)
into the framework's own rank variables. It runs on the rank's node in the framework's
interpreter, not in the launcher: stdlib only.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import socket
import struct
from collections.abc import Mapping

from dpscale.launch.slurm.allocation import expand_tasks_per_node

SIOCGIFADDR = 0x8915


def slurm_ids(env: Mapping[str, str]) -> dict[str, int | str]:
    """rank, local rank, node index, world size, tasks on this node, nodes, node name of a
    task started by srun with block distribution."""
    node_index = int(env.get("SLURM_NODEID", 0))
    size = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or 1)
    per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    local_size = (count_on_node(per_node, node_index) if per_node else None) or size
    return {
        "rank": int(env["SLURM_PROCID"]),
        "local_rank": int(env.get("SLURM_LOCALID", 0)),
        "node_index": node_index,
        "size": size,
        "local_size": local_size,
        "nodes": int(env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES") or 1),
        "node": env.get("SLURMD_NODENAME") or socket.gethostname(),
    }


def count_on_node(text: str, index: int) -> int | None:
    """The ``index``-th node's entry of a per-node count (SLURM_TASKS_PER_NODE, ...)."""
    counts = expand_tasks_per_node(text)
    return counts[index] if index < len(counts) else None


def node_address(env: Mapping[str, str], node: str) -> str:
    """A node's address: from the launcher's map (SLURM's NodeAddr), else the name."""
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
