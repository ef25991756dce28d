"""An image folder trained with DDP the plain way: torchvision's ImageFolder, a DataLoader
with a DistributedSampler, DistributedDataParallel on gloo, SGD (run under torchrun;
benchmarks/folder_race.py starts it against dpscale's torch-ddp folder cell).

    torchrun --standalone --nproc_per_node=2 benchmarks/plain_loops/torch_imagefolder_ddp.py \\
        --folder IMAGES --image-size 64 --batch 8 --workers 1 --prefetch 2

What a user writes, with dpscale's choices where the race needs them equal: the transforms
of torchvision's ImageNet reference training (RandomResizedCrop, flip, ToTensor, Normalize,
the same constants as dpscale.frameworks.torch_folder; tests/unit/test_folder_race.py
compares them), the DataLoader's workers, prefetch, pin_memory and persistent_workers, a
shuffled DistributedSampler dropping the last partial batch, dpscale's ResNet builder
(dpscale.frameworks.torch_resnet: the same network and parameter count as the cell's)
seeded as the cell seeds it, torch's SGD with the cell's momentum and L2 decay, and
``torch.set_num_threads(--threads)``. No skipping of undecodable files, no watchdog, no
result file.

Timing is dpscale's protocol (dpscale.runner.timing): ``--warmup-steps`` untimed steps, then
``--windows`` windows of ``--steps-per-window`` steps, each rank reading its own clock with
no barrier (DDP's all-reduce keeps the ranks in step; on the CPU a returned step has
finished, so there is nothing to synchronise). Rank 0 gathers every rank's window seconds
and prints one line, ``RACE_RESULT {json}``: per-rank seconds, the timed span, and img/s as
dpscale reports it (the slowest rank's time per window, the mean over windows of global
images per second).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from dpscale.frameworks.torch_resnet import build_torch_resnet, trainable_param_count
from dpscale.frameworks.torchvision_import import import_torchvision
from dpscale.plan.resnet_spec import resnet_spec

# torchvision's ImageNet reference training: channel means and deviations, and
# RandomResizedCrop's share of the area and aspect ratio (its defaults)
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
CROP_SCALE, CROP_RATIO = (0.08, 1.0), (3 / 4, 4 / 3)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", required=True, help="one sub-folder of images per class")
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--stem", default="imagenet")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="per rank")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--prefetch", type=int, default=2)
    parser.add_argument("--pin-memory", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--persistent-workers", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=5e-5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--steps-per-window", type=int, default=5)
    return parser.parse_args()


def make_loader(args: argparse.Namespace) -> tuple[DataLoader, DistributedSampler]:
    torchvision, _ = import_torchvision()
    t = torchvision.transforms
    transform = t.Compose(
        [
            t.RandomResizedCrop(args.image_size, scale=CROP_SCALE, ratio=CROP_RATIO),
            t.RandomHorizontalFlip(),
            t.ToTensor(),
            t.Normalize(MEAN, STD),
        ]
    )
    dataset = torchvision.datasets.ImageFolder(args.folder, transform=transform)
    sampler = DistributedSampler(dataset, shuffle=True, seed=args.seed, drop_last=True)
    workers = {}
    if args.workers:  # DataLoader refuses these without worker processes
        workers = {"prefetch_factor": args.prefetch, "persistent_workers": args.persistent_workers}
    loader = DataLoader(
        dataset,
        batch_size=args.batch,
        sampler=sampler,
        num_workers=args.workers,
        pin_memory=args.pin_memory,
        drop_last=True,
        **workers,
    )
    return loader, sampler


def batches(loader: DataLoader, sampler: DistributedSampler) -> Iterator:
    """The loader's batches, epoch after epoch."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(args.seed)
    model = build_torch_resnet(resnet_spec(args.model, args.stem, args.image_size, args.classes))
    params = trainable_param_count(model)
    model = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay
    )
    loss_fn = nn.CrossEntropyLoss()
    loader, sampler = make_loader(args)
    images = len(loader.dataset)
    data = batches(loader, sampler)
    model.train()

    def step() -> None:
        images, labels = next(data)
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images), labels).backward()
        optimizer.step()

    for _ in range(args.warmup_steps):
        step()
    seconds = []
    span_start = time.time()
    for _ in range(args.windows):
        start = time.perf_counter()
        for _ in range(args.steps_per_window):
            step()
        seconds.append(time.perf_counter() - start)
    span = [span_start, time.time()]

    gathered: list = [None] * world
    dist.all_gather_object(gathered, {"seconds": seconds, "span": span})
    if rank == 0:
        per_rank = [g["seconds"] for g in gathered]
        slowest = [max(window) for window in zip(*per_rank, strict=True)]
        per_window = args.steps_per_window * args.batch * world
        result = {
            "framework": "torch",
            "img_s": sum(per_window / s for s in slowest) / len(slowest),
            "per_rank_seconds": per_rank,
            "span": [min(g["span"][0] for g in gathered), max(g["span"][1] for g in gathered)],
            "trainable_params": params,
            "images": images,
        }
        print("RACE_RESULT " + json.dumps(result), flush=True)
    dist.barrier()  # no rank tears gloo down while another still reads the gathered times
    dist.destroy_process_group()
    data.close()  # dropping the last references to the loader shuts its workers down
    data = loader = sampler = None
    # gloo's worker thread can abort Python's finalization (docs/decisions/gloo-exit.md)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
