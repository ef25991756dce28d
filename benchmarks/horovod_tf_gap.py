"""What makes horovod-tf's step slower than Horovod's TF2 synthetic benchmark step?

    .venv/bin/python benchmarks/horovod_tf_gap.py [--ranks 2] [--rounds 8] [--variants ...]

One horovodrun job (1 thread per rank, inter-op 1, as the runner) builds one model per
variant (same seed, dpscale's ResNet-18, imagenet stem, 64 px, batch 16 per rank), warms
each up, then times them interleaved: in every round each variant runs 10 batches, in an
order that rotates from round to round, so a drift of the machine hits all alike. Each rank
times its own batches; the script prints, per variant, global img/s (slowest rank per
round, mean over rounds) and its ratio to the reference step (median of per-round ratios).

Variants differ from the runner's step (dpscale.frameworks.tf_ops.make_train_step) in one
thing each, or from the reference step (Horovod's benchmark_step) in one thing each:

- runner: the runner's own make_train_step and optimizer (control);
- mirror: this script's copy of it (checks that the copy is faithful);
- plain_sgd / momentum: the runner's step with SGD(0.01) / SGD(0.01, momentum 0.9), no decay;
- l2_grad: momentum 0.9 and weight decay added to the gradients (torch's L2), not Keras'
  decoupled ``weight_decay=``;
- autograph: ``@tf.function`` instead of ``@tf.function(jit_compile=False)``;
- reference: Horovod's step (SGD(0.01), softmax + sparse categorical cross-entropy of
  probabilities, labels of shape (batch, 1), uniform images, broadcast after batch 1);
- reference_runner_opt: the reference step with the runner's optimizer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import page
from dpscale.launch.setup.envs import env_prefix
from dpscale.plan.cell import Cell, Measure, ModelConfig
from dpscale.plan.paths import SRC_DIR
from gap_job import run_gap_job

MODEL = ModelConfig("resnet18", "imagenet", 64, 10)
VARIANTS = [
    "reference",
    "runner",
    "mirror",
    "plain_sgd",
    "momentum",
    "l2_grad",
    "autograph",
    "reference_runner_opt",
]


def optimizer_for(name: str, tf):
    if name in ("plain_sgd", "reference"):
        return tf.keras.optimizers.SGD(learning_rate=0.01)
    if name in ("momentum", "l2_grad"):
        return tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    return tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.9, weight_decay=5e-5)


def runner_like_step(name: str, cell: Cell, tf, hvd, tf_ops, ht):
    """The runner's step with one change (see the module docstring)."""
    model, _ = tf_ops.build_model(cell)
    optimizer = optimizer_for(name, tf)
    ht.broadcast_initial_state(model, optimizer)
    images, labels = tf_ops.synthetic_batch(cell, cell.batch_per_device)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    l2 = 5e-5 if name == "l2_grad" else 0.0

    def train_step():
        with tf.GradientTape() as tape:
            logits = tf.cast(model(images, training=True), tf.float32)
            loss = loss_fn(labels, logits)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        if l2:
            grads = [g + l2 * v for g, v in zip(grads, model.trainable_variables, strict=True)]
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    compiled = tf.function(train_step) if name == "autograph" else None
    compiled = compiled or tf.function(train_step, jit_compile=False)
    last = []

    def step():
        last[:] = [compiled()]

    def sync():
        last[0].numpy()

    return step, sync


def reference_step(name: str, cell: Cell, tf, hvd, tf_ops):
    """Horovod's benchmark_step on dpscale's model (optionally the runner's optimizer)."""
    model, _ = tf_ops.build_model(cell)
    optimizer = optimizer_for("reference" if name == "reference" else "runner", tf)
    size, batch = cell.model.image_size, cell.batch_per_device
    data = tf.random.uniform([batch, size, size, 3])
    target = tf.random.uniform([batch, 1], minval=0, maxval=cell.model.classes, dtype=tf.int64)

    @tf.function
    def benchmark_step(first_batch):
        with tf.GradientTape() as tape:
            probs = tf.nn.softmax(model(data, training=True))
            loss = tf.losses.sparse_categorical_crossentropy(target, probs)
        tape = hvd.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables, root_rank=0)

    benchmark_step(first_batch=True)
    return (lambda: benchmark_step(first_batch=False)), (lambda: None)


def worker(cell: Cell, variants: list[str], rounds: int, batches: int, warmup: int) -> None:
    """Runs under horovodrun in the tf-horovod environment."""
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from dpscale.frameworks import tf_ops
    from dpscale.strategies import horovod_tf as ht

    tf_ops.configure_threads(cell)
    hvd.init()
    tf_ops.pin_device(cell, hvd.local_rank())
    steps = {}
    for name in variants:
        if name == "runner":
            model, _ = tf_ops.build_model(cell)
            optimizer = tf_ops.make_sgd(cell)
            ht.broadcast_initial_state(model, optimizer)
            tape = hvd.DistributedGradientTape
            steps[name] = tf_ops.make_train_step(
                cell, model, optimizer, cell.batch_per_device, tape
            )
        elif name.startswith("reference"):
            steps[name] = reference_step(name, cell, tf, hvd, tf_ops)
        else:
            steps[name] = runner_like_step(name, cell, tf, hvd, tf_ops, ht)
    for step, sync in steps.values():
        for _ in range(warmup):
            step()
        sync()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds):
        order = variants[round_ % len(variants) :] + variants[: round_ % len(variants)]
        for name in order:
            step, sync = steps[name]
            start = time.perf_counter()
            for _ in range(batches):
                step()
            sync()
            seconds[name].append(time.perf_counter() - start)
    gathered = hvd.allgather_object(seconds)
    if hvd.rank() == 0:
        print("GAP_RESULT " + json.dumps(gathered), flush=True)


def gap_rows(
    per_rank: list[dict[str, list[float]]], images_per_round: int
) -> list[tuple[str, float, float, float, float]]:
    """Per variant: global img/s (slowest rank per round, mean over rounds) and its ratio to
    the reference (median of per-round ratios), then the same from rank 0's times x ranks."""
    ranks = len(per_rank)
    names = list(per_rank[0])

    def slowest(name: str) -> list[float]:
        return [
            ranks * images_per_round / max(w)
            for w in zip(*(r[name] for r in per_rank), strict=True)
        ]

    def rank0(name: str) -> list[float]:
        return [ranks * images_per_round / s for s in per_rank[0][name]]

    ref_slow, ref_rank0 = slowest("reference"), rank0("reference")
    rows = []
    for name in names:
        slow, first = slowest(name), rank0(name)
        ratio = statistics.median(a / b for a, b in zip(slow, ref_slow, strict=True))
        ratio0 = statistics.median(a / b for a, b in zip(first, ref_rank0, strict=True))
        rows.append((name, statistics.fmean(slow), ratio, statistics.fmean(first), ratio0))
    return rows


def report(rows: list[tuple[str, float, float, float, float]]) -> None:
    print(f"{'variant':22s} {'img/s':>8s} {'/ref':>6s}   {'rank0 x N':>9s} {'/ref':>6s}")
    for name, slow, ratio, first, ratio0 in rows:
        print(f"{name:22s} {slow:8.2f} {ratio:6.3f}   {first:9.2f} {ratio0:6.3f}")


def page_table(rows: list[tuple[str, float, float, float, float]]) -> str:
    header = ["variant", "img/s", "/ reference", "rank 0 x N img/s", "/ reference (rank 0)"]
    shown = [
        (name, f"{slow:.2f}", f"{ratio:.3f}", f"{first:.2f}", f"{ratio0:.3f}")
        for name, slow, ratio, first, ratio0 in rows
    ]
    return page.table(header, shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    parser.add_argument("--env-dir", default=".envs")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    page.add_page_option(parser)
    args = parser.parse_args()
    measure = Measure(args.warmup, args.rounds, args.batches)
    cell = Cell("gap", "horovod-tf", MODEL, "synthetic", 1, args.ranks, args.batch, measure=measure)
    if args.worker:
        worker(cell, args.variants, args.rounds, args.batches, args.warmup)
        return
    run = page.describe_run()
    prefix = env_prefix("tf-horovod", args.env_dir)
    python = str(prefix / "bin" / "python")
    env = dict(os.environ, PYTHONPATH=str(SRC_DIR), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env['PATH']}"
    command = [str(prefix / "bin" / "horovodrun"), "-np", str(args.ranks), "-H"]
    command += [f"localhost:{args.ranks}", "--gloo", python, str(Path(__file__).resolve())]
    command += ["--worker", *sys.argv[1:]]
    per_rank, load = run_gap_job(command, env, args.ranks, "horovodrun")
    rows = gap_rows(per_rank, args.batches * args.batch)
    report(rows)
    caption = (
        f"{args.ranks} ranks, batch {args.batch} per rank, {args.rounds} rounds of "
        f"{args.batches} batches; img/s: global, slowest rank per round, mean over rounds; "
        "rank 0 x N: rank 0's img/s x ranks (the reference's convention); / reference: "
        "median of the per-round ratios."
    )
    tables = [caption, page_table(rows)]
    page.print_page("horovod-tf step against the reference step", tables, run, load, args.page)


if __name__ == "__main__":
    main()
