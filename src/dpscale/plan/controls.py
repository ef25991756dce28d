"""Control cells: a multi-process layout measured again with part of its work taken away,
so that its lost efficiency splits into terms (docs/decisions/loss-breakdown.md).

- ``local``: every rank steps on its own gradients, nothing exchanged: one device's compute
  plus what ranks sharing a machine cost each other (contention);
- ``barrier``: as ``local``, with one barrier per step: adds waiting for the slowest rank;
- ``full``: the cell as it is (every ordinary cell): adds the exchange not hidden behind the
  backward pass.

A strategy's one-device cell pays for its own exchange too (a 1-rank all-reduce, a
parameter server round trip): its ``local`` control is measured as well, so that the terms
compare compute with compute and exchange with exchange.

A strategy's adapter declares the controls it runs (plan.strategy.Strategy.controls) and
says how, in words; a strategy without one skips its control cells with the reason. A study
asks for them with config ``controls``; plan.control_cells expands them from its cells.
"""

from __future__ import annotations

from dataclasses import dataclass

FULL = "full"
LOCAL = "local"
BARRIER = "barrier"
# what a study may ask for (config controls), in the order their terms add up
CONTROLS = (LOCAL, BARRIER)
# what each control takes away, in words (the report's and check-config's)
MEANING = {
    LOCAL: "every rank steps on its own gradients; nothing is exchanged",
    BARRIER: "every rank steps on its own gradients, then waits at one barrier per step",
}
# a control cell's mode key replaces its mode's, as a drift probe's does: control-local
MODE_PREFIX = "control-"


@dataclass(frozen=True)
class Control:
    """One control a strategy runs: its name (``local``, ``barrier``) and how the adapter
    runs it, in the framework's own words (``DDP's no_sync() on every step``)."""

    name: str
    how: str

    def __post_init__(self) -> None:
        if self.name not in CONTROLS:
            raise ValueError(f"control {self.name!r} is not one of {list(CONTROLS)}")


def mode_key(control: str) -> str:
    """``control-local``: the mode part of a control cell's id."""
    return f"{MODE_PREFIX}{control}"


def control_of_mode(mode: str) -> str:
    """The control a table's mode names (``control-local`` -> ``local``), ``full`` for any
    other mode."""
    return mode[len(MODE_PREFIX) :] if mode.startswith(MODE_PREFIX) else FULL


def is_control_mode(mode: str) -> bool:
    """Whether a table's mode is a control cell's (``control-local``)."""
    return mode.startswith(MODE_PREFIX)
