"""A layout: how many nodes, how many devices on each. The one place that writes a layout
in words or in a cell id, so a sentence, a legend and a path cannot spell it differently.

Each wording the report uses is a method here; they differ where the pages always differed
(a sentence, an axis, a legend), and stay apart so every page reads as before."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# the network of cells on one node (and of a cluster's own interconnect): its table value
HOST_NETWORK = "host"
# a cell id's layout part, as a format string (plan.cell.CELL_PATTERN's last part)
LAYOUT_ID = "n{nodes}-d{devices}-b{batch}-r{repeat}"


def plural(count: float, word: str) -> str:
    """``1 node``, ``2 nodes``, ``1,200 images``: a count as it reads (rounded to a whole
    one) and its word, singular only where the count reads 1 ("1 step", never "1 steps")."""
    shown = f"{count:,.0f}"
    return f"{shown} {word}" if shown == "1" else f"{shown} {word}s"


def devices_words(world_size: Any) -> str:
    """``4 device(s)``: a legend's entry for a device count (throughput, MFU figures)."""
    return f"{world_size} device(s)"


def nodes_words(nodes: int) -> str:
    """``1 node``, ``2 nodes``: a node count in a sentence (a published case's layout)."""
    return plural(nodes, "node")


def devices_per_node_words(devices_per_node: int) -> str:
    """``2 devices per node``: the answer figures' colour key."""
    return f"{plural(devices_per_node, 'device')} per node"


@dataclass(frozen=True)
class Layout:
    """``nodes`` x ``devices_per_node``. Values are kept as given (a table's integers), so
    a row's layout reads exactly as its columns print."""

    nodes: int
    devices_per_node: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | Any) -> Layout:
        """A table row's layout (a mapping, a pandas row or a named tuple)."""
        if hasattr(row, "_fields"):  # DataFrame.itertuples
            return cls(row.nodes, row.devices_per_node)
        return cls(row["nodes"], row["devices_per_node"])

    @classmethod
    def of_world(cls, world_size: int, nodes: int) -> Layout:
        """The layout of ``world_size`` devices spread evenly over ``nodes``."""
        return cls(nodes, world_size // nodes)

    def _over(self, network: str) -> str:
        return f" over {network}" if self.nodes > 1 else ""

    def words(self, network: str) -> str:
        """``1 node x 2 devices`` or ``2 nodes x 1 device over 1gbe``: sentences."""
        nodes, devices = plural(self.nodes, "node"), plural(self.devices_per_node, "device")
        return f"{nodes} x {devices}{self._over(network)}"

    def axis_label(self, network: str) -> str:
        """``2 nodes × 1 device, 1gbe``: the answer figures' axes (network always)."""
        nodes, devices = plural(self.nodes, "node"), plural(self.devices_per_node, "device")
        return f"{nodes} × {devices}, {network}"

    def legend(self, network: str) -> str:
        """``2 device(s)`` or ``2 device(s) on 2 nodes over 1gbe``: the static figures."""
        if self.nodes == 1:
            return devices_words(self.world_size)
        return f"{devices_words(self.world_size)} on {self.nodes} nodes over {network}"

    def bar_label(self, network: str) -> str:
        """``2 dev. on 1 node`` or ``2 dev. on 2 nodes (1gbe)``: the start-up bars."""
        where = "1 node" if self.nodes == 1 else f"{self.nodes} nodes ({network})"
        return f"{self.world_size} dev. on {where}"

    @property
    def grid(self) -> str:
        """``2x1``: nodes x devices per node, in a table's terse lines."""
        return f"{self.nodes}x{self.devices_per_node}"

    def short(self, network: str) -> str:
        """``2x1 over 1gbe`` or ``1x2``: the comparison's points."""
        return f"{self.grid}{self._over(network)}"

    def model_words(self) -> str:
        """``2 nodes x 1 device``: the communication model's remedy lines."""
        nodes, devices = plural(self.nodes, "node"), plural(self.devices_per_node, "device")
        return f"{nodes} x {devices}"

    def model_legend(self) -> str:
        """``2 node(s) x 1``: the communication model's throughput figure."""
        return f"{self.nodes} node(s) x {self.devices_per_node}"

    def counts(self) -> str:
        """``4 devices, 2 nodes`` (``8 devices, 1 node``): an imported log's legend entry."""
        return f"{plural(self.world_size, 'device')}, {plural(self.nodes, 'node')}"

    def id_part(self, batch_per_device: int, repeat: int) -> str:
        """``n2-d1-b64-r0``: the last part of a cell id (plan.cell.Cell.layout)."""
        return LAYOUT_ID.format(
            nodes=self.nodes, devices=self.devices_per_node, batch=batch_per_device, repeat=repeat
        )
