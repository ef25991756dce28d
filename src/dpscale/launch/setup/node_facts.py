"""What ``dpscale doctor`` reads of the node it runs on, outside any framework: the GPUs
nvidia-smi lists, the network interfaces and InfiniBand devices the kernel shows
(``/sys/class/net``, ``/sys/class/infiniband``), and which of them NCCL would take, by
NCCL's own rules for ``NCCL_SOCKET_IFNAME`` and ``NCCL_IB_HCA``.

Each reader takes its folder (or its command's output) as an argument, so a test gives it a
fake one; none raises where a file is missing or unreadable: what cannot be read is left
out, and the doctor says so.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import socket
import struct
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

NET = Path("/sys/class/net")
INFINIBAND = Path("/sys/class/infiniband")
NVIDIA_SMI_TIMEOUT_S = 20
GPU_QUERY = "index,name,driver_version,compute_cap,memory.total"
# NCCL's own order where NCCL_SOCKET_IFNAME is not set (src/misc/socket.cc,
# ncclFindInterfaces): InfiniBand's IP interfaces first, then any but docker, loopback and
# virtual bridges, then those
NCCL_DEFAULT_ORDER = ("ib", "^docker,lo,virbr", "docker", "lo", "virbr")
ARPHRD = {"1": "ether", "32": "infiniband", "772": "loopback"}


@dataclass(frozen=True)
class Gpus:
    """nvidia-smi's view: ``found`` False where it is not on PATH or failed (``why``)."""

    found: bool
    rows: tuple[dict[str, str], ...] = ()
    cuda_driver: str | None = None  # the CUDA version the driver supports ("CUDA Version:")
    why: str = ""


@dataclass(frozen=True)
class Interface:
    name: str
    state: str  # operstate: up, down, unknown (the loopback's)
    kind: str = ""  # ether, infiniband, loopback, or the kernel's number
    speed_mbps: int | None = None
    mtu: int | None = None
    addressed: bool = False  # has an IPv4 or IPv6 address (NCCL skips one without)

    @property
    def usable(self) -> bool:
        """What NCCL's interface search can take: up (the loopback reads unknown), addressed."""
        return self.state in ("up", "unknown") and self.addressed

    def describe(self) -> str:
        words = [self.state]
        if self.kind and self.kind != "ether":
            words.append(self.kind)
        if self.speed_mbps:
            words.append(f"{self.speed_mbps} Mb/s")
        if self.mtu:
            words.append(f"mtu {self.mtu}")
        if not self.addressed:
            words.append("no address")
        return f"{self.name} ({', '.join(words)})"


@dataclass(frozen=True)
class IbPort:
    device: str
    port: str
    state: str  # "ACTIVE", "DOWN", ... (the number before it dropped)
    rate: str = ""
    link_layer: str = ""  # InfiniBand, or Ethernet (RoCE)

    def describe(self) -> str:
        words = [w for w in (self.state, self.rate, self.link_layer) if w]
        return f"{self.device} port {self.port} ({', '.join(words)})"


@dataclass(frozen=True)
class Node:
    gpus: Gpus
    interfaces: tuple[Interface, ...] = ()
    ib_ports: tuple[IbPort, ...] = ()
    ib_devices: tuple[str, ...] = field(default=())


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:  # speed of a down or virtual link: EINVAL
        return None


def _number(text: str | None) -> int | None:
    try:
        value = int(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def has_address(name: str) -> bool:
    """Whether the interface has an IPv4 (SIOCGIFADDR) or IPv6 (/proc/net/if_inet6) address."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            fcntl.ioctl(sock.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
            return True
    except OSError:
        pass
    six = _read(Path("/proc/net/if_inet6")) or ""
    return any(line.split()[-1:] == [name] for line in six.splitlines())


def read_interfaces(
    root: Path = NET, addressed: Callable[[str], bool] = has_address
) -> tuple[Interface, ...]:
    """Every interface under ``root``, in the kernel's order (ifindex), as NCCL lists them."""
    if not root.is_dir():
        return ()
    found = []
    for path in root.iterdir():
        index = _number(_read(path / "ifindex")) or 0
        kind = _read(path / "type") or ""
        found.append(
            (
                index,
                Interface(
                    name=path.name,
                    state=_read(path / "operstate") or "unknown",
                    kind=ARPHRD.get(kind, kind),
                    speed_mbps=_number(_read(path / "speed")),
                    mtu=_number(_read(path / "mtu")),
                    addressed=addressed(path.name),
                ),
            )
        )
    return tuple(interface for _, interface in sorted(found, key=lambda f: (f[0], f[1].name)))


def read_infiniband(root: Path = INFINIBAND) -> tuple[tuple[str, ...], tuple[IbPort, ...]]:
    """The InfiniBand (and RoCE) devices under ``root`` and their ports."""
    if not root.is_dir():
        return (), ()
    devices = tuple(sorted(p.name for p in root.iterdir()))
    ports = []
    for device in devices:
        folder = root / device / "ports"
        for port in sorted(folder.iterdir() if folder.is_dir() else [], key=lambda p: p.name):
            state = _read(port / "state") or ""
            ports.append(
                IbPort(
                    device,
                    port.name,
                    state.split(":", 1)[-1].strip(),  # "4: ACTIVE"
                    _read(port / "rate") or "",
                    _read(port / "link_layer") or "",
                )
            )
    return devices, tuple(ports)


def parse_gpu_rows(text: str, query: str = GPU_QUERY) -> tuple[dict[str, str], ...]:
    keys = query.split(",")
    return tuple(
        dict(zip(keys, (f.strip() for f in line.split(",")), strict=False))
        for line in text.splitlines()
        if line.strip()
    )


def parse_cuda_driver(text: str) -> str | None:
    """The CUDA version the driver supports, from plain nvidia-smi's header."""
    found = re.search(r"CUDA Version:\s*([\d.]+)", text)
    return found.group(1) if found else None


def _nvidia_smi(words: list[str]) -> str:
    return subprocess.run(
        ["nvidia-smi", *words],
        capture_output=True,
        text=True,
        timeout=NVIDIA_SMI_TIMEOUT_S,
        check=True,
    ).stdout


def read_gpus() -> Gpus:
    """nvidia-smi's GPUs (name, driver, compute capability, memory) and the driver's CUDA."""
    if shutil.which("nvidia-smi") is None:
        return Gpus(False, why="nvidia-smi is not on PATH")
    try:
        try:
            rows = parse_gpu_rows(
                _nvidia_smi([f"--query-gpu={GPU_QUERY}", "--format=csv,noheader"])
            )
        except subprocess.CalledProcessError:  # a driver older than compute_cap (R510)
            older = GPU_QUERY.replace(",compute_cap", "")
            rows = parse_gpu_rows(
                _nvidia_smi([f"--query-gpu={older}", "--format=csv,noheader"]), older
            )
        header = _nvidia_smi([])
    except subprocess.CalledProcessError as error:
        said = (error.stdout or error.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return Gpus(False, why=f"nvidia-smi failed (exit code {error.returncode}): {said[0]}")
    except (OSError, subprocess.SubprocessError) as error:
        return Gpus(False, why=f"nvidia-smi did not answer: {error}")
    return Gpus(True, rows, parse_cuda_driver(header))


def read_node() -> Node:
    devices, ports = read_infiniband()
    return Node(read_gpus(), read_interfaces(), ports, devices)


def nccl_list_match(spec: str, names: Iterable[str]) -> list[str]:
    """The names a NCCL list selects (NCCL_SOCKET_IFNAME, NCCL_IB_HCA): comma-separated
    prefixes; ``=`` first: exact names; ``^`` first: all but those. ``:port`` is dropped
    (an HCA's port): devices are matched here, not ports."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    wanted = [entry.split(":", 1)[0] for entry in spec.split(",") if entry.strip()]

    def listed(name: str) -> bool:
        return any(name == w if exact else name.startswith(w) for w in wanted)

    return [name for name in names if listed(name) != exclude]


def nccl_socket_pick(interfaces: Iterable[Interface], spec: str | None) -> list[str]:
    """The interfaces NCCL's socket search takes on this node: those ``spec`` selects where
    it is given, else the first non-empty group of NCCL's default order; usable ones only."""
    usable = [i.name for i in interfaces if i.usable]
    if spec:
        return nccl_list_match(spec, usable)
    for step in NCCL_DEFAULT_ORDER:
        found = nccl_list_match(step, usable)
        if found:
            return found
    return []
