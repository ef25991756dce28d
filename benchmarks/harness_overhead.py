"""Does the harness cost throughput? Runner img/s over bare-loop img/s, same cell, alternating.

    .venv/bin/python benchmarks/harness_overhead.py [--rounds 5] [--batch 16]

Runs one torch-dp cell (1 device, CPU) through the real launcher and runner, and the same
model, batch, optimiser and threads in a bare loop (benchmarks/bare_torch_loop.py), in
alternation so that drifts of the machine hit both alike. Prints each pair and the ratio of
the medians (target: >= 0.98). Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

import page
from dpscale.launch.launcher import launch
from dpscale.launch.setup.envs import build_env, env_prefix
from dpscale.plan.cell import Cell, Measure, ModelConfig
from dpscale.plan.paths import REPO_ROOT, SRC_DIR

MODEL = ModelConfig("resnet18", "imagenet", 64, 10)


def runner_img_s(prefix: Path, batch: int, warmup: int, windows: int, steps: int) -> float:
    measure = Measure(warmup_steps=warmup, windows=windows, steps_per_window=steps, timeout_s=900)
    cell = Cell("bench", "torch-dp", MODEL, "synthetic", 1, 1, batch, measure=measure)
    with tempfile.TemporaryDirectory() as scratch:
        out = cell.result_path(scratch)
        status = launch(cell, out, prefix, Path(scratch) / "log")
        if status != "ok":
            raise RuntimeError(
                f"runner cell {status}: {(Path(scratch) / 'log').read_text()[-2000:]}"
            )
        result = json.loads(out.read_text())
    return result["measurement"]["summary"]["img_s"]["mean"]


def bare_img_s(prefix: Path, batch: int, warmup: int, steps: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(SRC_DIR), OMP_NUM_THREADS="1")
    command = [
        str(prefix / "bin" / "python"),
        str(REPO_ROOT / "benchmarks" / "bare_torch_loop.py"),
        f"--batch={batch}",
        f"--image-size={MODEL.image_size}",
        f"--warmup={warmup}",
        f"--steps={steps}",
    ]
    return float(
        subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    )


def page_table(runner: list[float], bare: list[float]) -> str:
    """One row per round, then the medians and their ratio."""
    rows = [
        (i + 1, f"{r:.2f}", f"{b:.2f}", "")
        for i, (r, b) in enumerate(zip(runner, bare, strict=True))
    ]
    median_r, median_b = statistics.median(runner), statistics.median(bare)
    rows.append(("median", f"{median_r:.2f}", f"{median_b:.2f}", f"{median_r / median_b:.3f}"))
    return page.table(["round", "runner img/s", "bare img/s", "runner / bare"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--steps-per-window", type=int, default=5)
    parser.add_argument("--env-dir", default=".envs")
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    prefix = env_prefix("torch", args.env_dir)
    build_env("torch", prefix)
    timed_steps = args.windows * args.steps_per_window
    runner, bare = [], []
    for round_ in range(args.rounds):
        runner.append(
            runner_img_s(prefix, args.batch, args.warmup, args.windows, args.steps_per_window)
        )
        bare.append(bare_img_s(prefix, args.batch, args.warmup, timed_steps))
        print(f"round {round_ + 1}: runner {runner[-1]:.2f} img/s, bare {bare[-1]:.2f} img/s")
    ratio = statistics.median(runner) / statistics.median(bare)
    print(f"runner/bare (medians over {args.rounds} rounds): {ratio:.3f}")
    caption = (
        f"torch-dp, 1 device, batch {args.batch}; runner: mean img/s over {args.windows} "
        f"windows of {args.steps_per_window} steps; bare: {timed_steps} steps, one clock pair."
    )
    page.print_page(
        "Harness overhead against a bare training loop",
        [caption, page_table(runner, bare)],
        run,
        path=args.page,
    )


if __name__ == "__main__":
    main()
