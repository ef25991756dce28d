"""A cell: one point of the study matrix, measured by one job into one result file."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from dpscale.plan import controls
from dpscale.plan.layout import HOST_NETWORK, LAYOUT_ID, Layout
from dpscale.plan.link import Link
from dpscale.plan.remedies import NONE, Comm
from dpscale.plan.resnet_spec import ResNetSpec, resnet_spec

# the frameworks' own model zoos a model may be named from, as ``<zoo>.<name>`` (config
# models; docs/decisions/zoo-models-by-name.md); which strategy builds which: its adapter
ZOOS = ("torchvision", "keras", "gluon")
# a zoo model's name within its zoo: what torchvision, Keras and Gluon spell (no hyphen, which
# ends the name in a model key)
ZOO_NAME = r"[A-Za-z0-9_.]+"
# a model's key (ModelConfig.key) read back: resnet50-imagenet32-c10,
# torchvision.mobilenet_v3_small-imagenet64-c10 (depth for a shared ResNet, zoo for the others)
MODEL_KEY = re.compile(
    rf"(?P<name>resnet(?P<depth>\d+)|(?P<zoo>{'|'.join(ZOOS)})\.(?P<zoo_name>{ZOO_NAME}))"
    r"-(?P<stem>[a-z]+?)(?P<image_size>\d+)-c(?P<classes>\d+)"
)
# the same keys without named groups: Snakemake's wildcard constraint for {model}
MODEL_WILDCARD = rf"(?:resnet\d+|(?:{'|'.join(ZOOS)})\.{ZOO_NAME})-[a-z]+\d+-c\d+"
# a cell id with Snakemake's wildcards: the cells' result paths (workflow/rules/common.smk)
CELL_PATTERN = "/".join(["{strategy}", "{model}", "{mode}", LAYOUT_ID])
_NUMBERS = {"nodes", "devices", "batch", "repeat"}


def _wildcard(name: str) -> str:
    return f"(?P<{name}>[0-9]+)" if name in _NUMBERS else f"(?P<{name}>[^/]+)"


_CELL_ID = re.compile(re.sub(r"\\\{(\w+)\\\}", lambda m: _wildcard(m[1]), re.escape(CELL_PATTERN)))


def parse_cell_id(text: str) -> dict[str, str]:
    """A cell id's parts by CELL_PATTERN's names (strategy, model, mode, nodes, devices,
    batch, repeat); ValueError if it is not one."""
    match = _CELL_ID.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a cell id ({CELL_PATTERN})")
    return match.groupdict()


@dataclass(frozen=True)
class ModelConfig:
    name: str
    stem: str = "imagenet"
    image_size: int = 224
    classes: int = 1000

    @property
    def key(self) -> str:
        """Unique, path-safe name, e.g. ``resnet18-imagenet64-c10``."""
        return f"{self.name}-{self.stem}{self.image_size}-c{self.classes}"

    @classmethod
    def from_key(cls, key: str) -> ModelConfig:
        """The model a key names (``resnet18-imagenet64-c10``); ValueError if none."""
        match = MODEL_KEY.fullmatch(key)
        if match is None:
            raise ValueError(f"{key!r} is not a model key ({MODEL_KEY.pattern})")
        return cls(match["name"], match["stem"], int(match["image_size"]), int(match["classes"]))

    @property
    def zoo(self) -> str | None:
        """The framework zoo a ``<zoo>.<name>`` model is built from (``torchvision``,
        ``keras``, ``gluon``); None for a shared ResNet (``resnet50``), built from its spec."""
        zoo, dot, _ = self.name.partition(".")
        return zoo if dot else None

    @property
    def zoo_name(self) -> str:
        """The name the zoo knows it by: ``mobilenet_v3_small`` of
        ``torchvision.mobilenet_v3_small``."""
        return self.name.partition(".")[2]

    def spec(self) -> ResNetSpec:
        """The shared ResNet's specification; a zoo model has none (its counts come from the
        framework that builds it)."""
        if self.zoo is not None:
            raise ValueError(f"model {self.name} is from {self.zoo}'s zoo: it has no ResNet spec")
        return resnet_spec(self.name, self.stem, self.image_size, self.classes)


@dataclass(frozen=True)
class Measure:
    """The timing protocol (runner.timing). With ``target_ci`` set, windows are added after
    the first ``windows`` until the 95% CI half-width of the mean is within ``target_ci`` x
    the mean, or ``max_windows``; several ranks adapt together through an agreement
    across them (runner.rank.Rank.agree)."""

    warmup_steps: int = 5
    windows: int = 5
    steps_per_window: int = 5
    timeout_s: int = 1800
    # every rank must reach the first collective within this (runner.faults); the frameworks'
    # own collective timeouts are set from it too
    collective_timeout_s: int = 300
    # per-process address-space cap (RLIMIT_AS, dpscale.launch.guard); None: no cap
    memory_limit_mb: int | None = None

    target_ci: float | None = None
    max_windows: int | None = None
    # CPU cells wanting more CPUs than the machine has run instead of being skipped
    # (launch.contention names it and judges whether they stayed network-bound)
    oversubscribe: bool = False

    def adaptive_kwargs(
        self, processes: int = 1, agree: Callable[[bool], bool] | None = None
    ) -> dict:
        """time_windows' adaptive arguments for a cell of ``processes`` timing processes:
        none (fixed windows) when several would have to agree and ``agree`` (whether every
        rank is done) is not given."""
        if self.target_ci is None or (processes > 1 and agree is None):
            return {}
        adaptive = {"target_ci": self.target_ci, "max_windows": self.max_windows}
        if processes > 1:
            adaptive.update(world_size=processes, agree=agree)
        return adaptive


@dataclass(frozen=True)
class SGD:
    """Stochastic gradient descent with momentum, as every framework applies it here:
    ``weight_decay`` is L2 added to the gradient (g + wd * w), torch's convention."""

    lr: float
    momentum: float
    weight_decay: float


# The optimiser of synthetic (throughput) cells, the same in every framework.
SYNTHETIC_SGD = SGD(lr=0.01, momentum=0.9, weight_decay=5e-5)


@dataclass(frozen=True)
class Training:
    """How a real-data training cell trains (mode ``train``).

    The learning rate is ``base_lr`` at global batch ``base_batch``, scaled to the cell's
    global batch by ``lr_rule`` (none, linear, sqrt), warmed up linearly over
    ``warmup_epochs`` from the unscaled rate, then following ``schedule``.
    """

    dataset: str
    dataset_file: str
    epochs: int
    lr_rule: str
    base_lr: float
    base_batch: int
    warmup_epochs: float
    schedule: str
    momentum: float
    weight_decay: float
    augment: bool
    target_accuracy: float


@dataclass(frozen=True)
class Network:
    """The links between a cell's nodes (config ``networks``).

    ``host``: the machine's own network. Emulated (``rate``, ``delay``): every node is a
    network namespace on this machine (dpscale.launch.emulation.netns). Real (``interface``,
    ``env``): a cluster's interconnect, selected through the frameworks' interface variables.
    """

    name: str = HOST_NETWORK
    rate: str | None = None
    delay: str | None = None
    interface: str | None = None
    env: tuple[tuple[str, str], ...] = ()

    @property
    def emulated(self) -> bool:
        return self.rate is not None

    @property
    def link(self) -> Link:
        """The link as the model and the emulation read it (plan.link, the one parse of a
        rate): the emulated rate and delay, else unknown until a fit (host, a real one)."""
        if self.rate is None:
            return Link(self.name)
        return Link.from_rate(
            self.name,
            self.rate,
            self.delay,
            field=f"networks.{self.name}",
            emulated=True,
            source="configured rate",
        )

    @classmethod
    def from_config(cls, entry: str | dict[str, Any]) -> Network:
        if isinstance(entry, str):
            return cls(entry)
        fields = dict(entry)
        fields["env"] = tuple(sorted((fields.get("env") or {}).items()))
        return cls(**fields)


HOST = Network(HOST_NETWORK)


@dataclass(frozen=True)
class FolderInput:
    """Where a folder cell's images come from and how its loader runs (config
    ``image_folder``; the DataLoader's num_workers, prefetch_factor, pin_memory and
    persistent_workers, the last two used only with workers)."""

    path: str
    workers: int = 2
    prefetch: int = 2
    pin_memory: bool = False
    persistent_workers: bool = True


@dataclass(frozen=True)
class Interventions:
    """What the launcher does to the machine while the cell measures (config
    ``interventions``), to check the loss breakdown term by term
    (docs/decisions/loss-breakdown-interventions.md): ``slow_rank`` gets a CPU quota of
    ``slow_fraction`` of one core (a cgroup's), ``cpus`` the cores every process of the cell
    may run on. Not part of the cell id: an intervention study has a study name of its own."""

    slow_rank: int | None = None
    slow_fraction: float | None = None
    cpus: tuple[int, ...] | None = None

    @property
    def any(self) -> bool:
        return self != NO_INTERVENTIONS


NO_INTERVENTIONS = Interventions()


@dataclass(frozen=True)
class Collectives:
    """The message sizes a collectives cell times (config ``collectives``): ``min_bytes``,
    then each size ``factor`` times the last, up to and including ``max_bytes``. Sizes are
    whole float32 elements (multiples of 4 bytes)."""

    min_bytes: int
    max_bytes: int
    factor: int

    def message_sizes(self) -> list[int]:
        sizes, size = [], self.min_bytes
        while size < self.max_bytes:
            sizes.append(size)
            size *= self.factor
        return [*sizes, self.max_bytes]


@dataclass(frozen=True)
class Cell:
    """Everything a runner needs to measure one configuration.

    ``batch_per_device`` is the per-device (per-rank) batch; the global batch is
    ``batch_per_device * world_size`` (weak scaling, as tf_cnn_benchmarks counts it).
    Collectives cells (mode ``collectives``) time the strategy's all-reduce over message
    sizes (``collectives``); no batch applies, their ``batch_per_device`` is 0.
    Folder cells (mode ``folder``) are timed like synthetic ones on a user's images
    (``image_folder``: the folder and its loader's settings).
    ``options``: the values of the strategy's own config keys (plan.strategy.CellOption),
    not part of the cell id; in the cell's JSON they sit beside the other fields.
    """

    study: str
    strategy: str
    model: ModelConfig
    mode: str
    nodes: int
    devices_per_node: int
    batch_per_device: int
    repeat: int = 0
    accelerator: str = "cpu"
    threads_per_device: int = 1
    precision: str = "fp32"
    memory_format: str = "contiguous"
    measure: Measure = field(default_factory=Measure)
    seed: int = 0
    options: tuple[tuple[str, Any], ...] = ()
    training: Training | None = None
    network: Network = HOST
    collectives: Collectives | None = None
    # mode folder: the image folder and its loader's settings
    image_folder: FolderInput | None = None
    # what the cell does to the gradients' communication (plan.remedies); none keeps the ids
    comm: Comm = NONE
    skip_reason: str | None = None
    # a drift probe: the study's reference cell measured again (``drift``), its ``repeat``
    # the probe's number; measured like a synthetic cell, kept out of the fits (mode ``drift``)
    drift_probe: bool = False
    # a control cell (plan.controls): the layout with part of its work taken away, ``local``
    # or ``barrier``; every ordinary cell is ``full``
    control: str = controls.FULL
    # what the launcher does to the machine for an intervention study (config interventions)
    interventions: Interventions = field(default_factory=lambda: NO_INTERVENTIONS)

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def global_batch(self) -> int:
        return self.batch_per_device * self.world_size

    @property
    def loader_workers(self) -> int:
        """The loader's workers beside each rank (folder cells; 0 in other modes): worker
        processes (torch, MXNet) or tf.data's parallel map calls, each decoding images on a
        CPU of its own while the rank's threads run the step (workers 0: none, or
        tf.data's AUTOTUNE, which sizes itself to the CPUs it finds)."""
        return self.image_folder.workers if self.image_folder is not None else 0

    @property
    def cpus_per_rank(self) -> int:
        """The CPUs one rank keeps busy: its threads and its loader's workers."""
        return self.threads_per_device + self.loader_workers

    @property
    def sgd(self) -> SGD:
        """The optimiser settings (training cells: their base rate, rescheduled per step)."""
        if self.training is None:
            return SYNTHETIC_SGD
        t = self.training
        return SGD(lr=t.base_lr, momentum=t.momentum, weight_decay=t.weight_decay)

    @property
    def cell_id(self) -> str:
        return "/".join([self.strategy, self.model.key, self.mode_key, self.layout])

    @property
    def mode_key(self) -> str:
        """``synthetic``, ``collectives``, ``folder``, ``drift`` for drift probes,
        ``control-<control>`` for control cells, or ``train-<dataset>-<lr rule>`` for
        training cells; cells across nodes on a network other than the host's end in
        ``-net-<network>``, cells with a communication remedy in ``-comm-<remedy>``."""
        key = "drift" if self.drift_probe else self.mode
        if self.control != controls.FULL:
            key = controls.mode_key(self.control)
        if self.training is not None:
            key = f"{self.mode}-{self.training.dataset}-{self.training.lr_rule}"
        if self.network.name != HOST.name:
            key += f"-net-{self.network.name}"
        if not self.comm.is_default:
            key += f"-comm-{self.comm.key}"
        return key

    @property
    def layout(self) -> str:
        return Layout(self.nodes, self.devices_per_node).id_part(self.batch_per_device, self.repeat)

    def result_path(self, results_dir: str | Path) -> Path:
        return Path(results_dir) / "cells" / f"{self.cell_id}.json"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(data.pop("options"))
        data["comm"] = self.comm.to_dict()
        if self.image_folder is None:  # a cell of another mode reads as it did before
            del data["image_folder"]
        if self.comm.is_default:  # a cell without a remedy reads as it did before comm
            del data["comm"]
        if not self.measure.oversubscribe:  # nor does one that runs where it always did
            del data["measure"]["oversubscribe"]
        if self.control == controls.FULL:  # nor does every cell that is not a control
            del data["control"]
        if self.interventions == NO_INTERVENTIONS:  # nor one the machine is left alone for
            del data["interventions"]
        data["model"]["key"] = self.model.key
        data["world_size"] = self.world_size
        data["global_batch"] = self.global_batch
        data["cell_id"] = self.cell_id
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cell:
        data = dict(data)
        for derived in ("world_size", "global_batch", "cell_id"):
            data.pop(derived, None)
        model = dict(data.pop("model"))
        model.pop("key", None)
        measure = data.pop("measure", {})
        training = data.pop("training", None)
        collectives = data.pop("collectives", None)
        folder = data.pop("image_folder", None)
        comm = data.pop("comm", None) or {}
        interventions = data.pop("interventions", None) or {}
        if interventions.get("cpus") is not None:
            interventions["cpus"] = tuple(interventions["cpus"])
        network = dict(data.pop("network", None) or {})
        network["env"] = tuple(tuple(pair) for pair in network.get("env", ()))
        own = {f.name for f in fields(cls)}
        options = tuple(sorted((key, data.pop(key)) for key in list(data) if key not in own))
        return cls(
            options=options,
            model=ModelConfig(**model),
            measure=Measure(**measure),
            training=Training(**training) if training else None,
            network=Network(**network),
            collectives=Collectives(**collectives) if collectives else None,
            image_folder=FolderInput(**folder) if folder else None,
            comm=Comm(**comm),
            interventions=Interventions(**interventions),
            **data,
        )

    @classmethod
    def from_json(cls, text: str) -> Cell:
        return cls.from_dict(json.loads(text))
