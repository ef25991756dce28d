"""The study config's checks beyond its schema: values (finite, in range, printable), the
networks, remedies and predictions, names, paths, imports, costs and cross-field rules."""

from __future__ import annotations

import datetime
import math
import os
import re
import tempfile
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpscale.plan import remedies
from dpscale.plan.cell import ZOO_NAME, ZOOS
from dpscale.plan.errors import ConfigError
from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.resnet_spec import DEPTHS
from dpscale.plan.units import DELAY, RATE, parse_quantity
from dpscale.plan.yaml_shape import field_name

# Integers beyond this lose precision as JSON numbers and in every framework's arithmetic.
LARGEST_NUMBER = 2**53
# Texts that may hold line breaks and tabs; no other text may hold a control character.
MULTI_LINE = {("description",)}


def check_values(value: Any, path: tuple = ()) -> None:
    """Before the schema, whatever the field: numbers finite and within JSON's exact range,
    texts free of control characters (which the schema's types and bounds let through)."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_values(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_values(item, (*path, index))
    elif isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{field_name(path)}: {value!r} is not allowed; allowed: a finite number")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if abs(value) > LARGEST_NUMBER:
            raise ConfigError(
                f"{field_name(path)}: {value:.3g} is out of range; allowed: at most 2**53"
            )
    elif isinstance(value, str):
        allowed = "\n\t" if path in MULTI_LINE else ""
        if any(unicodedata.category(c) == "Cc" and c not in allowed for c in value):
            raise ConfigError(
                f"{field_name(path)}: {value[:60]!r} holds a control character; "
                "allowed: printable text"
            )


def check_comm(entries: Any, networks: list[Any], field: str = "comm") -> None:
    """``comm``: each remedy's name and parameters, and the networks it is limited to, in
    one line naming the entry."""
    try:
        remedies.parse_all(entries, training=field == "train.comm")
    except remedies.CommError as error:
        raise ConfigError(str(error).replace("comm", field, 1)) from None
    known = {remedies.ONE_NODE} | {n if isinstance(n, str) else n.get("name") for n in networks}
    for index, entry in enumerate(entries):
        unknown = sorted((remedies.networks_of(entry) or set()) - known)
        if unknown:
            raise ConfigError(
                f"{field}[{index}].networks: {unknown[0]!r} is not a network of this study; "
                f"allowed: {sorted(known)}"
            )


def dates_as_text(config: dict[str, Any]) -> dict[str, Any]:
    """YAML reads an unquoted 2026-11-01 as a date: cost.date is text (YYYY-MM-DD)."""
    cost = config.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("date"), datetime.date):
        config = {**config, "cost": {**cost, "date": cost["date"].isoformat()}}
    return config


# ISO 4217 currency codes in use
CURRENCIES = frozenset(
    """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL
    BSD BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP
    ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR
    IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL
    LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR
    NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD
    SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX
    USD UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG
    """.split()  # noqa: SIM905 (a list literal would take 180 lines)
)
ISO_DATE = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def check_cost(config: dict[str, Any]) -> None:
    """cost: a known currency, a date, and prices only for what the study has."""
    cost = config["cost"]
    if cost is None:
        return
    if cost["currency"] not in CURRENCIES:
        raise ConfigError(
            f"cost.currency: {cost['currency']!r} is not an ISO 4217 currency code; "
            "allowed: e.g. USD, EUR, GBP, CHF, JPY"
        )
    if not ISO_DATE.match(cost["date"]):
        raise ConfigError(f"cost.date: {cost['date']!r} is not a date; allowed: YYYY-MM-DD")
    kinds = [config["accelerator"]]
    for kind in cost["node_hour"]:
        if kind not in kinds:
            raise ConfigError(
                f"cost.node_hour.{kind}: no node of the study is {kind!r}; allowed: {kinds}"
            )
    networks = [n["name"] for n in config["networks"] if isinstance(n, dict)]
    for name in cost.get("network_hour") or {}:
        if name not in networks:
            raise ConfigError(
                f"cost.network_hour.{name}: {name!r} is not a network of the study between "
                f"nodes; allowed: {networks}"
            )


def check_interpreters(config: dict[str, Any], envs: list[str]) -> None:
    for name in config["interpreters"]:
        if name not in envs:
            raise ConfigError(f"interpreters: {name!r} is not an environment; allowed: {envs}")


def check_names(config: dict[str, Any], strategies: list[str]) -> None:
    named = (
        ("strategies", config["strategies"]),
        ("train.strategies", config["train"]["strategies"] or []),
    )
    for field, names in named:
        for index, name in enumerate(names):
            if name not in strategies:
                raise ConfigError(
                    f"{field}[{index}]: {name!r} is not allowed; allowed: {strategies}"
                )
    for field, models in (
        ("models", config["models"]),
        ("train.models", config["train"]["models"]),
    ):
        for index, model in enumerate(models):
            check_model(f"{field}[{index}]", model)
    keys = [(m["name"], m["stem"], m["image_size"], m["classes"]) for m in config["models"]]
    if len(set(keys)) != len(keys):
        raise ConfigError(
            "models: the same model (name, stem, image_size, classes) is listed twice"
        )


def check_model(where: str, model: dict[str, Any]) -> None:
    """A model is a shared ResNet (``resnet50``) or ``<zoo>.<name>`` of a framework's zoo,
    whose stem is the zoo's own. Whether the zoo has the name is known only in its framework's
    environment: the cell fails there, naming some of the zoo's models."""
    name = model["name"]
    zoo, dot, zoo_name = name.partition(".")
    if not dot and name not in DEPTHS:
        raise ConfigError(
            f"{where}.name: {name!r} is not allowed; allowed: {sorted(DEPTHS)} or "
            f"<zoo>.<name> with zoo one of {list(ZOOS)}"
        )
    if dot and zoo not in ZOOS:
        raise ConfigError(
            f"{where}.name: zoo {zoo!r} of {name!r} is not allowed; allowed: {list(ZOOS)}"
        )
    if dot and not re.fullmatch(ZOO_NAME, zoo_name):
        raise ConfigError(
            f"{where}.name: {name!r} is not allowed; allowed: {zoo}.<name> with the name in "
            "letters, digits, '_' and '.'"
        )
    if dot and model.get("stem", "imagenet") != "imagenet":
        raise ConfigError(
            f"{where}.stem: {model['stem']!r} applies to the shared ResNets only; allowed for "
            f"{name}: 'imagenet' (the zoo's own stem)"
        )


NETWORK_NAME = re.compile(r"^[a-z0-9]+$")
NETWORK_KINDS = "'host', {name, rate[, delay]} (emulated) or {name, interface[, env]} (real)"


def check_networks(networks: Any) -> None:
    """One line per mistake, naming the entry, before the schema's less direct oneOf error."""
    if not isinstance(networks, list) or not networks:
        raise ConfigError(f"networks: must be a non-empty list of {NETWORK_KINDS}")
    names = []
    for index, entry in enumerate(networks):
        where = f"networks[{index}]"
        if entry == HOST_NETWORK:
            names.append(HOST_NETWORK)
            continue
        if not isinstance(entry, dict) or "name" not in entry:
            raise ConfigError(f"{where}: {entry!r} is not one of {NETWORK_KINDS}")
        name = entry["name"]
        if not isinstance(name, str) or not NETWORK_NAME.match(name) or name == HOST_NETWORK:
            raise ConfigError(
                f"{where}.name: {name!r} is not allowed; allowed: lower-case letters and "
                "digits, not 'host'"
            )
        names.append(name)
        if ("rate" in entry) == ("interface" in entry):
            raise ConfigError(
                f"{where}: give either rate (an emulated link) or interface (a real one)"
            )
        if "rate" in entry and (
            not RATE.match(str(entry["rate"])) or not parse_quantity(entry["rate"])
        ):
            raise ConfigError(
                f"{where}.rate: {entry['rate']!r} is not a rate; allowed: a number above 0 with "
                "kbit, mbit or gbit (e.g. 100mbit, 1gbit, 10gbit)"
            )
        if "delay" in entry and not DELAY.match(str(entry["delay"])):
            raise ConfigError(
                f"{where}.delay: {entry['delay']!r} is not a delay; allowed: a number with "
                "us or ms (e.g. 100us, 1ms)"
            )
    if len(set(names)) != len(names):
        raise ConfigError(f"networks: names must be unique; got {names}")


def check_predict(predict: Any, networks: list[Any]) -> None:
    """``predict.networks``: one line per mistake, naming the entry and what is allowed."""
    if not isinstance(predict, dict) or not isinstance(predict.get("networks"), list):
        return  # absent, or a shape the schema reports
    measured = {entry.get("name") for entry in networks if isinstance(entry, dict)}
    names = []
    for index, entry in enumerate(predict["networks"]):
        where = f"predict.networks[{index}]"
        if not isinstance(entry, dict) or "name" not in entry or "bandwidth" not in entry:
            raise ConfigError(f"{where}: {entry!r} is not {{name, bandwidth[, latency]}}")
        name = entry["name"]
        if not isinstance(name, str) or not NETWORK_NAME.match(name) or name == HOST_NETWORK:
            raise ConfigError(
                f"{where}.name: {name!r} is not allowed; allowed: lower-case letters and "
                "digits, not 'host'"
            )
        if name in measured:
            raise ConfigError(
                f"{where}.name: {name!r} is a measured network of this study (networks); "
                "the model predicts it anyway: give this one another name"
            )
        names.append(name)
        if not RATE.match(str(entry["bandwidth"])) or not parse_quantity(entry["bandwidth"]):
            raise ConfigError(
                f"{where}.bandwidth: {entry['bandwidth']!r} is not a bandwidth; allowed: a "
                "number above 0 with kbit, mbit or gbit (e.g. 10gbit, 25gbit, 100gbit)"
            )
        if "latency" in entry and not DELAY.match(str(entry["latency"])):
            raise ConfigError(
                f"{where}.latency: {entry['latency']!r} is not a latency; allowed: a number "
                "with us or ms (e.g. 50us, 1ms)"
            )
    if len(set(names)) != len(names):
        raise ConfigError(f"predict.networks: names must be unique; got {names}")


def check_train_layouts(config: dict[str, Any]) -> None:
    """``train.nodes`` and ``train.devices_per_node``: subsets of the study's own."""
    for key in ("nodes", "devices_per_node"):
        for index, value in enumerate(config["train"][key] or []):
            if value not in config[key]:
                raise ConfigError(
                    f"train.{key}[{index}]: {value} is not one of the study's {key}; "
                    f"allowed: {sorted(config[key])}"
                )


def check_paths(config: dict[str, Any], writes: bool = True) -> None:
    """Paths it reads exist, folders it writes can be (``writes=False``: only read)."""
    source = config["train"]["cifar10_source"]
    if source and not _exists(Path(source)):
        raise ConfigError(f"train.cifar10_source: {source!r} does not exist")
    earlier = config["compare_with"]
    if earlier and not _exists(Path(earlier) / "tables" / "cells.csv"):
        raise ConfigError(
            f"compare_with: {earlier[:80]!r} has no tables/cells.csv; allowed: an earlier "
            "study's results folder (results/<study>) after its analysis ran, or empty"
        )
    locks = config["env_locks"]
    if locks and not _is_dir(Path(locks)):
        raise ConfigError(
            f"env_locks: {locks[:80]!r} is not a folder; allowed: the folder `dpscale lock "
            "--out` wrote lock files to, or empty (envs/)"
        )
    folders = {
        "results_dir": config["results_dir"],
        "env_dir": config["env_dir"],
        "train.data_dir": config["train"]["data_dir"],
    }
    for key, folder in folders.items():
        if not folder.strip():
            raise ConfigError(f"{key}: {folder!r} is blank; allowed: a folder path")
        if writes and not _can_create(Path(folder)):
            raise ConfigError(
                f"{key}: {folder[:80]!r} cannot be created or written; allowed: a folder "
                "this user can write, or one that can be made inside such a folder (each "
                "name at most 255 bytes)"
            )


def import_source(entry: Mapping[str, Any]) -> str:
    """What every row of an ``imports`` entry carries in ``source``:
    imported:<kind>:<label, else the log's file name>."""
    return f"imported:{entry['kind']}:{entry.get('label') or Path(entry['path']).name}"


def check_imports(entries: list[dict[str, Any]]) -> None:
    """``imports``: each log exists, each entry says what it is, and no two carry the same
    source; what is in the logs is read by analysis.results.import_logs when the workflow starts
    (common.smk)."""
    sources: dict[str, int] = {}
    for index, entry in enumerate(entries):
        _check_import(f"imports[{index}]", entry)
        source = import_source(entry)
        if source in sources:
            raise ConfigError(
                f"imports[{index}]: imports[{sources[source]}] has the same source {source!r}; "
                "allowed: a label that tells them apart"
            )
        sources[source] = index


def _check_import(where: str, entry: dict[str, Any]) -> None:
    path = entry["path"]
    if not _exists(Path(path)) or not Path(path).is_file():
        raise ConfigError(f"{where}.path: {path[:80]!r} is not a file; allowed: a log file")
    if "placement" in entry and entry["kind"] != "nccl-tests":
        raise ConfigError(
            f"{where}.placement: only for kind 'nccl-tests' (all_reduce_perf's in-place "
            f"and out-of-place columns); {entry['kind']!r} has none"
        )
    if entry["kind"] == "nccl-tests" and entry["nodes"] * entry["devices_per_node"] < 2:
        raise ConfigError(
            f"{where}: an all-reduce needs at least 2 ranks; allowed: nodes x devices_per_node >= 2"
        )


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long for the file system
        return False


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long for the file system
        return False


def _can_create(folder: Path) -> bool:
    """Whether ``folder`` exists writable or can be made: a scratch folder is made and
    removed in its nearest existing ancestor, so the check leaves nothing behind."""
    try:
        ancestor = folder.absolute()
        missing = []
        while not ancestor.exists():
            missing.append(ancestor.name)
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            return False
        longest = os.pathconf(ancestor, "PC_NAME_MAX")
        if any(len(name.encode()) > longest for name in missing):
            return False
        Path(tempfile.mkdtemp(prefix=".dpscale-check-", dir=ancestor)).rmdir()
    except OSError:  # a name too long for the file system, no permission, no space
        return False
    return True


def check_combinations(config: dict[str, Any]) -> None:
    measure = config["measure"]
    if (measure["collective_timeout_s"] or 0) >= measure["timeout_s"]:
        raise ConfigError(
            f"measure.collective_timeout_s: {measure['collective_timeout_s']} must be below "
            f"measure.timeout_s ({measure['timeout_s']})"
        )
    if config["accelerator"] == "cpu" and config["precision"] != "fp32":
        raise ConfigError(
            f"precision: {config['precision']!r} needs accelerator 'cuda'; allowed on cpu: ['fp32']"
        )
    measure = config["measure"]
    if measure["max_windows"] is not None and measure["max_windows"] < measure["windows"]:
        raise ConfigError(
            f"measure.max_windows: {measure['max_windows']} is less than measure.windows "
            f"({measure['windows']})"
        )
    if measure["max_windows"] is not None and measure["target_ci"] is None:
        raise ConfigError("measure.max_windows: only used with measure.target_ci; set both")
    if config["accelerator"] == "cuda" and measure["memory_limit_mb"] is not None:
        raise ConfigError(
            f"measure.memory_limit_mb: {measure['memory_limit_mb']} is not allowed with "
            "accelerator 'cuda' (an address-space cap ends CUDA's large virtual reservations "
            "as a false 'oom'); allowed: null, and cluster.mem_mb_per_device for SLURM's --mem"
        )


def check_interventions(config: dict[str, Any]) -> None:
    """The slowed rank must be a rank of the study's largest layout."""
    slow = config["interventions"]["slow_rank"]
    if slow is None:
        return
    largest = max(config["nodes"]) * max(config["devices_per_node"])
    if slow["rank"] >= largest:
        raise ConfigError(
            f"interventions.slow_rank.rank: {slow['rank']} is not a rank of this study's "
            f"layouts (at most {largest} processes); allowed: 0 to {largest - 1}"
        )


def node_cpus(config: dict[str, Any]) -> dict[str, Any]:
    """The config with ``cluster.cpus_per_device`` filled in where ``cluster.cpus_per_node``
    gives the node's CPUs: those divided by the study's largest ``devices_per_node``, so every
    cell's ranks get the same CPUs and the largest cell's fill its nodes. A cpus_per_device
    set that asks more than cpus_per_node holds is refused; with neither, each device's rank
    asks ``threads_per_device`` (launch.slurm.resources)."""
    cluster = config["cluster"]
    per_node, most = cluster.get("cpus_per_node"), max(config["devices_per_node"])
    if per_node is None:
        return config
    if per_node < most:
        raise ConfigError(
            f"cluster.cpus_per_node: {per_node} is fewer than devices_per_node's {most}; "
            "allowed: at least one CPU per device of a node"
        )
    given = cluster.get("cpus_per_device")
    if given is not None and given * most > per_node:
        raise ConfigError(
            f"cluster.cpus_per_device: {given} x {most} devices per node is more than "
            f"cluster.cpus_per_node ({per_node}); allowed: up to {per_node // most}, or null"
        )
    return {**config, "cluster": {**cluster, "cpus_per_device": given or per_node // most}}


def node_cpus_words(config: dict[str, Any]) -> str:
    """The CPUs each device's rank asks under SLURM (sbatch --cpus-per-task), and why."""
    cluster = config["cluster"]
    per_node, most = cluster.get("cpus_per_node"), max(config["devices_per_node"])
    if cluster.get("cpus_per_device") is None:
        count = config["threads_per_device"]
        why = "threads_per_device; set cluster.cpus_per_node to give each the node's share"
    else:
        count = cluster["cpus_per_device"]
        why = "cluster.cpus_per_device"
        if per_node is not None and count == per_node // most:
            why = f"cluster.cpus_per_node {per_node} / {most} devices per node, the study's most"
    return f"on SLURM each device's rank asks {count} CPU{'s' * (count != 1)} ({why})"
