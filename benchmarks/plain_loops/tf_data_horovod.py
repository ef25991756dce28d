"""An image folder trained with Horovod the plain way: tf.data sharded per rank, a
``tf.function`` step with ``hvd.DistributedGradientTape`` (run under ``horovodrun --gloo``;
benchmarks/folder_race.py starts it against dpscale's horovod-tf folder cell).

    horovodrun -np 2 -H localhost:2 --gloo python benchmarks/plain_loops/tf_data_horovod.py \\
        --folder IMAGES --image-size 64 --batch 8 --workers 1 --prefetch 2

What a user writes, with dpscale's choices where the race needs them equal: the files listed
as torchvision's ImageFolder lists them (sorted class folders, sorted files), then
``from_tensor_slices -> shard(hvd.size(), hvd.rank()) -> shuffle -> repeat -> map(read,
decode, random resized crop, flip, normalise) -> batch(drop_remainder) -> prefetch``, with
dpscale.frameworks.tf_folder's constants (tests/unit/test_folder_race.py compares them) and
its loader rule: ``--workers`` >= 1 is the map's ``num_parallel_calls`` and ``prefetch
(workers x prefetch)``, 0 leaves both to AUTOTUNE. The model is dpscale's Keras ResNet
(dpscale.frameworks.keras_resnet, NHWC on the CPU) seeded as the cell seeds it; TensorFlow's
intra-op pool gets ``--threads`` threads and its inter-op pool one, as dpscale's runner sets
them; rank 0's weights and optimizer state are broadcast before the first step.

The update, ``--sgd``: ``fused`` (default) is dpscale's own fp32 SGD kernels
(dpscale.frameworks.tf_ops.FusedSGD), so the race compares input pipelines and harnesses on
the same arithmetic; ``keras`` is what a user would reach for, Keras' SGD with momentum and
the L2 decay added to the averaged gradients (the same maths, more passes over the weights:
docs/decisions/tf-fused-sgd.md).

Timing is dpscale's protocol (dpscale.runner.timing): ``--warmup-steps`` untimed steps, then
``--windows`` windows of ``--steps-per-window`` steps, each rank reading its own clock once
the window's last loss has reached the host, with no barrier. Rank 0 prints one line,
``RACE_RESULT {json}``: per-rank seconds, the timed span, and img/s as dpscale reports it
(the slowest rank's time per window, the mean over windows of global images per second).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # a CPU run, as dpscale's CPU cells

import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

from dpscale.frameworks.keras_resnet import build_keras_resnet, trainable_param_count  # noqa: E402
from dpscale.plan.resnet_spec import resnet_spec  # noqa: E402

# torchvision's ImageNet reference training: channel means and deviations, and
# RandomResizedCrop's share of the area, aspect ratio and tries
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
CROP_SCALE, CROP_RATIO, CROP_TRIES = (0.08, 1.0), (3 / 4, 4 / 3), 10
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


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
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=5e-5)
    parser.add_argument("--sgd", choices=["fused", "keras"], default="fused")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--steps-per-window", type=int, default=5)
    return parser.parse_args()


def list_images(root: str) -> tuple[list[str], list[int]]:
    """Every image file with its class index, as ImageFolder orders them."""
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    paths, labels = [], []
    for label, name in enumerate(classes):
        for folder, _, files in sorted(os.walk(os.path.join(root, name), followlinks=True)):
            for file in sorted(files):
                if file.lower().endswith(IMAGE_SUFFIXES):
                    paths.append(os.path.join(folder, file))
                    labels.append(label)
    return paths, labels


def load(path: tf.Tensor, label: tf.Tensor, size: int) -> tuple[tf.Tensor, tf.Tensor]:
    """A file to a normalised size x size x 3 image: RandomResizedCrop's rule, a flip."""
    image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
    begin, extent, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
        min_object_covered=0.0,
        aspect_ratio_range=CROP_RATIO,
        area_range=CROP_SCALE,
        max_attempts=CROP_TRIES,
        use_image_if_no_bounding_boxes=True,
    )
    image = tf.image.resize(tf.slice(image, begin, extent), (size, size), antialias=True)
    image = tf.image.random_flip_left_right(image)
    image = (image / 255.0 - tf.constant(MEAN)) / tf.constant(STD)
    return tf.ensure_shape(image, (size, size, 3)), label


def make_dataset(args: argparse.Namespace) -> tf.data.Dataset:
    paths, labels = list_images(args.folder)
    if args.workers:
        parallel, prefetched = args.workers, args.workers * args.prefetch
    else:
        parallel = prefetched = tf.data.AUTOTUNE
    shard = -(-(len(paths) - hvd.rank()) // hvd.size())  # the files this rank keeps
    return (
        tf.data.Dataset.from_tensor_slices((paths, tf.constant(labels, tf.int64)))
        .shard(hvd.size(), hvd.rank())
        .shuffle(shard, seed=args.seed + hvd.rank(), reshuffle_each_iteration=True)
        .repeat()
        .map(lambda p, y: load(p, y, args.image_size), num_parallel_calls=parallel)
        .batch(args.batch, drop_remainder=True)
        .prefetch(prefetched)
    )


def make_update(args: argparse.Namespace):
    """(optimizer, apply(grads, variables)): dpscale's fused kernels or Keras' SGD."""
    if args.sgd == "fused":
        from dpscale.frameworks.tf_ops import FusedSGD
        from dpscale.plan.cell import SGD

        fused = FusedSGD(SGD(lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay))
        return fused, fused.apply
    keras = tf.keras.optimizers.SGD(learning_rate=args.lr, momentum=args.momentum)

    def apply(grads: list[tf.Tensor], variables: list[tf.Variable]) -> None:
        decayed = [g + args.weight_decay * v for g, v in zip(grads, variables, strict=True)]
        keras.apply_gradients(zip(decayed, variables, strict=True))

    return keras, apply


def main() -> None:
    args = parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    hvd.init()

    tf.keras.utils.set_random_seed(args.seed)
    spec = resnet_spec(args.model, args.stem, args.image_size, args.classes)
    model = build_keras_resnet(spec, channels_last=True)
    optimizer, apply = make_update(args)
    optimizer.build(model.trainable_variables)
    hvd.broadcast_variables(model.variables, root_rank=0)
    hvd.broadcast_variables(optimizer.variables, root_rank=0)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    data = iter(make_dataset(args))

    @tf.function
    def train_step(images: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    last: list[tf.Tensor] = []

    def step() -> None:
        last[:] = [train_step(*next(data))]

    def sync() -> None:
        last[0].numpy()  # the last loss on the host: every step before it has finished

    for _ in range(args.warmup_steps):
        step()
    sync()
    seconds = []
    span_start = time.time()
    for _ in range(args.windows):
        start = time.perf_counter()
        for _ in range(args.steps_per_window):
            step()
        sync()
        seconds.append(time.perf_counter() - start)
    span = [span_start, time.time()]

    gathered = hvd.allgather_object({"seconds": seconds, "span": span})
    if hvd.rank() == 0:
        per_rank = [g["seconds"] for g in gathered]
        slowest = [max(window) for window in zip(*per_rank, strict=True)]
        images = args.steps_per_window * args.batch * hvd.size()
        result = {
            "framework": "tensorflow",
            "img_s": sum(images / s for s in slowest) / len(slowest),
            "per_rank_seconds": per_rank,
            "span": [min(g["span"][0] for g in gathered), max(g["span"][1] for g in gathered)],
            "trainable_params": trainable_param_count(model),
            "sgd": args.sgd,
        }
        print("RACE_RESULT " + json.dumps(result), flush=True)
    hvd.join()


if __name__ == "__main__":
    main()
