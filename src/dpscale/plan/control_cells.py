"""The control cells a study asks for (config ``controls``), expanded from its cells
(plan.controls says what each control is)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from dpscale.plan.cell import Cell
from dpscale.plan.controls import CONTROLS, FULL, LOCAL
from dpscale.plan.errors import ConfigError
from dpscale.plan.strategy import Strategy


def wants_controls(cell: Cell, batch_sizes: list[int] | None = None) -> bool:
    """Whether a cell is one the controls copy: a synthetic cell without a communication
    remedy (a remedy changes the exchange, which the controls take away), at one of
    ``batch_sizes`` where given (config ``controls_batch_sizes``)."""
    return (
        cell.mode == "synthetic"
        and cell.comm.is_default
        and not cell.drift_probe
        and cell.control == FULL
        and not cell.skip_reason
        and (batch_sizes is None or cell.batch_per_device in batch_sizes)
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
    asked = config.get("controls") or []
    if not asked:
        return cells
    auto = asked == AUTO
    batches = control_batches(config)
    copied = [cell for cell in cells if wants_controls(cell, batches)]
    layouts = [cell for cell in copied if cell.world_size > 1]
    if auto:  # the default study's: where there is something to split, by what runs it
        wanted = [c for c in CONTROLS if runs_somewhere(c, layouts, strategies)]
        if not wanted or not has_one_device(cells):
            return cells
    else:
        wanted = list(asked)
        check_controls_have_layouts(config, cells, layouts)
        for control in wanted:
            check_someone_runs(control, layouts, strategies)
    split = {cell.strategy for cell in layouts}
    out = []
    for cell in cells:
        out.append(cell)
        if wants_controls(cell, batches) and cell.strategy in split:
            out += controls_of(cell, wanted, strategies[cell.strategy])
    return out


def control_batches(config: Mapping[str, Any]) -> list[int] | None:
    """The batch sizes controls run at (config ``controls_batch_sizes``): the study's own,
    its largest, or None for every one; ConfigError where one is not the study's."""
    batches = config.get("controls_batch_sizes")
    if batches is None:
        return None
    if batches == LARGEST:
        return [max(config["batch_sizes"])]
    unknown = sorted(set(batches) - set(config["batch_sizes"]))
    if unknown:
        raise ConfigError(
            f"controls_batch_sizes: {unknown} are not among batch_sizes; allowed: a subset "
            f"of {sorted(config['batch_sizes'])}, {LARGEST}, or null for every one"
        )
    return list(batches)


LARGEST = "largest"


AUTO = "auto"


def runs_somewhere(control: str, layouts: list[Cell], strategies: Mapping[str, Strategy]) -> bool:
    """Whether a strategy with a runnable multi-process layout runs ``control``."""
    return any(strategies[cell.strategy].control_skip_reason(control) is None for cell in layouts)


def has_one_device(cells: list[Cell]) -> bool:
    return any(c.mode == "synthetic" and c.world_size == 1 for c in cells)


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
    if not has_one_device(cells):
        raise ConfigError(
            "controls: a layout's loss is measured against one device's step; nodes and "
            "devices_per_node must both include 1"
        )


def check_someone_runs(
    control: str, layouts: list[Cell], strategies: Mapping[str, Strategy]
) -> None:
    """One line where no strategy with a runnable layout in the study runs ``control``."""
    present = sorted({cell.strategy for cell in layouts})
    if runs_somewhere(control, layouts, strategies):
        return
    able = sorted(name for name, s in strategies.items() if s.control_skip_reason(control) is None)
    raise ConfigError(
        f"controls: {control!r} is run by none of this study's multi-process strategies "
        f"{present}; strategies that run it: {able}"
    )


def runs_controls(cells: Iterable[Cell]) -> bool:
    """Whether any control cell of a study runs (the report then splits its layouts' loss)."""
    return any(cell.control != FULL and not cell.skip_reason for cell in cells)
