"""A cell: one point of the study matrix, measured by one job into one result file."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dpscale.core.resnet_spec import ResNetSpec, resnet_spec


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

    def spec(self) -> ResNetSpec:
        return resnet_spec(self.name, self.stem, self.image_size, self.classes)


@dataclass(frozen=True)
class Measure:
    """The timing protocol (core.timing). With ``target_ci`` set, windows are added after
    the first ``windows`` until the 95% CI half-width of the mean is within ``target_ci`` x
    the mean, or ``max_windows``; only 1-process cells adapt unless the runner passes an
    agreement across ranks (core.timing.time_windows)."""

    warmup_steps: int = 5
    windows: int = 5
    steps_per_window: int = 5
    timeout_s: int = 1800
    target_ci: float | None = None
    max_windows: int | None = None

    def adaptive_kwargs(self, processes: int = 1) -> dict:
        """time_windows' adaptive arguments for a cell of ``processes`` timing processes
        without an agreement callback: none (fixed windows) when several would have to
        agree."""
        if self.target_ci is None or processes > 1:
            return {}
        return {"target_ci": self.target_ci, "max_windows": self.max_windows}


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
class Cell:
    """Everything a runner needs to measure one configuration.

    ``batch_per_device`` is the per-device (per-rank) batch; the global batch is
    ``batch_per_device * world_size`` (weak scaling, as tf_cnn_benchmarks counts it).
    ``mxnet_servers`` is the number of parameter servers of the mxnet-dist strategy (1 in
    every other strategy's cells); it is not part of the cell id.
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
    mxnet_servers: int = 1
    training: Training | None = None
    skip_reason: str | None = None

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def global_batch(self) -> int:
        return self.batch_per_device * self.world_size

    @property
    def cell_id(self) -> str:
        return "/".join([self.strategy, self.model.key, self.mode_key, self.layout])

    @property
    def mode_key(self) -> str:
        """``synthetic``, or ``train-<dataset>-<lr rule>`` for training cells."""
        if self.training is None:
            return self.mode
        return f"{self.mode}-{self.training.dataset}-{self.training.lr_rule}"

    @property
    def layout(self) -> str:
        return f"n{self.nodes}-d{self.devices_per_node}-b{self.batch_per_device}-r{self.repeat}"

    def result_path(self, results_dir: str | Path) -> Path:
        return Path(results_dir) / "cells" / f"{self.cell_id}.json"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
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
        return cls(
            model=ModelConfig(**model),
            measure=Measure(**measure),
            training=Training(**training) if training else None,
            **data,
        )

    @classmethod
    def from_json(cls, text: str) -> Cell:
        return cls.from_dict(json.loads(text))
