"""The control cells a study asks for (config ``controls``), expanded from its cells
(plan.controls says what each control is)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dpscale.plan.cell import Cell
from dpscale.plan.controls import FULL, LOCAL
from dpscale.plan.errors import ConfigError
from dpscale.plan.strategy import Strategy


def wants_controls(cell: Cell) -> bool:
    """Whether a cell is one the controls copy: a synthetic cell without a communication
    remedy (a remedy changes the exchange, which the controls take away)."""
    return (
        cell.mode == "synthetic"
        and cell.comm.is_default
        and not cell.drift_probe
        and cell.control == FULL
        and not cell.skip_reason
    )


def controls_of(cell: Cell, wanted: list[str], strategy: Strategy) -> list[Cell]:
    """A layout's control cells, each skipped with its strategy's reason where it cannot
    run it; a one-device cell's ``local`` only, where its strategy runs it (its own
    exchange, taken away)."""
    if cell.world_size == 1:
        runs = LOCAL in wanted and strategy.control_skip_reason(LOCAL) is None
        return [dataclasses.replace(cell, control=LOCAL)] if runs else []
    return [
        dataclasses.replace(cell, control=c, skip_reason=strategy.control_skip_reason(c))
        for c in wanted
    ]


def control_cells(
    config: Mapping[str, Any], cells: list[Cell], strategies: Mapping[str, Strategy]
) -> list[Cell]:
    """``cells`` with the control cells config ``controls`` asks for, each right after the
    cell it copies (cells run in the matrix's order: a layout's parts measured close in
    time, so the machine's drift between them is small): every runnable multi-process
    layout that :func:`wants_controls`, once per control, a control its strategy does not
    run skipped with the strategy's reason; and the one-device cells' ``local`` of the
    strategies with such a layout. ConfigError (one line naming the field) where no cell
    could run a control the study asks for."""
    wanted = list(config.get("controls") or [])
    if not wanted:
        return cells
    copied = [cell for cell in cells if wants_controls(cell)]
    layouts = [cell for cell in copied if cell.world_size > 1]
    check_controls_have_layouts(config, cells, layouts)
    for control in wanted:
        check_someone_runs(control, layouts, strategies)
    split = {cell.strategy for cell in layouts}
    out = []
    for cell in cells:
        out.append(cell)
        if wants_controls(cell) and cell.strategy in split:
            out += controls_of(cell, wanted, strategies[cell.strategy])
    return out


def check_controls_have_layouts(
    config: Mapping[str, Any], cells: list[Cell], layouts: list[Cell]
) -> None:
    """A breakdown needs a runnable multi-process synthetic cell and the one-device cells
    it is measured against."""
    if "synthetic" not in config["modes"]:
        raise ConfigError(
            f"controls: {list(config['controls'])} split synthetic cells; modes "
            f"{list(config['modes'])} has none; allowed: add synthetic to modes, or controls: []"
        )
    if not layouts:
        raise ConfigError(
            f"controls: {list(config['controls'])} needs a runnable layout of more than one "
            "process (nodes x devices_per_node above 1, without a comm remedy); this study "
            "has none; allowed: controls: [] for a one-device study"
        )
    single = [c for c in cells if c.mode == "synthetic" and c.world_size == 1]
    if not single:
        raise ConfigError(
            "controls: a layout's loss is measured against one device's step; nodes and "
            "devices_per_node must both include 1"
        )


def check_someone_runs(
    control: str, layouts: list[Cell], strategies: Mapping[str, Strategy]
) -> None:
    """One line where no strategy with a runnable layout in the study runs ``control``."""
    present = sorted({cell.strategy for cell in layouts})
    if any(strategies[name].control_skip_reason(control) is None for name in present):
        return
    able = sorted(name for name, s in strategies.items() if s.control_skip_reason(control) is None)
    raise ConfigError(
        f"controls: {control!r} is run by none of this study's multi-process strategies "
        f"{present}; strategies that run it: {able}"
    )
