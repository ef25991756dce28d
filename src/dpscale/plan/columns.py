"""The column vocabulary every side shares: which columns of the tidy tables name what ran,
how its devices were laid out, and which cells one fit pools. Groups keep the column order
the tables always had (their CSVs and sort orders depend on it)."""

from __future__ import annotations

# one column each: the layout's parts
NETWORK = "network"
NODES = "nodes"
DEVICES_PER_NODE = "devices_per_node"
WORLD_SIZE = "world_size"

# what ran
RUN = ["strategy", "model"]
# how the devices spread: nodes, devices on each, all of them
SPREAD = [NODES, DEVICES_PER_NODE, WORLD_SIZE]
# a layout as the answers name it (findings, start-up, cost): over which network, how many
# nodes, how many devices on each
LAYOUT = [*RUN, NETWORK, *SPREAD]
# the spread with its network after the nodes: the order of the fit and model tables
PLACEMENT = [NODES, NETWORK, DEVICES_PER_NODE, WORLD_SIZE]
# a layout in one mode: where a remedy's cells meet the same cells without one
MODE_LAYOUT = [*RUN, "mode", *PLACEMENT]
# the cells one throughput law is fitted to (fits.csv, break_even.csv): a layout in one mode
# with one communication remedy
FIT_GROUP = [*RUN, "mode", NODES, NETWORK, "comm", DEVICES_PER_NODE, WORLD_SIZE]
# one measured point of a fit group: its per-device batch
POINT = [*FIT_GROUP, "batch_per_device"]

# the machine a cell ran on (its hostname, result system.host): not a network
SYSTEM_HOST = "host"
