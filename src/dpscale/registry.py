"""The strategies dpscale can measure. Adding one is a runner module plus one line here.

This module imports no framework: the workflow and the launcher read it from the analysis
environment, and each runner runs inside its own framework environment (``envs/<env>.txt``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Strategy:
    name: str
    framework: str
    env: str  # envs/<env>.txt
    runner: str  # module run as ``python -m <runner>``
    launcher: str  # how processes are started: see dpscale.launchers.LAUNCHERS
    one_process: bool  # all of a node's devices are driven by one process
    multi_node: bool

    def static_skip_reason(self, accelerator: str, nodes: int, devices_per_node: int) -> str | None:
        if nodes > 1 and not self.multi_node:
            return f"{self.name} runs in one process on one node; it cannot span {nodes} nodes"
        if accelerator == "cpu" and self.one_process and devices_per_node > 1:
            return (
                f"{self.name} drives several devices from one process; on CPU there is one "
                "device per process, so only devices_per_node=1 is meaningful"
            )
        return None


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy("torch-dp", "torch", "torch", "dpscale.runners.torch_dp", "single", True, False),
        Strategy(
            "torch-ddp", "torch", "torch", "dpscale.runners.torch_ddp", "torchrun", False, True
        ),
        Strategy(
            "horovod-tf",
            "tensorflow",
            "tf-horovod",
            "dpscale.runners.horovod_tf",
            "horovodrun",
            False,
            True,
        ),
        Strategy(
            "mxnet-device", "mxnet", "mxnet", "dpscale.runners.mxnet_device", "single", True, False
        ),
        Strategy(
            "mxnet-dist", "mxnet", "mxnet", "dpscale.runners.mxnet_dist", "mxnet-dist", False, True
        ),
    )
}


def strategy(name: str) -> Strategy:
    if name not in STRATEGIES:
        raise ValueError(f"strategies: {name!r} is not one of {sorted(STRATEGIES)}")
    return STRATEGIES[name]
