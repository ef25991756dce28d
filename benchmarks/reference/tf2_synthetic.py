"""Horovod's TensorFlow 2 synthetic benchmark protocol, dpscale's ResNet in place of the
Keras application (run under horovodrun; benchmarks/race_reference.py starts it).

Follows horovod/horovod examples/tensorflow2/tensorflow2_synthetic_benchmark.py step for
step: ``tf.random.uniform`` images and labels created once, ``tf.optimizers.SGD(0.01)``,
a ``@tf.function`` step (``model(data, training=True)``, the sparse categorical
cross-entropy of the probabilities, ``hvd.DistributedGradientTape``, ``apply_gradients``)
that broadcasts rank 0's variables after its first batch; then one warm-up call and
``--num-warmup-batches`` more, and ``--num-iters`` timeit iterations of
``--num-batches-per-iter`` batches. Differences, all needed for the race: the model is
``dpscale.frameworks.keras_resnet`` (its logits pass through a softmax, as the application's
output layer does), TensorFlow's intra- and inter-op pools get ``--threads`` threads and 1,
as dpscale's runner sets them, and every rank's iteration times are gathered and printed as
one ``RACE_RESULT`` JSON line (the reference prints rank 0's img/s only).
"""

import argparse
import json
import os
import time
import timeit

os.environ["CUDA_VISIBLE_DEVICES"] = "-1"

import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

from dpscale.frameworks.keras_resnet import build_keras_resnet  # noqa: E402
from dpscale.plan.resnet_spec import resnet_spec  # noqa: E402

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

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
tf.config.threading.set_inter_op_parallelism_threads(1)
hvd.init()

model = build_keras_resnet(resnet_spec("resnet18", "imagenet", args.image_size, args.classes))
opt = tf.optimizers.SGD(0.01, momentum=args.momentum)
size = args.image_size
data = tf.random.uniform([args.batch_size, size, size, 3])
target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=args.classes, dtype=tf.int64)


@tf.function
def benchmark_step(first_batch):
    with tf.GradientTape() as tape:
        probs = tf.nn.softmax(model(data, training=True))
        loss = tf.losses.sparse_categorical_crossentropy(target, probs)
    tape = hvd.DistributedGradientTape(tape)
    gradients = tape.gradient(loss, model.trainable_variables)
    if args.weight_decay:  # L2, as torch and dpscale's runners
        gradients = [
            g + args.weight_decay * v
            for g, v in zip(gradients, model.trainable_variables, strict=True)
        ]
    opt.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables(), root_rank=0)


with tf.device("CPU"):
    benchmark_step(first_batch=True)
    timeit.timeit(lambda: benchmark_step(first_batch=False), number=args.num_warmup_batches)
    seconds = []
    start = time.time()
    for _ in range(args.num_iters):
        seconds.append(
            timeit.timeit(
                lambda: benchmark_step(first_batch=False), number=args.num_batches_per_iter
            )
        )
    span = [start, time.time()]

per_rank = hvd.allgather_object(seconds)
if hvd.rank() == 0:
    print("RACE_RESULT " + json.dumps({"per_rank_seconds": per_rank, "span": span}), flush=True)
