"""Expansion of a study configuration into cells, with static skip reasons."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpscale.plan import remedies
from dpscale.plan.cell import (
    HOST,
    NO_INTERVENTIONS,
    Cell,
    Collectives,
    FolderInput,
    Interventions,
    Measure,
    ModelConfig,
    Network,
    Training,
)
from dpscale.plan.control_cells import control_cells
from dpscale.plan.controls import FULL
from dpscale.plan.errors import ConfigError
from dpscale.plan.gpu_support import gpu_skip_reasons, with_gpu_skips
from dpscale.plan.ring import gradient_bytes
from dpscale.plan.strategy import Strategy


def expand(config: dict[str, Any], strategies: Mapping[str, Strategy]) -> list[Cell]:
    """Every cell of the matrix, including those that cannot run (with ``skip_reason``).

    ``config`` must already be checked (``dpscale.plan.config.check_config``; the workflow
    calls both through ``dpscale.plan.study.plan_study``);
    ``strategies``: the registered strategies (dpscale.registry.STRATEGIES).
    """
    cells = []
    if "synthetic" in config["modes"]:
        cells += _synthetic_cells(config, strategies)
    if "train" in config["modes"]:
        cells += _training_cells(config, strategies)
    if "collectives" in config["modes"]:
        cells += _collective_cells(config, strategies)
    if "folder" in config["modes"]:
        cells += _synthetic_cells(config, strategies, folder_input(config))
    cells = _gpu_skips(config, cells, strategies)
    cells = control_cells(config, cells, strategies)
    return cells + drift_probes(config, cells)


def _gpu_skips(
    config: dict[str, Any], cells: list[Cell], strategies: Mapping[str, Strategy]
) -> list[Cell]:
    """The cells of a framework build that cannot run on the study's GPU, skipped with why
    (plan.gpu_support); a site's own interpreter is the site's business."""
    built = {strategies[name].env for name in config["strategies"]} - set(config["interpreters"])
    reasons = gpu_skip_reasons(config, sorted(built))
    return with_gpu_skips(cells, reasons, {name: s.env for name, s in strategies.items()})


def drift_reference(config: dict[str, Any], cells: list[Cell]) -> Cell:
    """The cell drift probes repeat: ``drift.cell``, or the first strategy's runnable
    synthetic cell on the fewest nodes and devices at the middle batch size."""
    candidates = [
        c for c in cells if c.mode == "synthetic" and not c.skip_reason and c.control == FULL
    ]
    wanted = config["drift"]["cell"]
    if wanted is not None:
        found = [c for c in candidates if c.cell_id == wanted]
        if not found:
            examples = [c.cell_id for c in candidates[:3]]
            raise ConfigError(
                f"drift.cell: {wanted!r} is not a runnable synthetic cell of this study; "
                f"e.g. {examples}"
            )
        return found[0]
    if not candidates:
        raise ConfigError("drift.probes: needs a runnable synthetic cell (modes: [synthetic])")
    batches = sorted({c.batch_per_device for c in candidates})
    middle = batches[len(batches) // 2]
    return min(
        candidates,
        key=lambda c: (
            c.nodes,
            c.devices_per_node,
            not c.comm.is_default,
            c.batch_per_device != middle,
            c.repeat,
        ),
    )


def drift_probes(config: dict[str, Any], cells: list[Cell]) -> list[Cell]:
    """``drift.probes`` copies of the reference cell (repeat = probe number)."""
    count = config["drift"]["probes"]
    if not count:
        return []
    if count < 2:
        raise ConfigError(f"drift.probes: {count} draws no trace; allowed: 0 or at least 2")
    reference = drift_reference(config, cells)
    return [dataclasses.replace(reference, drift_probe=True, repeat=k) for k in range(count)]


def run_priorities(cells: list[Cell]) -> dict[str, int]:
    """Each cell's scheduling priority (higher runs first): the study's cells a repeat at a
    time (every first repeat, then every second, ...) in the matrix's order, the drift
    probes spread evenly from the first measured cell to the last, skipped cells last."""
    probes = [c for c in cells if c.drift_probe]
    ordinary = sorted((c for c in cells if not c.drift_probe), key=lambda c: c.repeat)
    measured = [c for c in ordinary if not c.skip_reason]
    order = list(measured)
    for k in reversed(range(len(probes))):  # from the back: earlier positions stay put
        order.insert(round(k * len(measured) / max(len(probes) - 1, 1)), probes[k])
    order += [c for c in ordinary if c.skip_reason]
    return {cell.cell_id: len(order) - position for position, cell in enumerate(order)}


def _cell(config: dict[str, Any], strategy: Strategy, **fields: Any) -> Cell:
    options = tuple(
        sorted(
            (option.name, config[option.name])
            for option in strategy.cell_options
            if option.carried(config[option.name])  # an option at its default may stay out
        )
    )
    return Cell(
        study=config["study"],
        strategy=strategy.name,
        accelerator=config["accelerator"],
        threads_per_device=config["threads_per_device"],
        precision=config["precision"],
        memory_format=config["memory_format"],
        skip_reason=strategy.skip_reason(
            config["accelerator"],
            fields["nodes"],
            fields["devices_per_node"],
            fields["mode"],
            fields.get("comm", remedies.NONE),
        )
        or strategy.model_skip_reason(fields["model"]),
        # only the cells that use a strategy's option carry it: changing it reruns only those
        options=options,
        interventions=interventions(config),
        **fields,
    )


def interventions(config: dict[str, Any]) -> Interventions:
    """What the launcher does to the machine for every cell (config ``interventions``)."""
    section = config.get("interventions") or {}
    slow = section.get("slow_rank")
    cpus = section.get("cpus")
    if not slow and cpus is None:
        return NO_INTERVENTIONS
    return Interventions(
        slow_rank=slow["rank"] if slow else None,
        slow_fraction=slow["cpu_fraction"] if slow else None,
        cpus=tuple(cpus) if cpus is not None else None,
    )


def _networks(config: dict[str, Any], nodes: int) -> list[Network]:
    """Cells on one node talk within it: one cell, on the host. Across nodes: one per link."""
    if nodes == 1:
        return [HOST]
    return [Network.from_config(entry) for entry in config["networks"]]


def _comms(
    config: dict[str, Any], processes: int, network: Network | None = None
) -> list[remedies.Comm]:
    """The remedies of cells whose gradients travel between processes; a one-process cell
    has no such traffic and is measured once, as the baseline of every remedy. On a
    ``network`` (synthetic and collectives cells), only the remedies whose ``networks``
    include it; training cells (no network given) take ``train.comm`` when set."""
    if processes == 1:
        return [remedies.NONE]
    if network is None:
        if config["train"].get("comm"):
            return remedies.parse_all(config["train"]["comm"], training=True)
        return remedies.parse_all(config["comm"])
    entries = config["comm"]
    wanted = [remedies.networks_of(entry) for entry in entries]
    return [
        comm
        for comm, names in zip(remedies.parse_all(entries), wanted, strict=True)
        if names is None or network.name in names
    ]


def _measure(config: dict[str, Any]) -> Measure:
    measure = dict(config["measure"])
    measure.pop("repeats")
    measure.pop("again", None)  # which cells are measured once more: the workflow's business
    if measure.get("collective_timeout_s") is None:
        measure["collective_timeout_s"] = min(300, measure["timeout_s"] // 2)
    return Measure(**measure)


def folder_input(config: dict[str, Any]) -> FolderInput:
    """The image folder and loader settings of folder cells (config ``image_folder``)."""
    settings = dict(config["image_folder"])
    # every rank reads the same folder, whatever its working directory
    settings["path"] = str(Path(settings["path"]).absolute())
    return FolderInput(**settings)


def _synthetic_cells(
    config: dict[str, Any], strategies: Mapping[str, Strategy], folder: FolderInput | None = None
) -> list[Cell]:
    """Cells timed step by step: on random tensors, or with ``folder`` on its images
    (mode folder), over the same strategies, models, layouts and batch sizes."""
    measure = _measure(config)
    models = [ModelConfig(**model) for model in config["models"]]
    return [
        _cell(
            config,
            strategies[name],
            model=model,
            mode="synthetic" if folder is None else "folder",
            image_folder=folder,
            nodes=nodes,
            devices_per_node=devices,
            batch_per_device=batch,
            repeat=repeat,
            measure=measure,
            seed=config["seed"],
            network=network,
            comm=comm,
        )
        for name, model, nodes, devices, batch, repeat in itertools.product(
            config["strategies"],
            models,
            sorted(config["nodes"]),
            sorted(config["devices_per_node"]),
            sorted(config["batch_sizes"]),
            range(config["measure"]["repeats"]),
        )
        for network in _networks(config, nodes)
        for comm in _comms(config, nodes * devices, network)
    ]


# Collectives cells have no batch: their id carries this placeholder (layout ``-b0-``).
NO_BATCH = 0


def collectives_model(config: dict[str, Any]) -> ModelConfig:
    """The model whose gradient sets the largest message by default: the study's largest
    shared ResNet (a zoo model's size is known only where its framework builds it)."""
    models = [ModelConfig(**model) for model in config["models"]]
    shared = [model for model in models if model.zoo is None]
    if not shared:
        raise ConfigError(
            "modes: collectives sizes its messages by the study's largest shared ResNet; "
            f"models names only zoo models ({[m.name for m in models]}); allowed: add one "
            "of name resnet18, resnet50, ... to models"
        )
    return max(shared, key=lambda model: model.spec().trainable_params())


def collectives_settings(config: dict[str, Any]) -> Collectives:
    """Message sizes from ``collectives`` (already checked); max_bytes null: the fp32
    gradient of the study's largest model."""
    section = config["collectives"]
    max_bytes = section["max_bytes"]
    if max_bytes is None:
        max_bytes = gradient_bytes(collectives_model(config).spec().trainable_params())
    return Collectives(section["min_bytes"], max_bytes, section["factor"])


def _collective_cells(config: dict[str, Any], strategies: Mapping[str, Strategy]) -> list[Cell]:
    """One cell per strategy, layout and network: the strategy's all-reduce over message sizes."""
    model, settings = collectives_model(config), collectives_settings(config)
    measure = _measure(config)
    if config["collectives"]["windows"] is not None:
        measure = dataclasses.replace(measure, windows=config["collectives"]["windows"])
    return [
        _cell(
            config,
            strategies[name],
            model=model,
            mode="collectives",
            nodes=nodes,
            devices_per_node=devices,
            batch_per_device=NO_BATCH,
            measure=measure,
            seed=config["seed"],
            network=network,
            collectives=settings,
            comm=comm,
        )
        for name, nodes, devices in itertools.product(
            config["strategies"], sorted(config["nodes"]), sorted(config["devices_per_node"])
        )
        for network in _networks(config, nodes)
        for comm in _comms(config, nodes * devices, network)
    ]


def dataset_file(train: dict[str, Any], model: ModelConfig) -> str:
    """The prepared dataset a training cell reads (see workflow/rules/data.smk)."""
    if train["dataset"] == "digits":
        return str(Path(train["data_dir"]) / f"digits-{model.image_size}.npz")
    return str(Path(train["data_dir"]) / f"{train['dataset']}.npz")


def _training_cells(config: dict[str, Any], strategies: Mapping[str, Strategy]) -> list[Cell]:
    train = config["train"]
    measure = _measure(config)
    cells = []
    for name, model_cfg, nodes, devices, batch, rule, (index, seed) in itertools.product(
        train["strategies"] or config["strategies"],
        train["models"],
        sorted(train["nodes"] or config["nodes"]),
        sorted(train["devices_per_node"] or config["devices_per_node"]),
        sorted(train["batch_sizes"]),
        train["lr_rules"],
        enumerate(train["seeds"]),
    ):
        model = ModelConfig(**model_cfg)
        is_baseline = nodes * devices * batch == train["base_batch"] and nodes * devices == 1
        if is_baseline and rule != train["lr_rules"][0]:
            continue  # every rule gives base_lr at the base batch: one baseline per seed
        training = Training(
            dataset=train["dataset"],
            dataset_file=dataset_file(train, model),
            epochs=train["epochs"],
            lr_rule="none" if is_baseline else rule,
            base_lr=train["base_lr"],
            base_batch=train["base_batch"],
            warmup_epochs=train["warmup_epochs"],
            schedule=train["schedule"],
            momentum=train["momentum"],
            weight_decay=train["weight_decay"],
            augment=train["augment"],
            target_accuracy=train["target_accuracy"],
        )
        cells += [
            _cell(
                config,
                strategies[name],
                model=model,
                mode="train",
                nodes=nodes,
                devices_per_node=devices,
                batch_per_device=batch,
                repeat=index,
                measure=measure,
                seed=seed,
                training=training,
                network=network,
                comm=comm,
            )
            for network in _networks(config, nodes)
            for comm in _comms(config, nodes * devices)
        ]
    return cells
