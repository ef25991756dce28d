"""Steps of torch-ddp with a communication remedy on two gloo ranks, for a numpy reference.

    python tests/helpers/comm_steps.py REMEDY STEPS    # torch environment; delayed, powersgd
                                                       # or powersgd-buckets (one per tensor)

Softmax regression (one dense layer, 16 inputs, 12 classes, with bias), the same initial
weights on both ranks, a different batch of 4 per rank, the synthetic cells' SGD
(plan.cell.SYNTHETIC_SGD) and torch-ddp's own hook registration (torch_remedies.RemedyHooks).
Prints JSON: the initial weights, each rank's batch, every rank's weights after the steps,
whether the remedy has work of its own to time (torch_remedies.remedy_work, then run by rank
0 alone), and, for PowerSGD, the random starting Q the hook draws (torch's generator, seeded
as the hook seeds it).
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from dpscale.frameworks.torch_ops import make_sgd
from dpscale.frameworks.torch_remedies import RemedyHooks, remedy_work
from dpscale.plan.cell import SYNTHETIC_SGD
from dpscale.plan.remedies import parse
from dpscale.runner.support import exit_without_finalization

WORLD, BATCH, INPUTS, CLASSES, RANK = 2, 4, 16, 12, 2
# a bucket cap below the bias' 48 bytes: the kernel and the bias each get a bucket of their own
REMEDIES = {
    "delayed": "delayed",
    "delayed-fp16": "delayed-fp16",
    "powersgd": {"name": "powersgd", "rank": RANK},
    "powersgd-buckets": {"name": "powersgd", "rank": RANK, "bucket_mb": 1e-5},
}
rng = np.random.default_rng(11)
KERNEL = rng.normal(0, 0.3, (CLASSES, INPUTS)).astype(np.float32)
BIAS = rng.normal(0, 0.1, CLASSES).astype(np.float32)
X = rng.normal(0, 1, (WORLD, BATCH, INPUTS)).astype(np.float32)
Y = rng.integers(0, CLASSES, (WORLD, BATCH))


def rank_main(rank: int, remedy: str, steps: int, port: int, out: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    torch.set_num_threads(1)
    layer = torch.nn.Linear(INPUTS, CLASSES)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(KERNEL))
        layer.bias.copy_(torch.from_numpy(BIAS))
    comm = parse(REMEDIES[remedy])
    bucket_mb = comm.bucket_mb or 25.0
    model = DistributedDataParallel(layer, bucket_cap_mb=bucket_mb)
    hooks = RemedyHooks(comm)
    hooks.register(model)
    optimizer = make_sgd(model.parameters(), SYNTHETIC_SGD)
    x, y = torch.from_numpy(X[rank]), torch.from_numpy(Y[rank])
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    hooks.flush()
    # the remedy's own work, as a collectives cell times it: every rank makes the groups,
    # then rank 0 alone runs it (were anything sent, rank 0 would wait for rank 1 forever)
    work = remedy_work(layer, comm, torch.device("cpu"))
    if work is not None and rank == 0:
        for _ in range(4):  # PowerSGD compresses from its third step
            work()
    result = {
        "work": work is not None,
        "kernel": layer.weight.detach().numpy().tolist(),
        "bias": layer.bias.detach().tolist(),
        "comm": hooks.record()["comm"],
    }
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()
    exit_without_finalization()


def powersgd_start_q() -> list:
    """The hook's first Q: PowerSGDState's RandomState(0) seeds torch's generator."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(np.random.RandomState(0).randint(1_000_000_000))
        return torch.randn(1, INPUTS, RANK).numpy()[0].tolist()


def main() -> None:
    remedy, steps = sys.argv[1], int(sys.argv[2])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(rank_main, args=(remedy, steps, port, out), nprocs=WORLD)
        ranks = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(WORLD)]
    print(
        json.dumps(
            {
                "kernel": KERNEL.tolist(),
                "bias": BIAS.tolist(),
                "x": X.tolist(),
                "y": Y.tolist(),
                "ranks": ranks,
                "q0": powersgd_start_q(),
                "sgd": [SYNTHETIC_SGD.lr, SYNTHETIC_SGD.momentum, SYNTHETIC_SGD.weight_decay],
            }
        )
    )


if __name__ == "__main__":
    main()
