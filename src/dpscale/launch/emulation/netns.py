"""Emulated nodes on one machine: network namespaces joined through a shaped switch.

A cell with ``nodes`` > 1 on an emulated network (config ``networks: [{name, rate[, delay]}]``)
runs each node as a network namespace with its own address. The nodes meet in a hub
namespace holding a bridge (the switch); every node's veth pair to it is shaped with tc in
both directions, so each node's port carries ``rate``, as a NIC on a switched network does.
``delay`` (one-way, node to node) needs the kernel's netem qdisc; without it a cell that asks
for a delay is skipped with that reason, never run without it.

Traffic stays inside: the addresses are in 10.213.0.0/16 and exist only in namespaces this
module created; nothing is routed to the machine's own interfaces. The namespaces are
removed on exit whatever happened, each ``ip``/``tc`` call bounded in time. A launcher killed
with SIGKILL cannot do that: every launch first records its namespaces and itself (pid and
start time) under /run/dpscale/netns, and every launch, the workflow's start and
``python -m dpscale.launch.emulation.netns reap`` remove the namespaces whose launcher is gone. A
namespace no record names is never touched.

Needs root (CAP_NET_ADMIN) and iproute2; :func:`unavailable` says why not, and the
launcher then skips the cell with that reason.

    # what a shaped link carries
    python -m dpscale.launch.emulation.netns probe --rate 100mbit [--mbytes 8]
    # remove what launchers that died left behind
    python -m dpscale.launch.emulation.netns reap
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from dpscale.plan.link import Link

IP_TIMEOUT_S = 10
SUBNET_PREFIX = "10.213"
ETC_NETNS = Path("/etc/netns")  # ip netns exec NAME mounts ETC_NETNS/NAME/* over /etc/
# Which launcher made which namespaces: on /run (tmpfs), gone at a reboot, as they are.
OWNERS = Path("/run/dpscale/netns")
TBF_LATENCY = "50ms"  # how long a packet may wait in the shaper's queue before it is dropped


class NetnsError(RuntimeError):
    """An ip/tc command failed while the emulated network was being built."""


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        list(command), capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
    )
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done


def unavailable(latency_s: float = 0.0) -> str | None:
    """Why emulated nodes cannot run here (or None): root, iproute2, netem for a delay
    (a link's ``latency_s``)."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "emulated networks need iproute2 (ip, tc); it is not installed"
    if os.geteuid() != 0:
        return "emulated networks need root (CAP_NET_ADMIN) to create network namespaces"
    delay = tc_delay(latency_s)
    if latency_s > 0 and not _qdisc_works("netem", "delay", delay):
        return (
            f"delay {delay} needs the kernel's netem qdisc, which this kernel lacks "
            "(only the rate can be emulated here)"
        )
    return None


def _qdisc_works(kind: str, *args: str) -> bool:
    name = f"dpsq{os.getpid()}"
    if _run("ip", "netns", "add", name, check=False).returncode != 0:
        return False
    try:
        return (
            _run(
                "tc", "-n", name, "qdisc", "add", "dev", "lo", "root", kind, *args, check=False
            ).returncode
            == 0
        )
    finally:
        _run("ip", "netns", "del", name, check=False)


def tc_rate(link: Link) -> str:
    """The link's rate as tc writes it, in whole bit/s (``10gbit`` -> ``10000000000bit``)."""
    return f"{link.bits_per_s:.0f}bit"


def tc_delay(latency_s: float) -> str:
    """A delay as tc writes it, in whole microseconds."""
    return f"{latency_s * 1e6:.0f}us"


def shaping(link: Link) -> list[list[str]]:
    """The tc qdisc arguments (after ``dev X``) that shape one direction of a port to the
    link the model reads too (plan.cell.Network.link: one parse of the configured rate).

    tbf: its bucket must hold at least one GSO segment (64 KiB) and 4 ms of traffic, or
    large segments are dropped and the link carries far less than its rate.
    """
    burst = max(64 * 1024, int(link.bytes_per_s * 0.004))
    tbf = ["tbf", "rate", tc_rate(link), "burst", str(burst), "latency", TBF_LATENCY]
    if link.latency_s == 0:
        return [["root", "handle", "1:", *tbf]]
    half = tc_delay(link.latency_s / 2)  # two ports between any two nodes
    return [
        ["root", "handle", "1:", *tbf],
        ["parent", "1:1", "handle", "10:", "netem", "delay", half],
    ]


@dataclass
class EmulatedNodes:
    """Namespaces ``names`` (node i has address ``addresses[i]`` on interface ``interface``)."""

    names: list[str]
    addresses: list[str]
    hub: str
    interface: str = "eth0"
    created: list[str] = field(default_factory=list)

    def exec_prefix(self, node: int) -> list[str]:
        return ["ip", "netns", "exec", self.names[node]]


def _subnet_index() -> int:
    """A /24 per launcher process, so concurrent cells (tests) never share addresses."""
    return os.getpid() % 250 + 1


@contextmanager
def emulated_nodes(nodes: int, link: Link, log: TextIO = sys.stderr) -> Iterator[EmulatedNodes]:
    """The cell's nodes, removed when the block ends; first, what dead launchers left."""
    tag = f"dps{os.getpid()}"
    subnet = f"{SUBNET_PREFIX}.{_subnet_index()}"
    emulated = EmulatedNodes(
        names=[f"{tag}n{i}" for i in range(nodes)],
        addresses=[f"{subnet}.{i + 1}" for i in range(nodes)],
        hub=f"{tag}hub",
    )
    reaped = reap_orphans()  # a dead launcher of this pid's would hold these very names
    if reaped:
        print(f"[dpscale] removed namespaces of launchers that died: {reaped}", file=log)
    record = _record_owner(tag, [emulated.hub, *emulated.names])  # before the first one exists
    try:
        _build(emulated, link)
        yield emulated
    finally:
        remove(emulated.created)
        record.unlink(missing_ok=True)


def process_start(pid: int) -> str | None:
    """When a process started (/proc/PID/stat field 22, clock ticks after boot): with its pid
    it names one process, where a pid alone may have been reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _record_owner(tag: str, names: list[str]) -> Path:
    """Record this process as the owner of ``names`` (written whole: a reader never sees half)."""
    OWNERS.mkdir(parents=True, exist_ok=True)
    owner = {"pid": os.getpid(), "start": process_start(os.getpid()), "namespaces": names}
    record, partial = OWNERS / f"{tag}.json", OWNERS / f".{tag}.json.partial"
    partial.write_text(json.dumps(owner))
    partial.replace(record)
    return record


def reap_orphans() -> list[str]:
    """Remove the namespaces and /etc/netns folders whose recorded launcher no longer runs;
    the names removed. Namespaces no record names (not dpscale's) are left alone."""
    if not OWNERS.is_dir():
        return []
    removed = []
    for record in sorted(OWNERS.glob("*.json")):
        try:
            owner = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        if process_start(owner["pid"]) == owner["start"]:
            continue  # its launcher still runs (and removes them itself)
        remove(owner["namespaces"])
        with suppress(OSError):
            record.unlink(missing_ok=True)
        removed += owner["namespaces"]
    return removed


def _build(emulated: EmulatedNodes, link: Link) -> None:
    hub = emulated.hub
    _run("ip", "netns", "add", hub)
    emulated.created.append(hub)
    _run("ip", "-n", hub, "link", "add", "br0", "type", "bridge")
    _run("ip", "-n", hub, "link", "set", "br0", "up")
    for index, (name, address) in enumerate(zip(emulated.names, emulated.addresses, strict=True)):
        _run("ip", "netns", "add", name)
        emulated.created.append(name)
        port = f"p{index}"
        nic = emulated.interface
        _run(
            "ip",
            "link",
            "add",
            nic,
            "netns",
            name,
            "type",
            "veth",
            "peer",
            "name",
            port,
            "netns",
            hub,
        )
        _run("ip", "-n", name, "addr", "add", f"{address}/24", "dev", nic)
        _write_hosts(name, address)
        for ns, dev in ((name, "lo"), (name, nic), (hub, port)):
            _run("ip", "-n", ns, "link", "set", dev, "up")
        _run("ip", "-n", hub, "link", "set", port, "master", "br0")
        for ns, dev in ((name, nic), (hub, port)):  # both directions of the port
            for qdisc in shaping(link):
                _run("tc", "-n", ns, "qdisc", "add", "dev", dev, *qdisc)


def _write_hosts(name: str, address: str) -> None:
    """Make this machine's hostname resolve to the node's own address inside its namespace.

    ``ip netns exec NAME`` bind-mounts /etc/netns/NAME/hosts over /etc/hosts. Without it
    the hostname resolves to loopback there, and a library that finds its address from the
    hostname advertises 127.0.0.1 to the other nodes: Horovod 0.28 does so for its process
    sets, whose Gloo device ignores HOROVOD_GLOO_IFACE (``InitializeForProcessSet`` reads
    its own, empty, interface field), so the first allreduce failed with "connect
    [127.0.0.1]: Connection refused".
    """
    folder = ETC_NETNS / name
    folder.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    (folder / "hosts").write_text(
        f"127.0.0.1\tlocalhost\n::1\tlocalhost\n{address}\t{host} {name}\n"
    )


def remove(names: Sequence[str]) -> None:
    """Delete the namespaces (their veths go with them) and their /etc/netns files; never
    raises."""
    for name in reversed(list(names)):
        with suppress(OSError, subprocess.SubprocessError):
            _run("ip", "netns", "del", name, check=False)
        shutil.rmtree(ETC_NETNS / name, ignore_errors=True)


def leftover(prefix: str = "dps") -> list[str]:
    """Namespaces of dpscale's, or their /etc/netns folders, that still exist (for tests)."""
    done = _run("ip", "netns", "list", check=False)
    names = {line.split()[0] for line in done.stdout.splitlines() if line.startswith(prefix)}
    if ETC_NETNS.is_dir():
        names |= {p.name for p in ETC_NETNS.iterdir() if p.name.startswith(prefix)}
    return sorted(names)


PROBE_SERVER = """
import socket, sys, time
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
server.settimeout(30)
conn, _ = server.accept()
conn.settimeout(30)
total, start = 0, None
while True:
    chunk = conn.recv(1 << 20)
    if not chunk:
        break
    start = start or time.perf_counter()
    total += len(chunk)
print(total / (time.perf_counter() - start))
"""

PROBE_CLIENT = """
import socket, sys, time
deadline = time.monotonic() + 20
while True:
    try:
        sock = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
payload = bytes(1 << 20)
for _ in range(int(sys.argv[3])):
    sock.sendall(payload)
sock.close()
"""


def probe(emulated: EmulatedNodes, mbytes: int = 8, port: int = 5201) -> float:
    """Bytes per second one bounded TCP transfer from node 0 to node 1 carried."""
    target = emulated.addresses[1]
    server = subprocess.Popen(
        [*emulated.exec_prefix(1), sys.executable, "-c", PROBE_SERVER, target, str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        subprocess.run(
            [
                *emulated.exec_prefix(0),
                sys.executable,
                "-c",
                PROBE_CLIENT,
                target,
                str(port),
                str(mbytes),
            ],
            check=True,
            timeout=60,
        )
        out, _ = server.communicate(timeout=60)
        return float(out.strip())
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Emulated nodes: what a link carries, leftovers")
    commands = parser.add_subparsers(dest="command", required=True)
    measure = commands.add_parser("probe", help="shape a 2-node network, time one transfer")
    measure.add_argument("--rate", required=True)
    measure.add_argument("--delay")
    measure.add_argument("--mbytes", type=int, default=8)
    commands.add_parser("reap", help="remove the namespaces of launchers that died")
    args = parser.parse_args(argv)
    if args.command == "reap":
        removed = reap_orphans()
        print(f"removed {len(removed)} namespace(s) of launchers that died: {removed}")
        return
    try:
        link = Link.from_rate(
            "probe", args.rate, args.delay, field="probe", emulated=True, source="--rate"
        )
    except ValueError as error:
        sys.exit(f"dpscale.launch.emulation.netns: {error}")
    reason = unavailable(link.latency_s)
    if reason:
        sys.exit(f"dpscale.launch.emulation.netns: {reason}")
    with emulated_nodes(2, link) as emulated:
        started = time.perf_counter()
        carried = probe(emulated, args.mbytes)
    print(
        f"{args.rate}: carried {carried / 1e6:.1f} MB/s = {carried / link.bytes_per_s:.2f} "
        "of the rate "
        f"({args.mbytes} MiB, {time.perf_counter() - started:.1f} s with setup)"
    )


if __name__ == "__main__":
    main()
