"""torch-ddp's bucket timeline on one gloo rank, as run_cell records it.

    python tests/helpers/bucket_timeline.py STEPS    # torch environment

A small convolutional network wrapped in DDP on a one-process gloo group, with a bucket cap
that gives it three gradient buckets; DistributedTorchRank's synthetic step once (DDP
rebuilds its buckets after the first step), then its bucket timeline of STEPS steps, twice.
Prints JSON: both timelines, the trainable parameters, and the post-accumulate-grad hooks
left on the parameters after the timelines and after a timeline whose optimiser step raised.
"""

from __future__ import annotations

import json
import socket
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dpscale.frameworks import torch_timeline
from dpscale.frameworks.torch_ops import DistributedTorchRank, SyntheticStep
from dpscale.frameworks.torch_remedies import RemedyHooks
from dpscale.plan.cell import Cell, ModelConfig
from dpscale.plan.remedies import Comm
from dpscale.runner.rank import ModelCounts

# parameters in reverse order: 40 + 640 bytes (linear), 64 + 4608 (conv 2), 32 + 864 (conv 1):
# three buckets under a 524-byte cap
BUCKET_MB = 0.0005
CELL = Cell(
    "timeline",
    "torch-ddp",
    ModelConfig("resnet18", "cifar", 32, 10),
    "synthetic",
    1,
    1,
    4,
    comm=Comm(name="none", bucket_mb=BUCKET_MB),
)


def small_network() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


class BrokenOptimiser:
    """The step with an optimiser step that raises (the hooks must still be removed)."""

    def __init__(self, step: SyntheticStep) -> None:
        self.step = step

    def zero(self) -> None:
        self.step.zero()

    def forward(self) -> torch.Tensor:
        return self.step.forward()

    def backward(self, loss: torch.Tensor) -> None:
        self.step.backward(loss)

    def optimize(self) -> None:
        raise RuntimeError("the optimiser broke")


def hooks_left(model: nn.Module) -> int:
    return sum(len(p._post_accumulate_grad_hooks or {}) for p in model.parameters())


def main() -> None:
    steps = int(sys.argv[1])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    torch.set_num_threads(1)
    network = small_network()
    params = sum(p.numel() for p in network.parameters() if p.requires_grad)
    model = DistributedDataParallel(network, bucket_cap_mb=BUCKET_MB)
    remedy = RemedyHooks(CELL.comm)
    remedy.register(model)
    rank = DistributedTorchRank(CELL, model, torch.device("cpu"), ModelCounts(params), 1, remedy)
    step, _ = rank.synthetic_step()
    step()
    timelines = [rank.bucket_timeline(steps) for _ in range(2)]
    left = hooks_left(network)
    buckets = remedy.buckets(network)
    try:
        torch_timeline.record(BrokenOptimiser(step), buckets, 1, torch.device("cpu"), BUCKET_MB)
        raised = False
    except RuntimeError:
        raised = True
    dist.destroy_process_group()
    found = {
        "timelines": timelines,
        "trainable_params": params,
        "hooks_left": left,
        "raised": raised,
        "hooks_left_after_raise": hooks_left(network),
    }
    print(json.dumps(found))


if __name__ == "__main__":
    main()
