"""A user's cluster as ``dpscale predict`` reads it (YAML), checked with one-line errors that
name the file, the field and what it allows.

    name: my-cluster
    inter_node:
      nccl_tests_log: logs/all_reduce_2x4.log   # relative to this file
      ranks: 8                                  # the ranks the log ran at
      rate: 200gbit                             # optional: the link's nominal rate (tc style)
      # or, without a log, a nominal link (no nccl_tests_log, no ranks):
      # rate: 200gbit                           # its nominal rate
      # latency: 5us                            # one hop's latency (a ring step's alpha)
    intra_node:                                 # optional: the node's own fabric (NVLink, PCIe)
      nccl_tests_log: logs/all_reduce_1x4.log   # relative to this file
      ranks: 4                                  # 2 to devices_per_node, all on one node
      rate: 3600gbit                            # optional: its nominal rate, per direction
      # or, without a log, its nominal rate and latency (rate: 2400gbit, latency: 1us)
    device: NVIDIA H100                         # optional: the cluster's GPU (or "cpu"); the
                                                # one-device profile must be the same device
    devices_per_node: 4
    nodes: [2, 4, 8]
    strategy: <a strategy>                      # optional where the results hold one
    model: resnet50                             # as the config names it, or the results'
                                                # id (resnet50-imagenet224-c1000)
    batch_per_device: 256
    one_host: false                             # optional: true where every node is an
                                                # emulated node on one machine (their
                                                # ranks share its cores)

``model`` is a name the config's ``models`` take (``resnet50``: the one model of that name
the results time) or the id the results write (``resnet50-imagenet224-c1000``: where they
time several of one name); ``dpscale predict`` resolves it against the results.

Each number must lie in a plausible range (RANGES; a cluster beyond them is a typo, and the
prediction would print a number as if it were one): devices_per_node 1 to 1,024, nodes 1 to
100,000, ranks 2 to 1,024 x 100,000, batch_per_device 1 to 65,536 (the study's own bound),
a rate 1 mbit to 10,000 gbit (10 Tbit/s), a latency 0 us to 100 ms. An integer is written as
one (``4``, not ``4.0``).

``inter_node`` takes exactly one of a measured log (``nccl_tests_log`` with its ``ranks``)
or a nominal link (``rate`` and ``latency``): a cluster nobody has run nccl-tests on yet is
predicted from its link's datasheet, each row's basis saying it stands on a nominal rate and
latency, not a measured log.

One-node rows (nodes: 1) take their all-reduce from ``intra_node`` where given (a log at
fewer ranks than devices_per_node is extended by the ring law fitted to it); without it the
inter-node log stands in. Rows of two or more nodes always take the inter-node log.

A study lists such files under its config key ``clusters`` (rule cluster_predictions):
checked here before any job, each error one line naming ``clusters[i]``, the file and field.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dpscale.plan.config_files import file_version, is_file, load_yaml
from dpscale.plan.errors import ConfigError
from dpscale.plan.link import Link
from dpscale.plan.units import DELAY, DELAY_UNITS, RATE_UNITS, normal_rate, parse_quantity
from dpscale.plan.yaml_shape import shown

REQUIRED = ("name", "inter_node", "devices_per_node", "nodes", "model", "batch_per_device")
OPTIONAL = ("strategy", "intra_node", "one_host", "device")
# inter_node and intra_node: a log (nccl_tests_log, ranks; rate optional) or a nominal link
# (rate, latency)
LINK_KEYS = ("nccl_tests_log", "ranks", "rate", "latency")
NOMINAL_KEYS = ("rate", "latency")
# What a cluster can plausibly be: beyond these, a number is a typo (1000000000 devices per
# node), not a cluster to predict. A node of today holds at most a few dozen accelerators
# (a 1,024 bound leaves room); the largest machines have tens of thousands of nodes.
MAX_DEVICES_PER_NODE = 1024
MAX_NODES = 100_000
MAX_BATCH = 65536  # as the study's batch_sizes (workflow/schemas/config.schema.yaml)
# a link's nominal rate in bit/s: 1 Mbit/s to 10 Tbit/s
MIN_RATE_BIT_S, MAX_RATE_BIT_S = 1e6, 1e13
# a nominal link's latency a hop: a fabric's is microseconds; 100 ms is beyond any that
# data-parallel training runs over
MAX_LATENCY_S = 0.1
# where a nominal link's numbers come from: every row priced by it says so
NOMINAL = "nominal: the cluster file's rate and latency, not a measured log"
NOMINAL_LINK = "the inter-node link"
NOMINAL_INTRA = "the intra-node link"
BOTH = "allowed: exactly one of nccl_tests_log (with ranks) or a nominal rate and latency"


@dataclass(frozen=True)
class IntraNode:
    """The node's own fabric: an all_reduce_perf log run inside one node, and its ranks; or,
    without a log (``log`` None), its nominal rate and latency in ``rate``."""

    log: Path | None
    ranks: int | None
    rate: Link | None = None  # the fabric's nominal rate: tells a tree or NVLS from a ring

    @property
    def nominal(self) -> bool:
        """Whether the node's fabric is a nominal rate and latency, not a measured log."""
        return self.log is None


@dataclass(frozen=True)
class ClusterFile:
    """A checked cluster file. ``log`` and ``ranks``: the inter-node nccl-tests log and its
    rank count, None for a nominal link; ``rate``: the log's nominal rate (a check of its
    bus bandwidth), or the nominal link itself (rate and latency) where there is no log."""

    name: str
    log: Path | None
    ranks: int | None
    rate: Link | None
    devices_per_node: int
    nodes: tuple[int, ...]
    strategy: str | None  # None: the results' only strategy timed with this model
    model: str  # a config's model name or a results' model id (steps.predict resolves it)
    batch_per_device: int
    intra: IntraNode | None = None  # None: the inter-node link stands in at one node
    # every node an emulated node on one machine: their ranks share its cores (the
    # term-by-term prediction's contention, laws.loss_terms)
    one_host: bool = False
    # the cluster's device as the file names it (a GPU's name, or "cpu"); None: not named
    device: str | None = None

    @property
    def nominal(self) -> bool:
        """Whether the inter-node link is nominal (a rate and latency), not a measured log."""
        return self.log is None


def _keys(entry: dict[str, Any], required: tuple, optional: tuple, where: str, prefix: str):
    allowed = (*required, *optional)
    for key in entry:
        if key not in allowed:
            raise ConfigError(
                f"{where}: {prefix}{shown(str(key))}: unknown key; allowed: {list(allowed)}"
            )
    for key in required:
        if key not in entry:
            raise ConfigError(f"{where}: {prefix}{key}: missing (required: {list(required)})")


def _int(value: Any, where: str, field: str, least: int, most: int) -> int:
    """An integer as written (``4``, not ``4.0`` or ``true``) from ``least`` to ``most``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        written = " (written as a float: leave out the decimal point)" * isinstance(value, float)
        raise ConfigError(f"{where}: {field}: {value!r} is not an integer >= {least}{written}")
    if value > most:
        raise ConfigError(
            f"{where}: {field}: {value:,} is out of range; allowed: {least} to {most:,}"
        )
    return value


def _text(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {field}: {value!r} is not a non-empty string")
    return value


def _log(entry: dict[str, Any], path: Path, field: str) -> Path:
    """The sub-entry's nccl_tests_log, relative to the cluster file, that must be a file."""
    where = str(path)
    log_name = _text(entry["nccl_tests_log"], where, f"{field}.nccl_tests_log")
    log = (path.parent / log_name).resolve()
    if not log.is_file():
        raise ConfigError(
            f"{where}: {field}.nccl_tests_log: {shown(log_name)} is not a file "
            f"(looked for {shown(str(log))}; paths are relative to the cluster file)"
        )
    return log


def _rate(sub: dict[str, Any], where: str, field: str = "inter_node") -> Link | None:
    """``<field>.rate`` as a Link; None where not given."""
    if sub.get("rate") is None:
        return None
    text = str(normal_rate(str(sub["rate"]).strip()))  # 200Gbit reads as 200gbit
    if not any(text.endswith(unit) for unit in RATE_UNITS):
        raise ConfigError(
            f"{where}: {field}.rate: {text!r} is not a rate; allowed: a number with "
            f"one of {sorted(RATE_UNITS)} (e.g. 200gbit)"
        )
    try:
        link = Link.from_rate(field, text, field=field, emulated=False, source="cluster file")
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    if not MIN_RATE_BIT_S <= link.bits_per_s <= MAX_RATE_BIT_S:
        raise ConfigError(
            f"{where}: {field}.rate: {text!r} is out of range; allowed: 1mbit to 10000gbit "
            "(1 Mbit/s to 10 Tbit/s)"
        )
    return link


def _latency(sub: dict[str, Any], where: str, field: str = "inter_node") -> str:
    """``<field>.latency`` as written (``5us``), checked: a delay of 0 us to 100 ms."""
    text = str(sub["latency"]).strip()
    units = sorted(DELAY_UNITS)
    if not DELAY.fullmatch(text):
        raise ConfigError(
            f"{where}: {field}.latency: {text[:80]!r} is not a latency; allowed: a number "
            f"with one of {units} (e.g. 5us)"
        )
    if parse_quantity(text) > MAX_LATENCY_S:
        raise ConfigError(
            f"{where}: {field}.latency: {text[:80]!r} is out of range; allowed: 0us to 100ms"
        )
    return text


def _nominal(sub: dict[str, Any], where: str, field: str = "inter_node") -> Link:
    """A link (``field``: inter_node or intra_node) from its nominal rate and latency, where
    no log is given: priced at every rank count, each row saying it is nominal."""
    example = (
        "rate: 200gbit, latency: 5us" if field == "inter_node" else "rate: 2400gbit, latency: 1us"
    )
    if "ranks" in sub:
        raise ConfigError(
            f"{where}: {field}.ranks: the ranks a log ran at, given without "
            f"nccl_tests_log; {BOTH} (a nominal link is priced at every rank count)"
        )
    for key in NOMINAL_KEYS:
        if sub.get(key) is None:
            raise ConfigError(f"{where}: {field}.{key}: missing; {BOTH} (e.g. {example})")
    rate = _rate(sub, where, field)
    assert rate is not None  # given: checked above
    latency_s = parse_quantity(_latency(sub, where, field))
    name = NOMINAL_LINK if field == "inter_node" else NOMINAL_INTRA
    return replace(rate, name=name, latency_s=latency_s, source=NOMINAL)


def _link_mapping(value: Any, where: str, field: str) -> dict[str, Any]:
    """``field`` (inter_node or intra_node) as a mapping of a link's allowed keys."""
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where}: {field}: not a mapping; give nccl_tests_log and ranks (optionally "
            "rate), or a nominal rate and latency"
        )
    _keys(value, (), LINK_KEYS, where, f"{field}.")
    return value


def _measured(sub: dict[str, Any], path: Path, field: str, most: int) -> tuple[Path, int]:
    """A link's log and the ranks it ran at (2 to ``most``); its latency is the log's."""
    where = str(path)
    if "latency" in sub:
        raise ConfigError(
            f"{where}: {field}.latency: given with nccl_tests_log; {BOTH} (the log "
            "measured the latency)"
        )
    if "ranks" not in sub:
        raise ConfigError(
            f"{where}: {field}.ranks: missing (required with nccl_tests_log: the ranks "
            "the log ran at)"
        )
    return _log(sub, path, field), _int(sub["ranks"], where, f"{field}.ranks", 2, most)


def _inter(entry: dict[str, Any], path: Path) -> tuple[Path | None, int | None, Link | None]:
    """inter_node: a log with its ranks (and optional rate), or a nominal link; exactly one,
    else one line naming the field."""
    where = str(path)
    inter = _link_mapping(entry["inter_node"], where, "inter_node")
    if inter.get("nccl_tests_log") is None:
        if inter.get("latency") is None and inter.get("rate") is None:
            raise ConfigError(
                f"{where}: inter_node.nccl_tests_log: missing; {BOTH} "
                "(e.g. rate: 200gbit, latency: 5us)"
            )
        return None, None, _nominal(inter, where)
    log, ranks = _measured(inter, path, "inter_node", MAX_NODES * MAX_DEVICES_PER_NODE)
    return log, ranks, _rate(inter, where)


def _intra(entry: dict[str, Any], path: Path, devices_per_node: int) -> IntraNode | None:
    """intra_node, where given: a log run inside one node at 2 to devices_per_node ranks (a
    node holds no more; fewer are extended to the node by the ring law fitted to the log),
    or the fabric's nominal rate and latency (an NVLink node nobody ran nccl-tests on)."""
    if entry.get("intra_node") is None:
        return None
    where = str(path)
    intra = _link_mapping(entry["intra_node"], where, "intra_node")
    if devices_per_node < 2:
        raise ConfigError(
            f"{where}: intra_node: devices_per_node is {devices_per_node}; a node of one device "
            "has no intra-node link (allowed: intra_node only where devices_per_node >= 2)"
        )
    if intra.get("nccl_tests_log") is None:
        return IntraNode(None, None, _nominal(intra, where, "intra_node"))
    log, ranks = _measured(intra, path, "intra_node", MAX_DEVICES_PER_NODE)
    if ranks > devices_per_node:
        raise ConfigError(
            f"{where}: intra_node.ranks: {ranks} is more than devices_per_node "
            f"({devices_per_node}); allowed: 2 to {devices_per_node} (the log ran inside one node)"
        )
    return IntraNode(log, ranks, _rate(intra, where, "intra_node"))


def read_cluster(path: str | Path) -> ClusterFile:
    """The checked cluster file; a ConfigError of one line ``<file>: <field>: <problem>``."""
    path = Path(path)
    where = str(path)
    entry = load_yaml(path)
    _keys(entry, REQUIRED, OPTIONAL, where, "")
    log, ranks, rate = _inter(entry, path)
    nodes = entry["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise ConfigError(
            f"{where}: nodes: {repr(nodes)[:80]} is not a non-empty list of integers >= 1"
        )
    counts = tuple(
        sorted({_int(n, where, f"nodes[{i}]", 1, MAX_NODES) for i, n in enumerate(nodes)})
    )
    devices_per_node = _int(
        entry["devices_per_node"], where, "devices_per_node", 1, MAX_DEVICES_PER_NODE
    )
    return ClusterFile(
        name=_text(entry["name"], where, "name"),
        log=log,
        ranks=ranks,
        rate=rate,
        devices_per_node=devices_per_node,
        nodes=counts,
        strategy=(None if "strategy" not in entry else _text(entry["strategy"], where, "strategy")),
        model=_text(entry["model"], where, "model"),
        batch_per_device=_int(entry["batch_per_device"], where, "batch_per_device", 1, MAX_BATCH),
        intra=_intra(entry, path, devices_per_node),
        one_host=_flag(entry.get("one_host", False), where, "one_host"),
        device=None if entry.get("device") is None else _text(entry["device"], where, "device"),
    )


def _flag(value: Any, where: str, field: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {field}: {shown(str(value))} is not true or false")
    return value


# -- the study config's clusters (rule cluster_predictions) ---------------------------------

KEY = "clusters"


def cluster_paths(config: Mapping[str, Any]) -> list[str]:
    """The config's cluster files, as given (from the folder Snakemake runs in)."""
    return [str(path) for path in config.get(KEY) or []]


def check_clusters(config: Mapping[str, Any]) -> list[ClusterFile]:
    """Every cluster file of the config read and checked, before any job; a ConfigError of
    one line ``clusters[i]: <file>: <field>: <problem>`` otherwise."""
    checked = []
    for index, path in enumerate(cluster_paths(config)):
        where = f"{KEY}[{index}]"
        if not is_file(Path(path)):
            raise ConfigError(
                f"{where}: {path[:80]!r} is not a file; allowed: a cluster file (name, "
                "inter_node, devices_per_node, nodes, model, batch_per_device) from the folder "
                "Snakemake runs in"
            )
        try:
            cluster = _read_once(path, file_version(path))
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from None
        names = [c.name for c in checked]
        if cluster.name in names:
            first = f"{KEY}[{names.index(cluster.name)}]"
            raise ConfigError(
                f"{where}: {path}: name: {cluster.name!r} is also {first}'s; "
                "each cluster needs its own name (the report names it)"
            )
        checked.append(cluster)
    return checked


def cluster_inputs(config: Mapping[str, Any]) -> list[str]:
    """What rule cluster_predictions reads besides the study's tables: each cluster file
    and its inter-node and intra-node logs, where given (a changed log predicts again)."""
    files = check_clusters(config)
    paths = cluster_paths(config)
    logs = {str(cluster.log) for cluster in files if cluster.log is not None}
    logs |= {
        str(cluster.intra.log)
        for cluster in files
        if cluster.intra is not None and cluster.intra.log is not None
    }
    return [*paths, *sorted(logs)]


@functools.lru_cache(maxsize=32)
def _read_once(path: str, stamp: tuple[int, int]) -> ClusterFile:
    """read_cluster once per version of the file: the workflow plans a study many times
    (every Snakemake job, every `dpscale check`)."""
    return read_cluster(path)
