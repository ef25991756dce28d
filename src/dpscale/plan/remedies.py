"""What a cell does to its gradients' communication when the network is too slow (config
``comm``): compress them (fp16, bf16, PowerSGD, MXNet's 2-bit), delay the all-reduce by one
step (ChainerMN's double buffering; ``delayed-fp16`` with fp16 compression, as ChainerMN ran
them), or change the bucket (fusion) size. ``none`` is the
frameworks' own all-reduce; its cells keep their ids. ``push-pull`` compresses nothing: it
sends the gradients the way MXNet's 2-bit must (a push, then a pull, instead of one
pushpull), so 2-bit can be compared with the same path uncompressed.

Each adapter declares which remedies it supports (plan.strategy.CommSupport); the runner
records what it applied. The names, the config's shapes and the one-line errors live here.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from dpscale.plan.layout import HOST_NETWORK

# a cell's or a table row's ``comm`` without a remedy: the frameworks' own all-reduce
NO_REMEDY = "none"

# name -> nominal compression of the gradient's bytes on the wire (PowerSGD's depends on the
# layers' shapes and its rank; the runner records the real one)
REMEDIES: dict[str, float | None] = {
    NO_REMEDY: 1.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "powersgd": None,
    "2bit": 16.0,
    "delayed": 1.0,
    # both of ChainerMN's remedies at once, as its published run used them
    "delayed-fp16": 2.0,
    # MXNet's 2-bit path without the compression: its like-with-like baseline
    "push-pull": 1.0,
}
DEFAULT_POWERSGD_RANK = 2
DEFAULT_2BIT_THRESHOLD = 0.5
KEYS = ("name", "rank", "start", "threshold", "bucket_mb", "cycle_ms", "networks")
SHAPES = (
    "a name (none, fp16, bf16, powersgd, 2bit, delayed, delayed-fp16, push-pull) or "
    "{name[, rank (powersgd)][, start (powersgd, train.comm)][, threshold (2bit)][, bucket_mb]"
    "[, cycle_ms][, networks]}"
)
# the network of cells on one node, for a remedy's ``networks``
ONE_NODE = HOST_NETWORK


class CommError(ValueError):
    """A bad ``comm`` entry; the message is one line naming the field."""


@dataclass(frozen=True)
class Comm:
    """One remedy: ``name`` with its parameter (PowerSGD's ``rank``, 2-bit's ``threshold``),
    ``bucket_mb``, the gradient bucket (DDP) or fusion buffer (Horovod) size in MiB, and
    ``cycle_ms``, how often Horovod's background thread looks for ready tensors to fuse
    (None: the framework's default). ``start``: PowerSGD's first compressed step in training
    cells (torch's ``start_powerSGD_iter``; None: torch's advice, :func:`powersgd_start_iter`),
    so the advice's accuracy effect can be measured against an early start."""

    name: str = NO_REMEDY
    rank: int | None = None
    threshold: float | None = None
    bucket_mb: float | None = None
    cycle_ms: float | None = None
    start: int | None = None

    @property
    def key(self) -> str:
        """Path-safe: ``fp16``, ``powersgd-r2``, ``2bit-t0.5``, ``none-bucket1``, ..."""
        key = self.name
        if self.name == "powersgd":
            key += f"-r{self.rank}"
        if self.start is not None:
            key += f"-s{self.start}"
        if self.name == "2bit":
            key += f"-t{_number(self.threshold)}"
        if self.bucket_mb is not None:
            key += f"-bucket{_number(self.bucket_mb)}"
        if self.cycle_ms is not None:
            key += f"-cycle{_number(self.cycle_ms)}"
        return key

    @property
    def is_default(self) -> bool:
        return self == NONE

    @property
    def nominal_ratio(self) -> float | None:
        """Logical gradient bytes over bytes on the wire, as the remedy promises it."""
        return REMEDIES[self.name]

    def to_dict(self) -> dict[str, Any]:
        """The fields; ``start`` only where set, so remedies without it keep their params."""
        data = asdict(self)
        if self.start is None:
            del data["start"]
        return data


NONE = Comm()


def is_no_remedy(value: Any) -> bool:
    """Whether a table's ``comm`` value means no remedy: ``none``, or missing (a row from
    before the comm dimension). analysis.results.rows.no_remedy is the same test on a column."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return value == NO_REMEDY


def parameter_server_ratio(push_ratio: float) -> float:
    """Compressed pushes, float32 pulls (MXNet's 2-bit on a dist kvstore): the ratio of
    the bytes of a push and a pull together."""
    return 2 / (1 + 1 / push_ratio)


def powersgd_matrix(message_bytes: int, rank: int) -> tuple[int, int]:
    """(side, rank) of the square matrix PowerSGD's collectives path views a float32 message
    as (zero-padded), its rank at most the side, as torch's hook caps it."""
    side = math.isqrt(max(message_bytes // 4, 1) - 1) + 1
    return side, min(rank, side)


def wire_bytes(comm: Comm, message_bytes: int) -> int:
    """The bytes a remedy's all-reduce of one float32 message sends per rank and direction:
    PowerSGD views it as a square matrix and sends P and Q (side x rank each)."""
    if comm.name == "powersgd":
        side, rank = powersgd_matrix(message_bytes, comm.rank or 1)
        return 2 * side * rank * 4
    if comm.name == "2bit":
        return round(message_bytes / parameter_server_ratio(REMEDIES["2bit"] or 1.0))
    return round(message_bytes / (REMEDIES[comm.name] or 1.0))


def name_of(key: str) -> str:
    """The remedy's name in a key: ``powersgd-r2`` -> powersgd, ``delayed-fp16-bucket1`` ->
    delayed-fp16 (the longest name the key starts with); an unknown key stays as it is."""
    names = [name for name in REMEDIES if key == name or key.startswith(f"{name}-")]
    return max(names, key=len) if names else key


# torch's PowerSGD: the first compressed step is at least 2 with error feedback or warm start
POWERSGD_MIN_START = 2


def powersgd_start_iter(total_steps: int, warmup_steps: int) -> int:
    """torch's advice for a training's ``start_powerSGD_iter`` (PowerSGDState): about 10% of
    its steps, no fewer than its warm-up steps, never below torch's minimum."""
    return max(POWERSGD_MIN_START, math.ceil(0.1 * total_steps), warmup_steps)


def powersgd_start(comm: Comm, total_steps: int, warmup_steps: int) -> tuple[int, str]:
    """A training cell's first compressed PowerSGD step and the rule that chose it: the
    study's ``start`` where set, else torch's advice (:func:`powersgd_start_iter`)."""
    if comm.start is not None:
        return comm.start, f"the study's train.comm start, of {total_steps} steps"
    advice = (
        f"the framework's advice (PowerSGDState): max(2, 10% of {total_steps} steps, "
        f"{warmup_steps} warm-up steps)"
    )
    return powersgd_start_iter(total_steps, warmup_steps), advice


def _number(value: float | None) -> str:
    return f"{value:g}"


def parse(entry: Any, where: str = "comm[0]", training: bool = False) -> Comm:
    """A config entry (a name or a mapping) as a :class:`Comm`, or one line naming the field.
    ``training``: an entry of ``train.comm``, the only place PowerSGD's ``start`` applies."""
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict):
        raise CommError(f"{where}: {entry!r} is not allowed; allowed: {SHAPES}")
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise CommError(f"{where}.{unknown[0]}: not a key of a remedy; allowed keys: {list(KEYS)}")
    name = entry.get("name", NO_REMEDY)
    if name not in REMEDIES:
        raise CommError(f"{where}.name: {name!r} is not allowed; allowed: {list(REMEDIES)}")
    return Comm(
        name=name,
        rank=_rank(entry, name, where),
        start=_start(entry, name, where, training),
        threshold=_threshold(entry, name, where),
        bucket_mb=_positive_number(entry, "bucket_mb", where),
        cycle_ms=_positive_number(entry, "cycle_ms", where),
    )


def _rank(entry: dict[str, Any], name: str, where: str) -> int | None:
    if name != "powersgd":
        _only_for(entry, "rank", "powersgd", where)
        return None
    rank = entry.get("rank", DEFAULT_POWERSGD_RANK)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise CommError(f"{where}.rank: {rank!r} is not allowed; allowed: an integer >= 1")
    return rank


def _start(entry: dict[str, Any], name: str, where: str, training: bool) -> int | None:
    if name != "powersgd":
        _only_for(entry, "start", "powersgd", where)
        return None
    start = entry.get("start")
    if start is None:
        return None
    if not training:
        raise CommError(
            f"{where}.start: only train.comm takes a start (synthetic and collectives cells "
            "time compressed steps from step 2); allowed: drop it"
        )
    if isinstance(start, bool) or not isinstance(start, int) or start < POWERSGD_MIN_START:
        raise CommError(
            f"{where}.start: {start!r} is not allowed; allowed: an integer >= {POWERSGD_MIN_START}"
        )
    return start


def _threshold(entry: dict[str, Any], name: str, where: str) -> float | None:
    if name != "2bit":
        _only_for(entry, "threshold", "2bit", where)
        return None
    threshold = entry.get("threshold", DEFAULT_2BIT_THRESHOLD)
    if not _positive(threshold):
        raise CommError(f"{where}.threshold: {threshold!r} is not allowed; allowed: a number > 0")
    return float(threshold)


def _positive_number(entry: dict[str, Any], key: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if not _positive(value):
        raise CommError(f"{where}.{key}: {value!r} is not allowed; allowed: a number > 0")
    return float(value)


def _only_for(entry: dict[str, Any], key: str, remedy: str, where: str) -> None:
    if key in entry:
        raise CommError(f"{where}.{key}: only {remedy} takes a {key}; allowed: drop it")


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def networks_of(entry: Any, where: str = "comm[0]") -> frozenset[str] | None:
    """The networks an entry's synthetic and collectives cells run on (``networks``;
    ``host``: one node), None for all of them. Training cells ignore it: a remedy's accuracy
    does not depend on the link."""
    if not isinstance(entry, dict) or "networks" not in entry:
        return None
    names = entry["networks"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise CommError(
            f"{where}.networks: {names!r} is not allowed; allowed: a non-empty list of network "
            f"names ({ONE_NODE!r} for one node)"
        )
    return frozenset(names)


def parse_all(entries: Any, training: bool = False) -> list[Comm]:
    """The config's ``comm`` list (``training``: ``train.comm``), each entry checked, no
    remedy twice."""
    if not isinstance(entries, list) or not entries:
        raise CommError(f"comm: {entries!r} is not allowed; allowed: a non-empty list of {SHAPES}")
    remedies = [parse(entry, f"comm[{index}]", training) for index, entry in enumerate(entries)]
    for index, entry in enumerate(entries):
        networks_of(entry, f"comm[{index}]")
    keys = [remedy.key for remedy in remedies]
    for index, key in enumerate(keys):
        if key in keys[:index]:
            raise CommError(f"comm[{index}]: {key!r} is listed twice; allowed: each remedy once")
    return remedies
