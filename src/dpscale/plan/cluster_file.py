"""A user's cluster as ``dpscale predict`` reads it (YAML), checked with one-line errors that
name the file, the field and what it allows.

    name: my-cluster
    inter_node:
      nccl_tests_log: logs/all_reduce_2x4.log   # relative to this file
      ranks: 8                                  # the ranks the log ran at
      rate: 200gbit                             # optional: the link's nominal rate (tc style)
    devices_per_node: 4
    nodes: [2, 4, 8]
    strategy: <a strategy>                      # optional where the results hold one
    model: resnet50-imagenet224-c1000           # as the results name it
    batch_per_device: 256

A study lists such files under its config key ``clusters`` (rule cluster_predictions):
checked here before any job, each error one line naming ``clusters[i]``, the file and field.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpscale.plan.config_files import file_version, is_file, load_yaml
from dpscale.plan.errors import ConfigError
from dpscale.plan.link import Link
from dpscale.plan.units import RATE_UNITS

REQUIRED = ("name", "inter_node", "devices_per_node", "nodes", "model", "batch_per_device")
OPTIONAL = ("strategy",)
INTER_NODE_REQUIRED = ("nccl_tests_log", "ranks")
INTER_NODE_OPTIONAL = ("rate",)


@dataclass(frozen=True)
class ClusterFile:
    name: str
    log: Path
    ranks: int
    rate: Link | None
    devices_per_node: int
    nodes: tuple[int, ...]
    strategy: str | None  # None: the results' only strategy timed with this model
    model: str
    batch_per_device: int


def _keys(entry: dict[str, Any], required: tuple, optional: tuple, where: str, prefix: str):
    allowed = (*required, *optional)
    for key in entry:
        if key not in allowed:
            raise ConfigError(f"{where}: {prefix}{key}: unknown key; allowed: {list(allowed)}")
    for key in required:
        if key not in entry:
            raise ConfigError(f"{where}: {prefix}{key}: missing (required: {list(required)})")


def _int(value: Any, where: str, field: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{where}: {field}: {value!r} is not an integer >= {least}")
    return value


def _text(value: Any, where: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {field}: {value!r} is not a non-empty string")
    return value


def read_cluster(path: str | Path) -> ClusterFile:
    """The checked cluster file; a ConfigError of one line ``<file>: <field>: <problem>``."""
    path = Path(path)
    where = str(path)
    entry = load_yaml(path)
    _keys(entry, REQUIRED, OPTIONAL, where, "")
    inter = entry["inter_node"]
    if not isinstance(inter, dict):
        raise ConfigError(
            f"{where}: inter_node: not a mapping; give {list(INTER_NODE_REQUIRED)} "
            f"(and optionally {list(INTER_NODE_OPTIONAL)})"
        )
    _keys(inter, INTER_NODE_REQUIRED, INTER_NODE_OPTIONAL, where, "inter_node.")
    log_name = _text(inter["nccl_tests_log"], where, "inter_node.nccl_tests_log")
    log = (path.parent / log_name).resolve()
    if not log.is_file():
        raise ConfigError(
            f"{where}: inter_node.nccl_tests_log: {log_name} is not a file "
            f"(looked for {log}; paths are relative to the cluster file)"
        )
    ranks = _int(inter["ranks"], where, "inter_node.ranks", 2)
    rate = None
    if inter.get("rate") is not None:
        text = str(inter["rate"]).strip()
        if not any(text.endswith(unit) for unit in RATE_UNITS):
            raise ConfigError(
                f"{where}: inter_node.rate: {text!r} is not a rate; allowed: a number with "
                f"one of {sorted(RATE_UNITS)} (e.g. 200gbit)"
            )
        try:
            rate = Link.from_rate(
                "inter_node", text, field="inter_node", emulated=False, source="cluster file"
            )
        except ValueError as error:
            raise ConfigError(f"{where}: {error}") from None
    nodes = entry["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise ConfigError(f"{where}: nodes: {nodes!r} is not a non-empty list of integers >= 1")
    counts = tuple(sorted({_int(n, where, f"nodes[{i}]", 1) for i, n in enumerate(nodes)}))
    return ClusterFile(
        name=_text(entry["name"], where, "name"),
        log=log,
        ranks=ranks,
        rate=rate,
        devices_per_node=_int(entry["devices_per_node"], where, "devices_per_node", 1),
        nodes=counts,
        strategy=(None if "strategy" not in entry else _text(entry["strategy"], where, "strategy")),
        model=_text(entry["model"], where, "model"),
        batch_per_device=_int(entry["batch_per_device"], where, "batch_per_device", 1),
    )


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
    and its inter-node log (a changed log predicts again)."""
    files = check_clusters(config)
    paths = cluster_paths(config)
    return [*paths, *sorted({str(cluster.log) for cluster in files})]


@functools.lru_cache(maxsize=32)
def _read_once(path: str, stamp: tuple[int, int]) -> ClusterFile:
    """read_cluster once per version of the file: the workflow plans a study many times
    (every Snakemake job, every `dpscale check`)."""
    return read_cluster(path)
