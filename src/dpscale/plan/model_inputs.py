"""What the communication model reads of a checked config, parsed here once: JSON for the
workflow's ``comm_model`` rule, read back by plan.link.links_of and plan.traffic.traffic_of."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from dpscale.plan import traffic
from dpscale.plan.cell import Network
from dpscale.plan.link import Link, predicted_links
from dpscale.plan.strategy import Strategy


def configured_links(networks: Sequence[Any]) -> list[Link]:
    """A checked config's ``networks`` as links, before any fit: the machine's own (host),
    an emulated one (its rate and delay), or a real interconnect (unknown: fitted); each the
    link its cells' Network gives the emulation (plan.cell.Network.link)."""
    return [Network.from_config(entry).link for entry in networks]


def model_inputs(config: Mapping[str, Any], strategies: Mapping[str, Strategy]) -> dict[str, Any]:
    """What the communication model reads of a checked config, links parsed here once and
    each configured strategy's traffic with its count from the config (plan.traffic):
    JSON for the workflow's ``comm_model`` rule (read back by plan.link.links_of
    and plan.traffic.traffic_of)."""
    predict = dict(config.get("predict") or {})
    predict["networks"] = [asdict(link) for link in predicted_links(predict)]
    return {
        "traffic": {
            name: traffic.resolved(strategies[name].declared_traffic(), config).to_dict()
            for name in config["strategies"]
        },
        "links": [asdict(link) for link in configured_links(config["networks"])],
        "predict": predict,
        "devices_per_node": list(config["devices_per_node"]),
        "batch_sizes": list(config["batch_sizes"]),
    }
