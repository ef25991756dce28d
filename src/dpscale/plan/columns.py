"""The column vocabulary every side shares: which columns of the tidy tables name what ran,
how its devices were laid out, and which cells one fit pools."""

from __future__ import annotations

# what ran
RUN = ["strategy", "model"]
# a layout as the answers name it (findings, start-up, cost): over which network, how many
# nodes, how many devices on each
LAYOUT = [*RUN, "network", "nodes", "devices_per_node", "world_size"]
# a layout in one mode: where a remedy's cells meet the same cells without one
MODE_LAYOUT = [*RUN, "mode", "nodes", "network", "devices_per_node", "world_size"]
# the cells one throughput law is fitted to (fits.csv, break_even.csv): a layout in one mode
# with one communication remedy
FIT_GROUP = [*RUN, "mode", "nodes", "network", "comm", "devices_per_node", "world_size"]
# one measured point of a fit group: its per-device batch
POINT = [*FIT_GROUP, "batch_per_device"]

# the machine a cell ran on (its hostname, result system.host): not a network
SYSTEM_HOST = "host"
