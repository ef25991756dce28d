"""A free TCP port for a rendezvous (torchrun, Gloo, MXNet's scheduler), taken from below
the kernel's ephemeral range: a port the kernel hands out for bind(0) or connect() can be
handed to another process between the pick and the rendezvous's own bind (ps-lite then
fails with "bind failed"); a port below that range goes only to processes that ask for it."""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20000  # above the well-known and most registered services' ports
TRIES = 50


def ephemeral_start(path: Path = EPHEMERAL_RANGE) -> int:
    """The first port of the kernel's ephemeral range (Linux's default 32768)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def bindable(port: int, host: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "") -> int:
    """A port bindable on ``host`` now ("" = every address), below the ephemeral range where
    it has room, else one the kernel picks."""
    top = ephemeral_start()
    if top - LOWEST >= 1000:
        for port in random.sample(range(LOWEST, top), TRIES):
            if bindable(port, host):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
