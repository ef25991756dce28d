"""Expansion of a study configuration into cells, with static skip reasons."""

from __future__ import annotations

import itertools
from typing import Any

from dpscale.core.cell import Cell, Measure, ModelConfig
from dpscale.registry import STRATEGIES


def expand(config: dict[str, Any]) -> list[Cell]:
    """Every cell of the matrix, including those that cannot run (with ``skip_reason``).

    ``config`` must already be checked (``dpscale.core.config.check_config``).
    """
    measure_cfg = dict(config["measure"])
    repeats = measure_cfg.pop("repeats")
    measure = Measure(**measure_cfg)
    models = [ModelConfig(**model) for model in config["models"]]
    cells = []
    for name, model, mode, nodes, devices, batch, repeat in itertools.product(
        config["strategies"],
        models,
        config["modes"],
        sorted(config["nodes"]),
        sorted(config["devices_per_node"]),
        sorted(config["batch_sizes"]),
        range(repeats),
    ):
        strategy = STRATEGIES[name]
        cells.append(
            Cell(
                study=config["study"],
                strategy=name,
                model=model,
                mode=mode,
                nodes=nodes,
                devices_per_node=devices,
                batch_per_device=batch,
                repeat=repeat,
                accelerator=config["accelerator"],
                threads_per_device=config["threads_per_device"],
                precision=config["precision"],
                memory_format=config["memory_format"],
                measure=measure,
                seed=config["seed"],
                skip_reason=strategy.static_skip_reason(config["accelerator"], nodes, devices),
            )
        )
    return cells
