"""The strategies dpscale can measure: one adapter module each, one line each here.

An adapter (``dpscale/strategies/<name>.py``) declares its ``STRATEGY`` (framework,
environment, launch kind, skip rules) and runs the strategy's ranks; see
``dpscale/strategies/torch_dp.py`` for the smallest. The workflow and the launcher import
the adapters here without their frameworks (see plan.strategy.framework_imports).
"""

from __future__ import annotations

import importlib

from dpscale.plan.strategy import Strategy

ADAPTERS = (
    "dpscale.strategies.torch_dp",
    "dpscale.strategies.torch_ddp",
    "dpscale.strategies.horovod_tf",
    "dpscale.strategies.mxnet_device",
    "dpscale.strategies.mxnet_dist",
)

STRATEGIES: dict[str, Strategy] = {
    adapter.STRATEGY.name: adapter.STRATEGY
    for adapter in (importlib.import_module(module) for module in ADAPTERS)
}


def strategy(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"strategies: {name!r} is not one of {sorted(STRATEGIES)}")
    return STRATEGIES[name]
