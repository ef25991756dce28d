"""A study as the workflow plans it: the config checked (plan.config), then its matrix
expanded (plan.matrix), once. The checks that need the matrix (the collectives' byte range
against the largest gradient, the drift probes' reference cell) run here, so config.py never
imports the matrix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpscale.plan.cell import Cell, ModelConfig
from dpscale.plan.config import check_config
from dpscale.plan.errors import ConfigError
from dpscale.plan.matrix import collectives_settings, expand
from dpscale.plan.strategy import Strategy


def plan_study(
    config: dict[str, Any], strategies: Mapping[str, Strategy], writes: bool = True
) -> tuple[dict[str, Any], list[Cell]]:
    """The config with defaults filled in and every cell of its matrix; ConfigError (one
    line naming the field) otherwise. ``writes=False``: only read (plan.config.check_config)."""
    filled = check_config(config, strategies, writes)
    check_collectives_range(filled)
    return filled, expand(filled, strategies)


def check_collectives_range(config: dict[str, Any]) -> None:
    zoo_only = all(ModelConfig(**model).zoo for model in config["models"])
    if zoo_only and "collectives" not in config["modes"]:
        return  # no collectives cell, and no shared ResNet to size its largest message by
    settings = collectives_settings(config)
    if settings.max_bytes < settings.min_bytes:
        where = "max_bytes" if config["collectives"]["max_bytes"] is not None else "min_bytes"
        raise ConfigError(
            f"collectives.{where}: min_bytes ({settings.min_bytes}) must not exceed max_bytes "
            f"({settings.max_bytes}{'' if where == 'max_bytes' else ', the largest gradient'})"
        )
