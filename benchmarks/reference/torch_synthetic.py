"""Horovod's PyTorch synthetic benchmark protocol with torch.distributed DDP in place of
Horovod (Horovod here is built without torch), dpscale's ResNet in place of torchvision's
(run under torchrun; benchmarks/race_reference.py starts it).

Follows horovod/horovod examples/pytorch/pytorch_synthetic_benchmark.py: fixed
``torch.randn`` images and random labels, ``optim.SGD(lr=0.01 x world size)``, a step of
``zero_grad``, forward, ``F.cross_entropy``, ``backward``, ``step``; ``--num-warmup-batches``
warm-up batches, then ``--num-iters`` timeit iterations of ``--num-batches-per-iter``
batches. Differences: DDP (gloo) averages the gradients instead of
``hvd.DistributedOptimizer``, and rank 0's parameters reach the others through DDP's
constructor instead of ``hvd.broadcast_parameters``; the model is
``dpscale.frameworks.torch_resnet`` with plain batch norm (the reference asks for
``hvd.SyncBatchNorm``, a GPU feature); ``torch.set_num_threads(--threads)``, as dpscale's
runner does; every rank's iteration times are gathered and printed as one ``RACE_RESULT``
JSON line.
"""

import argparse
import json
import time
import timeit

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel

from dpscale.frameworks.torch_resnet import build_torch_resnet
from dpscale.plan.resnet_spec import resnet_spec
from dpscale.runner.support import exit_without_finalization

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--image-size", type=int, default=64)
parser.add_argument("--classes", type=int, default=10)
parser.add_argument("--num-warmup-batches", type=int, default=10)
parser.add_argument("--num-batches-per-iter", type=int, default=10)
parser.add_argument("--num-iters", type=int, default=10)
parser.add_argument("--threads", type=int, default=1)
# race_reference.py --reference-optimizer dpscale: the runners' SGD (momentum, L2 decay)
parser.add_argument("--momentum", type=float, default=0.0)
parser.add_argument("--weight-decay", type=float, default=0.0)
args = parser.parse_args()

torch.set_num_threads(args.threads)
dist.init_process_group("gloo")
model = build_torch_resnet(resnet_spec("resnet18", "imagenet", args.image_size, args.classes))
model = DistributedDataParallel(model)
optimizer = optim.SGD(
    model.parameters(),
    lr=0.01 * dist.get_world_size(),
    momentum=args.momentum,
    weight_decay=args.weight_decay,
)
data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
target = torch.LongTensor(args.batch_size).random_() % args.classes


def benchmark_step():
    optimizer.zero_grad()
    output = model(data)
    loss = F.cross_entropy(output, target)
    loss.backward()
    optimizer.step()


timeit.timeit(benchmark_step, number=args.num_warmup_batches)
seconds = []
start = time.time()
for _ in range(args.num_iters):
    seconds.append(timeit.timeit(benchmark_step, number=args.num_batches_per_iter))
span = [start, time.time()]

per_rank = [None] * dist.get_world_size()
dist.all_gather_object(per_rank, seconds)
if dist.get_rank() == 0:
    print("RACE_RESULT " + json.dumps({"per_rank_seconds": per_rank, "span": span}), flush=True)
dist.barrier()  # no rank tears gloo down while another still reads the gathered times
dist.destroy_process_group()
exit_without_finalization()
