"""A link between ranks, in one unit: bytes per second and seconds. Parsed once from where
it is known (a configured rate and delay, a measured alpha-beta fit, a network to predict)
and written one way, so the model, its tables and its figures cannot disagree on a unit.

``bytes_per_s`` is NaN where nothing is known before fitting (the machine's own network,
``host``, or a real interconnect without a collectives fit): the model then fits it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.units import parse_quantity

# the link of one-node cells: their ranks talk inside the machine
INTRA_NODE = "intra-node"
FITTED = "fitted"  # the source of a link the model fits (nothing known before)


@dataclass(frozen=True)
class Link:
    """One link: its name (a network's, ``host`` or ``intra-node``), bandwidth in bytes/s
    (NaN: unknown), latency in s, whether it is emulated here, and where it came from."""

    name: str
    bytes_per_s: float = math.nan
    latency_s: float = 0.0
    emulated: bool = False
    source: str = FITTED

    @classmethod
    def from_rate(
        cls,
        name: str,
        rate: str,
        delay: str | None = None,
        *,
        field: str,
        emulated: bool,
        source: str,
        keys: tuple[str, str] = ("rate", "delay"),
    ) -> Link:
        """A link written as tc writes it (``10gbit``, ``50us``); errors name ``field`` and
        its ``keys`` (``predict.networks`` says bandwidth and latency)."""
        bits = parse_quantity(rate, f"{field}.{keys[0]}")
        seconds = parse_quantity(delay, f"{field}.{keys[1]}") if delay else 0.0
        return cls(name, bits / 8, seconds, emulated, source)

    @classmethod
    def from_alpha_beta(
        cls, name: str, alpha_s: float, beta_gb_s: float, *, emulated: bool = False
    ) -> Link:
        """A link measured by the collectives benchmark (comm_fits: alpha s, beta GB/s)."""
        return cls(name, beta_gb_s * 1e9, max(alpha_s, 0.0), emulated, "comm_fits")

    @property
    def known(self) -> bool:
        """Whether its bandwidth is known before fitting."""
        return math.isfinite(self.bytes_per_s) and self.bytes_per_s > 0

    @property
    def bits_per_s(self) -> float:
        return self.bytes_per_s * 8

    @property
    def gbit_per_s(self) -> float:
        return self.bytes_per_s * 8 / 1e9

    def words(self) -> str:
        """``10 Gbit/s, 50 us latency``; ``host (fitted)`` where the bandwidth is unknown."""
        if not self.known:
            return f"{self.name} ({self.source})"
        text = f"{self.gbit_per_s:g} Gbit/s"
        return text + (f", {self.latency_s * 1e6:g} us latency" if self.latency_s else "")


HOST_LINK = Link(HOST_NETWORK)


def predicted_links(predict: Mapping[str, Any]) -> list[Link]:
    """A checked config's ``predict.networks``: the clusters' links to predict, not
    emulated (``bandwidth`` and ``latency`` as tc writes them)."""
    return [
        Link.from_rate(
            entry["name"],
            entry["bandwidth"],
            entry.get("latency"),
            field=f"predict.networks[{index}]",
            emulated=False,
            source="predict.networks",
            keys=("bandwidth", "latency"),
        )
        for index, entry in enumerate(predict.get("networks") or [])
    ]


def links_of(entries: Sequence[Mapping[str, Any]]) -> list[Link]:
    """Links from plan.model_inputs' JSON."""
    return [Link(**entry) for entry in entries]
