"""horovod-tf's training path: Keras ``fit`` against the runner's custom tf.function loop.

    .venv/bin/python benchmarks/keras_fit_vs_loop.py [--rounds 2] [--batch 16] [--devices 2]

Same cell for both (resnet18, imagenet stem, 64 px, 10 classes, CPU), each run as its own
horovodrun job, alternating, while holding the benchmark lock. The loop is the runner's
(dpscale.strategies.horovod_tf) timed by the core protocol; fit gets hvd.DistributedOptimizer
and the broadcast callback, its epochs are the windows (fit reads the logs back to the host
before on_epoch_end, which synchronises), and its first epoch is the warm-up. Prints global
img/s (mean and 95% CI over windows, slowest rank per window) per round and path.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import page
from dpscale.plan.cell import Cell, Measure, ModelConfig

MODEL = ModelConfig("resnet18", "imagenet", 64, 10)


def worker(path: str, cell: Cell) -> None:
    """Runs under horovodrun in the tf-horovod environment."""
    import horovod.tensorflow as hvd
    import horovod.tensorflow.keras as hvd_keras
    import tensorflow as tf

    from dpscale.frameworks import tf_ops
    from dpscale.runner.timing import slowest_rank, throughput_measurement, time_windows
    from dpscale.strategies import horovod_tf as ht

    tf_ops.configure_threads(cell)
    hvd.init()
    tf_ops.pin_device(cell, hvd.local_rank())
    model, _ = tf_ops.build_model(cell)
    m = cell.measure
    if path == "loop":
        optimizer = tf_ops.make_sgd(cell)
        ht.broadcast_initial_state(model, optimizer)
        tape = hvd.DistributedGradientTape
        step, sync = tf_ops.make_train_step(cell, model, optimizer, cell.batch_per_device, tape)
        windows = time_windows(step, sync, m.warmup_steps, m.windows, m.steps_per_window)
    else:
        optimizer = hvd_keras.DistributedOptimizer(
            tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.9, weight_decay=5e-5)
        )
        model.compile(
            optimizer=optimizer,
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=False,
        )
        images, labels = tf_ops.synthetic_batch(cell, cell.batch_per_device)
        data = tf.data.Dataset.from_tensors((images, labels)).repeat()
        epoch_seconds: list[float] = []

        class Timer(tf.keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.start = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                epoch_seconds.append(time.perf_counter() - self.start)

        model.fit(
            data,
            steps_per_epoch=m.steps_per_window,
            epochs=1 + m.windows,
            callbacks=[hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0), Timer()],
            verbose=0,
        )
        windows = epoch_seconds[1:]
    gathered = hvd.allgather_object(windows)
    if hvd.rank() == 0:
        measurement = throughput_measurement(
            slowest_rank(gathered), m.steps_per_window, cell.batch_per_device, cell.world_size
        )
        print("RESULT " + json.dumps(measurement["summary"]["img_s"]), flush=True)


def run_path(path: str, cell: Cell, prefix: Path, scratch: Path) -> dict:
    from dpscale.launch.launcher import runner_env

    cell_file = scratch / "cell.json"
    cell_file.write_text(cell.to_json())
    n = cell.devices_per_node
    command = [
        str(prefix / "bin" / "horovodrun"),
        *("-np", str(n), "-H", f"localhost:{n}", "--gloo"),
        str(prefix / "bin" / "python"),
        str(Path(__file__).resolve()),
        *("--worker", path, "--cell-file", str(cell_file)),
    ]
    run = subprocess.run(
        command, env=runner_env(cell, prefix), capture_output=True, text=True, timeout=1800
    )
    lines = [line for line in run.stdout.splitlines() if "RESULT " in line]
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"{path} failed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
    return json.loads(lines[-1].split("RESULT ", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--steps-per-window", type=int, default=5)
    parser.add_argument("--env-dir", default=".envs")
    parser.add_argument("--worker", choices=["loop", "fit"], help=argparse.SUPPRESS)
    parser.add_argument("--cell-file", type=Path, help=argparse.SUPPRESS)
    page.add_page_option(parser)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Cell.from_json(args.cell_file.read_text()))
        return

    from dpscale.launch.setup.envs import build_env, env_prefix
    from dpscale.launch.supervise import bench_lock

    run = page.describe_run()
    rows = []
    measure = Measure(args.warmup, args.windows, args.steps_per_window, timeout_s=1800)
    cell = Cell("bench", "horovod-tf", MODEL, "synthetic", 1, args.devices, args.batch)
    cell = Cell(**{**cell.__dict__, "measure": measure})
    prefix = env_prefix("tf-horovod", args.env_dir)
    build_env("tf-horovod", prefix)
    with tempfile.TemporaryDirectory() as scratch, bench_lock(cell, sys.stderr):
        for round_ in range(args.rounds):
            for path in ("fit", "loop"):
                img_s = run_path(path, cell, prefix, Path(scratch))
                print(
                    f"round {round_ + 1} {path:4s}: {img_s['mean']:.2f} +/- {img_s['ci95']:.2f} "
                    f"img/s (95% CI, {img_s['n']} windows)",
                    flush=True,
                )
                shown = f"{img_s['mean']:.2f} ± {img_s['ci95']:.2f}"
                rows.append((round_ + 1, path, shown, img_s["n"]))
    caption = (
        f"horovod-tf, {args.devices} ranks, batch {args.batch} per rank; img/s: global, slowest "
        f"rank per window, mean ± 95% CI over {args.windows} windows of {args.steps_per_window} "
        "steps (fit: epochs after the first)."
    )
    table = page.table(["round", "path", "img/s", "windows"], rows)
    page.print_page(
        "Keras fit against the runner's loop (horovod-tf)", [caption, table], run, path=args.page
    )


if __name__ == "__main__":
    main()
