"""The torch-dp training step written bare: no harness, no windows, one clock pair.

Run with a torch environment's python; prints images/s. Used by harness_overhead.py.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from dpscale.frameworks.torch_resnet import build_torch_resnet
from dpscale.plan.resnet_spec import resnet_spec


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--stem", default="imagenet")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=25)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build_torch_resnet(resnet_spec(args.model, args.stem, args.image_size, args.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    loss_fn = nn.CrossEntropyLoss()
    images = torch.randn(args.batch, 3, args.image_size, args.image_size)
    labels = torch.randint(0, args.classes, (args.batch,))
    model.train()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images), labels).backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    elapsed = time.perf_counter() - start
    print(f"{args.batch * args.steps / elapsed:.3f}")


if __name__ == "__main__":
    main()
