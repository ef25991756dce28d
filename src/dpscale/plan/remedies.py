"""What a cell does to its gradients' communication when the network is too slow (config
``comm``): compress them (fp16, bf16, PowerSGD, MXNet's 2-bit), delay the all-reduce by one
step (ChainerMN's double buffering; ``delayed-fp16`` with fp16 compression, as ChainerMN ran
them), or change the bucket (fusion) size. ``none`` is the
frameworks' own all-reduce; its cells keep their ids. ``push-pull`` compresses nothing: it
sends the gradients the way MXNet's 2-bit must (a push, then a pull, instead of one
pushpull), so 2-bit can be compared with the same path uncompressed.

Each remedy is declared once here (a :class:`Remedy` in ``DECLARED``): its name, its own
keys, its bytes on the wire, whether it hides behind the next step, its collectives per
bucket, its fidelity to the exact gradient and its words. The analysis and the config
schema's text read them from here; no module outside plan/, strategies/ and frameworks/
spells a remedy's name (tests/unit/test_remedy_names.py). Each adapter declares which
remedies it applies (plan.strategy.CommSupport), its framework's hook applies them, and the
runner records what it applied. The config's shapes and the one-line errors live here too.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from dpscale.plan.layout import HOST_NETWORK

# a cell's or a table row's ``comm`` without a remedy: the frameworks' own all-reduce
NO_REMEDY = "none"
DEFAULT_POWERSGD_RANK = 2
DEFAULT_2BIT_THRESHOLD = 0.5
# torch's PowerSGD: the first compressed step is at least 2 with error feedback or warm start
POWERSGD_MIN_START = 2


class CommError(ValueError):
    """A bad ``comm`` entry, or a key no declared remedy names; the message is one line
    naming the field."""


@dataclass(frozen=True)
class Param:
    """A remedy's own config key: its ``name``, its ``words`` (what it sets, its default),
    and whether only ``train.comm`` takes it."""

    name: str
    words: str
    training_only: bool = False


@dataclass(frozen=True)
class Remedy:
    """One communication remedy, declared once: everything dpscale knows of it before a cell
    runs. The adapters that apply it list its name (plan.strategy.CommSupport); the
    framework's hook does it; the analysis reads the rest from here.

    ``wire_ratio``: logical gradient bytes per byte on the wire, as the remedy promises it
    (None: measured, PowerSGD's depends on the layers' shapes and its rank; the runner records
    the real one). ``hidden``: its all-reduce runs behind the next step's forward and backward
    pass. ``collectives_per_bucket``: the all-reduces it sends per gradient bucket (torch's
    PowerSGD hook: the uncompressed tensors, P and Q). ``fidelity``: its place in the order of
    fidelity to synchronous SGD on exact gradients, 0 (none) first; the ranking's last
    criterion (analysis.answers.remedy_ranking). ``words``: what it does, in plain words (the
    config schema's ``comm`` text)."""

    name: str
    words: str
    wire_ratio: float | None
    fidelity: int
    params: tuple[Param, ...] = ()
    hidden: bool = False
    collectives_per_bucket: int = 1

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(param.name for param in self.params)

    def described(self) -> str:
        """Its name, its own keys with their defaults, and its words."""
        keys = "; ".join(f"{p.name}: {p.words}" for p in self.params)
        return f"{self.name}{f' ({keys})' if keys else ''}: {self.words}"


# Every remedy, in the order the config's errors and texts list them. Fidelity: a bucket size
# changes only when bytes move (any remedy's key, none's too); push-pull sends the same
# gradients another way; fp16 and bf16 round them; delayed applies them a step late;
# PowerSGD and 2-bit compress them (error feedback keeps the rest).
DECLARED: tuple[Remedy, ...] = (
    Remedy(
        NO_REMEDY,
        "the framework's own all-reduce (cell ids without a remedy stay as they were)",
        wire_ratio=1.0,
        fidelity=0,
    ),
    Remedy(
        "fp16",
        "compresses the gradients to 16 bits (float16) for the all-reduce",
        wire_ratio=2.0,
        fidelity=2,
    ),
    Remedy(
        "bf16",
        "compresses the gradients to 16 bits (bfloat16) for the all-reduce",
        wire_ratio=2.0,
        fidelity=3,
    ),
    Remedy(
        "powersgd",
        "sends a low-rank approximation of each gradient with error feedback",
        wire_ratio=None,
        fidelity=6,
        params=(
            Param("rank", f"the approximation's rank, default {DEFAULT_POWERSGD_RANK}"),
            Param(
                "start",
                "train.comm only, the first compressed step (an integer >= "
                f"{POWERSGD_MIN_START}), by default the framework's advice, about 10% of the steps",
                training_only=True,
            ),
        ),
        collectives_per_bucket=3,
    ),
    Remedy(
        "2bit",
        "MXNet's 2-bit compression (compressed pushes, float32 pulls)",
        wire_ratio=16.0,
        fidelity=7,
        params=(
            Param(
                "threshold",
                "the magnitude a gradient value must reach to be sent, as +-threshold (the "
                f"rest stays behind as a residual), default {DEFAULT_2BIT_THRESHOLD:g}",
            ),
        ),
    ),
    Remedy(
        "delayed",
        "applies the previous step's averaged gradients while this step's all-reduce runs "
        "behind the next forward and backward pass (ChainerMN's double buffering)",
        wire_ratio=1.0,
        fidelity=4,
        hidden=True,
    ),
    Remedy(
        "delayed-fp16",
        "delayed and fp16 at once, as ChainerMN's published run used them",
        wire_ratio=2.0,
        fidelity=5,
        hidden=True,
    ),
    Remedy(
        "push-pull",
        "sends MXNet's gradients as a push then a pull, uncompressed (2-bit's path: its "
        "like-with-like baseline)",
        wire_ratio=1.0,
        fidelity=1,
    ),
)
BY_NAME: dict[str, Remedy] = {remedy.name: remedy for remedy in DECLARED}
# name -> nominal compression of the gradient's bytes on the wire (Remedy.wire_ratio)
REMEDIES: dict[str, float | None] = {remedy.name: remedy.wire_ratio for remedy in DECLARED}
# the remedies from the most faithful to the exact gradient to the least
BY_FIDELITY: tuple[Remedy, ...] = tuple(sorted(DECLARED, key=lambda remedy: remedy.fidelity))
KEYS = (
    "name",
    *(name for remedy in DECLARED for name in remedy.param_names),
    "bucket_mb",
    "cycle_ms",
    "networks",
)
SHAPES = (
    f"a name ({', '.join(BY_NAME)}) or {{name"
    + "".join(
        f"[, {p.name} ({remedy.name}{', train.comm' if p.training_only else ''})]"
        for remedy in DECLARED
        for p in remedy.params
    )
    + "[, bucket_mb][, cycle_ms][, networks]}"
)
# the network of cells on one node, for a remedy's ``networks``
ONE_NODE = HOST_NETWORK


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
    def remedy(self) -> Remedy:
        """The remedy's declaration."""
        return BY_NAME[self.name]

    @property
    def nominal_ratio(self) -> float | None:
        """Logical gradient bytes over bytes on the wire, as the remedy promises it."""
        return self.remedy.wire_ratio

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
    names = [name for name in BY_NAME if key == name or key.startswith(f"{name}-")]
    return max(names, key=len) if names else key


def remedy_of(key: str) -> Remedy:
    """The declaration of a key's remedy (``powersgd-r2`` -> powersgd's); a key no declared
    remedy names is an error, never a default."""
    remedy = BY_NAME.get(name_of(key)) if isinstance(key, str) else None
    if remedy is None:
        raise CommError(f"comm: {key!r} names no declared remedy; remedies: {list(BY_NAME)}")
    return remedy


def comm_description(general: str) -> str:
    """The config schema's ``comm`` text: ``general`` (what the schema file says of every
    remedy) and then each declared remedy in its own words."""
    remedies = "; ".join(remedy.described() for remedy in DECLARED)
    return f"{general.strip()} The remedies: {remedies}."


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
    if name not in BY_NAME:
        raise CommError(f"{where}.name: {name!r} is not allowed; allowed: {list(BY_NAME)}")
    takes = BY_NAME[name].param_names
    params: dict[str, Any] = {}
    for key, parse_param in _PARAM_PARSERS.items():  # in KEYS' order, as errors are found
        if key in takes:
            params[key] = parse_param(entry, where, training)
        else:
            _only_for(entry, key, where)
    return Comm(
        name=name,
        **params,
        bucket_mb=_positive_number(entry, "bucket_mb", where),
        cycle_ms=_positive_number(entry, "cycle_ms", where),
    )


def _rank(entry: dict[str, Any], where: str, training: bool) -> int | None:
    rank = entry.get("rank", DEFAULT_POWERSGD_RANK)
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise CommError(f"{where}.rank: {rank!r} is not allowed; allowed: an integer >= 1")
    return rank


def _start(entry: dict[str, Any], where: str, training: bool) -> int | None:
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


def _threshold(entry: dict[str, Any], where: str, training: bool) -> float | None:
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


# a remedy's own keys (Remedy.params), each read by its parser
_PARAM_PARSERS = {"rank": _rank, "start": _start, "threshold": _threshold}


def _only_for(entry: dict[str, Any], key: str, where: str) -> None:
    if key in entry:
        takers = " and ".join(r.name for r in DECLARED if key in r.param_names)
        raise CommError(f"{where}.{key}: only {takers} takes a {key}; allowed: drop it")


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
