"""What one training step sends between ranks, as a strategy declares it, and its price.

Each strategy's adapter names its traffic (plan.strategy.Strategy.traffic): a ring
all-reduce of the gradient (torch-ddp, horovod-tf), sharded parameter servers with their
count and placement (mxnet-dist; tf_cnn_benchmarks' distributed_replicated), or a
reduce-scatter then all-gather (ZeRO, FSDP). Every form is priced the same way, per bucket
of ``S`` gradient bytes on a link of bandwidth beta and per-message latency alpha::

    t = wire_factor x S / beta + hops x alpha

``wire_factor``: the bytes through the busiest link, each direction, per gradient byte;
``hops``: the latency-bound steps of one bucket's collectives. The ring's are nccl-tests'
(plan.ring): 2(N-1)/N and 2(N-1) over N ranks. The model, the cluster prediction and the
published check read these numbers and re-derive none.

Layouts are ``nodes`` x ``devices_per_node``; the functions are plain arithmetic, so they
take numbers or numpy arrays alike (plan/ imports no numpy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from dpscale.plan import ring
from dpscale.plan.errors import ConfigError

RING = "ring_allreduce"
PARAMETER_SERVERS = "parameter_servers"
REDUCE_SCATTER_ALL_GATHER = "reduce_scatter_all_gather"


class Traffic(Protocol):
    """One step's collectives per bucket of gradient bytes."""

    kind: ClassVar[str]

    def wire_factor(self, nodes: Any, devices_per_node: Any) -> Any: ...

    def hops(self, nodes: Any, devices_per_node: Any) -> Any: ...

    def words(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RingAllReduce:
    """A ring all-reduce of each bucket over every rank (NCCL's and Gloo's ring)."""

    kind: ClassVar[str] = RING

    def wire_factor(self, nodes: Any, devices_per_node: Any) -> Any:
        return ring.ring_factor(nodes * devices_per_node)

    def hops(self, nodes: Any, devices_per_node: Any) -> Any:
        return 2 * (nodes * devices_per_node - 1)

    def words(self) -> str:
        return "a ring all-reduce over every rank"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind}


@dataclass(frozen=True)
class ReduceScatterAllGather:
    """A reduce-scatter of each bucket, then ``gathers`` all-gathers of its shards (1: ZeRO
    stages 1-2 gather the updated parameters once; 2: FSDP also gathers them for the
    forward pass). Each collective is a ring pass over every rank: (N-1)/N of the bytes."""

    gathers: int = 1
    kind: ClassVar[str] = REDUCE_SCATTER_ALL_GATHER

    def wire_factor(self, nodes: Any, devices_per_node: Any) -> Any:
        ranks = nodes * devices_per_node
        return (1 + self.gathers) * ring.ring_factor(ranks) / 2

    def hops(self, nodes: Any, devices_per_node: Any) -> Any:
        return (1 + self.gathers) * (nodes * devices_per_node - 1)

    def words(self) -> str:
        return f"a reduce-scatter then {self.gathers} all-gather(s) over every rank"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "gathers": self.gathers}


@dataclass(frozen=True)
class ParameterServers:
    """Sharded parameter servers: each bucket is split over ``servers`` shards (None: one on
    every device), server k on node k mod N (MXNet's launcher and tf_cnn_benchmarks deal
    them so); every sender pushes its gradient to the shards and pulls the result back.
    ``per_node``: a node first sums its devices' gradients and sends one copy
    (tf_cnn_benchmarks' distributed_replicated); otherwise every device sends its own.
    ``on_workers``: the shards live on the devices themselves (one process driving a node's
    devices: DataParallel sums onto device 0, MXNet's device kvstore spreads the keys over
    the devices), not in server processes of their own. ``option``: the strategy's cell
    option that sets the count (mxnet-dist's ``mxnet_servers``), read by :func:`resolved`.

    Busiest link over N >= 2 nodes, w senders a node, k shards, s = ceil(k/N) of them on the
    fullest node: it takes the other nodes' pushes to its shards and returns their pulls,
    w (N-1) s/k, and pushes and pulls the shards it does not hold, w (k-s)/k: in all
    w (k + (N-2) s)/k each way (k = N, w = 1: the ring's 2(N-1)/N). On one node nothing
    crosses a NIC and the busiest endpoint is a process or a device: a server process
    takes 1/k of each of the d workers' gradients (d/k) and a worker pushes and pulls its
    own (1), the larger; shards on the d devices are the formula above with the devices as
    the nodes; with ``per_node`` the node's sum never leaves it (0). Two hops: a push and
    a pull."""

    servers: int | None = 1
    per_node: bool = False
    on_workers: bool = False
    option: str | None = None
    kind: ClassVar[str] = PARAMETER_SERVERS

    def wire_factor(self, nodes: Any, devices_per_node: Any) -> Any:
        shards = nodes * devices_per_node if self.servers is None else self.servers + 0.0 * nodes
        senders = 1.0 + 0.0 * devices_per_node if self.per_node else 1.0 * devices_per_node
        across = senders * _fullest_share(shards, nodes)
        if self.per_node:
            alone = 0.0 * senders
        elif self.on_workers:
            alone = _fullest_share(shards, devices_per_node)
        else:
            alone = _larger(senders / shards, 1.0)
        return across * (nodes >= 2) + alone * (nodes < 2)

    def hops(self, nodes: Any, devices_per_node: Any) -> Any:
        return 2.0 + 0.0 * nodes * devices_per_node

    def words(self) -> str:
        count = "a shard on every device" if self.servers is None else f"{self.servers} shard(s)"
        senders = "each node's summed gradient" if self.per_node else "every device's gradient"
        where = "on the devices" if self.on_workers else "server k on node k mod N"
        return f"parameter servers: {count}, {where}, taking {senders} and returning the sum"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "servers": self.servers,
            "per_node": self.per_node,
            "on_workers": self.on_workers,
        }


def _fullest_share(shards: Any, holders: Any) -> Any:
    """(k + (H-2) ceil(k/H)) / k: the busiest of H holders' bytes each way per byte sent,
    k shards dealt round robin (the ParameterServers docstring)."""
    fullest = -(-shards // _larger(holders, 1.0))
    return (shards + (holders - 2.0) * fullest) / shards


KINDS: dict[str, type] = {
    RING: RingAllReduce,
    PARAMETER_SERVERS: ParameterServers,
    REDUCE_SCATTER_ALL_GATHER: ReduceScatterAllGather,
}


def _larger(a: Any, b: Any) -> Any:
    """max(a, b) for numbers and arrays alike."""
    return (a + b + abs(a - b)) / 2


def seconds(
    traffic: Traffic,
    message_bytes: Any,
    nodes: Any,
    devices_per_node: Any,
    bytes_per_s: Any,
    latency_s: Any = 0.0,
) -> Any:
    """One bucket of ``message_bytes`` through ``traffic`` at ``bytes_per_s`` and
    ``latency_s`` a hop: the one price every prediction uses (module doc)."""
    factor = traffic.wire_factor(nodes, devices_per_node)
    return factor * message_bytes / bytes_per_s + traffic.hops(nodes, devices_per_node) * latency_s


def resolved(traffic: Traffic, options: Mapping[str, Any]) -> Traffic:
    """The traffic with its count taken from a cell's or a study's options (the strategy's
    ``option``), where it names one and the options give it."""
    name = getattr(traffic, "option", None)
    if name is None or options.get(name) is None:
        return traffic
    return replace(traffic, servers=int(options[name]))  # type: ignore[type-var]


def from_dict(entry: Any, where: str) -> Traffic:
    """A traffic written as data (a study's model inputs, a cases file's ``traffic``);
    one line naming the field otherwise."""
    if not isinstance(entry, Mapping) or entry.get("kind") not in KINDS:
        kind = entry.get("kind") if isinstance(entry, Mapping) else entry
        raise ConfigError(f"{where}.kind: {kind!r} is not allowed; allowed: {list(KINDS)}")
    if entry["kind"] == RING:
        _no_keys(entry, where, ())
        return RingAllReduce()
    if entry["kind"] == REDUCE_SCATTER_ALL_GATHER:
        _no_keys(entry, where, ("gathers",))
        return ReduceScatterAllGather(_whole(entry.get("gathers", 1), f"{where}.gathers", 1))
    _no_keys(entry, where, ("servers", "per_node", "on_workers"))
    flags = {key: entry.get(key, False) for key in ("per_node", "on_workers")}
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise ConfigError(f"{where}.{key}: {value!r} is not allowed; allowed: true, false")
    servers = entry.get("servers", 1)
    if servers is not None:
        servers = _whole(servers, f"{where}.servers", 1)
    return ParameterServers(servers, **flags)


def _no_keys(entry: Mapping[str, Any], where: str, allowed: tuple[str, ...]) -> None:
    extra = sorted(set(entry) - {"kind", *allowed})
    if extra:
        raise ConfigError(
            f"{where}.{extra[0]}: not a key of traffic {entry['kind']!r}; allowed: "
            f"{['kind', *allowed]}"
        )


def _whole(value: Any, where: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{where}: {value!r} is not allowed; allowed: a whole number >= {least}")
    return value


def traffic_of(entries: Mapping[str, Any]) -> dict[str, Traffic]:
    """Each strategy's traffic from plan.model_inputs' JSON."""
    return {name: from_dict(entry, f"traffic.{name}") for name, entry in entries.items()}
