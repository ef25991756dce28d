"""The nearest MXNet equivalent of Horovod's synthetic benchmark: a plain Gluon loop over a
``dist_sync`` kvstore (parameter servers), dpscale's ResNet (run under
dpscale.launch.starters.mxnet_ps, which starts the scheduler and servers as this same script:
they serve inside ``import mxnet`` and never reach the loop; benchmarks/race_reference.py
starts it).

Protocol as in Horovod's examples: random images and labels created once,
``gluon.Trainer(..., 'sgd', {'learning_rate': 0.01}, kvstore='dist_sync')``, a step of
forward and loss under ``autograd.record``, ``backward`` and ``trainer.step(batch)``;
``--num-warmup-batches`` warm-up batches, then ``--num-iters`` timeit iterations of
``--num-batches-per-iter`` batches. MXNet's engine is asynchronous, so each timed call
ends with ``mx.nd.waitall()`` (Horovod's PyTorch and TensorFlow steps return when their
work is done on a CPU). The model is ``dpscale.frameworks.gluon_resnet``, hybridized; every
worker prints its iteration times as a ``RACE_RANK`` JSON line.
"""

import argparse
import json
import time
import timeit

import mxnet as mx
from mxnet import autograd, gluon

from dpscale.frameworks.gluon_resnet import build_gluon_resnet
from dpscale.plan.resnet_spec import resnet_spec

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--image-size", type=int, default=64)
parser.add_argument("--classes", type=int, default=10)
parser.add_argument("--num-warmup-batches", type=int, default=10)
parser.add_argument("--num-batches-per-iter", type=int, default=10)
parser.add_argument("--num-iters", type=int, default=10)
# race_reference.py --reference-optimizer dpscale: the runners' SGD (momentum, L2 decay)
parser.add_argument("--momentum", type=float, default=0.0)
parser.add_argument("--weight-decay", type=float, default=0.0)
args = parser.parse_args()

kv = mx.kv.create("dist_sync")
net = build_gluon_resnet(resnet_spec("resnet18", "imagenet", args.image_size, args.classes))
net.initialize(mx.init.Xavier())
net.hybridize(static_alloc=True, static_shape=True)
sgd = {"learning_rate": 0.01, "momentum": args.momentum, "wd": args.weight_decay}
trainer = gluon.Trainer(net.collect_params(), "sgd", sgd, kvstore=kv)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
size = args.image_size
data = mx.nd.random.uniform(shape=(args.batch_size, 3, size, size))
label = mx.nd.random.randint(0, args.classes, shape=(args.batch_size,)).astype("float32")


def benchmark_step():
    with autograd.record():
        loss = loss_fn(net(data), label)
    loss.backward()
    trainer.step(args.batch_size)


def batches(number):
    for _ in range(number):
        benchmark_step()
    mx.nd.waitall()


timeit.timeit(lambda: batches(args.num_warmup_batches), number=1)
seconds = []
start = time.time()
for _ in range(args.num_iters):
    seconds.append(timeit.timeit(lambda: batches(args.num_batches_per_iter), number=1))
span = [start, time.time()]
print("RACE_RANK " + json.dumps({"rank": kv.rank, "seconds": seconds, "span": span}), flush=True)
kv._barrier()
