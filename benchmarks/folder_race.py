"""Race dpscale's folder cells against the plain loops a user would write, alternating.

    .venv/bin/python benchmarks/folder_race.py [--pairs 5] [--frameworks torch tf]
        [--out results/folder-race] [--env-dir .envs]

One image folder (``--classes`` class folders of ``--per-class`` random JPEG images of
``--pixels`` square, seeded) is read, per framework, by A = dpscale's folder cell run by the
launcher (torch-ddp: dpscale.frameworks.torch_folder; horovod-tf: tf_folder) and B = the
plain loop (benchmarks/plain_loops/: torchvision's ImageFolder + DataLoader +
DistributedSampler + DDP under torchrun; tf.data sharded per rank + Horovod under
``horovodrun --gloo``), with the same settings: ResNet-18 (imagenet stem) at 64 px, one node
of 2 devices, 8 images per device, 1 loader worker, prefetch 2, 1 thread per rank, the same
warm-up and timed windows (dpscale's Measure defaults unless given). Every setting the plain
loop gets is read from the cell (:func:`plain_args`).

Pairs alternate their order (A B, B A, ...), so a steady drift of the machine pushes half
the pairs up and half down. Each run's img/s is dpscale's convention for both sides: global
images per second of each window from its slowest rank, the mean over windows. Per
framework the script prints each pair's ratio dpscale / plain, then the median ratio, the
geometric mean with its 95% interval (Student's t on the pairs' log ratios) and whether the
threshold (0.95) lies below that interval; the last line is the whole summary as JSON.

The race holds the machine's bench lock (as benchmarks/race_reference.py does) and gives
its own cells a private lock folder; each run's foreign CPU is sampled
(dpscale.launch.contention), a contaminated run is rerun (``--reruns`` at most). Logs, the
cells' results and the plain loops' output go to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import numpy as np
from PIL import Image

import page
from dpscale.launch import contention, launcher
from dpscale.launch.setup.envs import ensure_env
from dpscale.plan.cell import Cell, FolderInput, Measure, ModelConfig
from dpscale.plan.paths import REPO_ROOT
from dpscale.plan.result import read_result
from dpscale.registry import strategy
from dpscale.runner.timing import t_quantile_975
from race_reference import (
    TIMEOUT_S,
    Protocol,
    Run,
    clean_run,
    judged,
    load_text,
    machine_lock,
    process_env,
)

PLAIN = REPO_ROOT / "benchmarks" / "plain_loops"
# per framework: dpscale's strategy and the plain loop that does the same
STRATEGIES = {"torch": "torch-ddp", "tf": "horovod-tf"}
SCRIPTS = {"torch": PLAIN / "torch_imagefolder_ddp.py", "tf": PLAIN / "tf_data_horovod.py"}
MODEL = ModelConfig("resnet18", "imagenet", 64, 3)
DEVICES, BATCH, WORKERS, PREFETCH = 2, 8, 1, 2
THRESHOLD = 0.95


def write_folder(root: Path, classes: int, per_class: int, pixels: int, seed: int) -> Path:
    """``root`` with ``classes`` folders of ``per_class`` random RGB JPEG images each (made
    once: a folder already complete is kept, the same seed giving the same images)."""
    done = root / ".complete"
    if done.is_file():
        return root
    rng = np.random.default_rng(seed)
    for label in range(classes):
        folder = root / f"class{label}"
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            pixels_ = rng.integers(0, 256, (pixels, pixels, 3), dtype=np.uint8)
            Image.fromarray(pixels_).save(folder / f"image{index:04d}.jpg")
    done.write_text("")
    return root


def race_cell(framework: str, folder: Path, classes: int, measure: Measure) -> Cell:
    """The folder cell of the race (1 node x DEVICES, BATCH per device, 1 thread each)."""
    model = ModelConfig(MODEL.name, MODEL.stem, MODEL.image_size, classes)
    return Cell(
        "folder-race", STRATEGIES[framework], model, "folder", 1, DEVICES, BATCH,
        measure=measure, image_folder=FolderInput(str(folder), WORKERS, PREFETCH),
    )  # fmt: skip


def plain_args(framework: str, cell: Cell, sgd: str = "fused") -> list[str]:
    """The plain loop's flags, every value read from the cell it races."""
    m, f, update, model = cell.measure, cell.image_folder, cell.sgd, cell.model
    assert f is not None
    args = [
        f"--folder={f.path}",
        f"--model={model.name}",
        f"--stem={model.stem}",
        f"--image-size={model.image_size}",
        f"--classes={model.classes}",
        f"--batch={cell.batch_per_device}",
        f"--workers={f.workers}",
        f"--prefetch={f.prefetch}",
        f"--lr={update.lr}",
        f"--momentum={update.momentum}",
        f"--weight-decay={update.weight_decay}",
        f"--threads={cell.threads_per_device}",
        f"--seed={cell.seed}",
        f"--warmup-steps={m.warmup_steps}",
        f"--windows={m.windows}",
        f"--steps-per-window={m.steps_per_window}",
    ]
    if framework == "torch":  # tf.data has no use for these (dpscale records them unused)
        args += ["--pin-memory" if f.pin_memory else "--no-pin-memory"]
        args += ["--persistent-workers" if f.persistent_workers else "--no-persistent-workers"]
    else:
        args += [f"--sgd={sgd}"]
    return args


def plain_command(framework: str, cell: Cell, prefix: Path, sgd: str) -> list[str]:
    """The plain loop started as a user starts it: torchrun, or horovodrun --gloo."""
    python, ranks = str(prefix / "bin" / "python"), cell.devices_per_node
    script = [str(SCRIPTS[framework]), *plain_args(framework, cell, sgd)]
    if framework == "torch":
        torchrun = [python, "-m", "torch.distributed.run", "--standalone"]
        return [*torchrun, f"--nproc_per_node={ranks}", *script]
    horovodrun = [str(prefix / "bin" / "horovodrun"), "-np", str(ranks)]
    return [*horovodrun, "-H", f"localhost:{ranks}", "--gloo", python, *script]


def protocol(cell: Cell) -> Protocol:
    """The cell's windows in race_reference's terms (its img/s conventions)."""
    m = cell.measure
    return Protocol(
        batch=cell.batch_per_device,
        threads=cell.threads_per_device,
        warmup=m.warmup_steps,
        iterations=m.windows,
        batches_per_iteration=m.steps_per_window,
    )


def run_dpscale(cell: Cell, prefix: Path, folder: Path) -> tuple[Run, int]:
    """A: the cell through the launcher; its windows, quality and trainable parameters."""
    out, log = cell.result_path(folder), folder / "cell.log"
    folder.mkdir(parents=True)
    status = launcher.launch(cell, out, prefix, log)
    result = read_result(out)
    if status != "ok":
        raise RuntimeError(f"dpscale cell {status}: {result['reason']} (log {log})")
    # judged as the plain loop is, by other processes' CPU alone: both sides run the same
    # ranks and workers on the same cores, so the cell's own oversubscription is no reason
    # to rerun it (its result's quality says contaminated for that reason only)
    summary = {**result["system"]["contention"], "oversubscribed": False}
    quality = contention.verdict(summary)[0]
    foreign = summary.get("foreign_cpu_cores_mean")
    run = Run(result["measurement"]["per_rank_window_seconds"], quality, foreign)
    return run, result["model_info"]["trainable_params"]


def run_plain(framework: str, cell: Cell, prefix: Path, log: Path, sgd: str) -> tuple[Run, int]:
    """B: the plain loop; its windows, the machine's load during them, its parameters."""
    command = plain_command(framework, cell, prefix, sgd)
    env = process_env(prefix, cell.threads_per_device, {"CUDA_VISIBLE_DEVICES": ""})
    with contention.sampling() as sampler, open(log, "w") as output:
        print("$ " + " ".join(command), file=output, flush=True)
        done = subprocess.run(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, timeout=TIMEOUT_S
        )
    text = log.read_text()
    lines = [line for line in text.splitlines() if "RACE_RESULT " in line]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"plain loop failed ({done.returncode}), log {log}:\n{text[-3000:]}")
    data = json.loads(lines[0].split("RACE_RESULT ", 1)[1])
    quality, foreign = judged(sampler, data["span"], contention.cpus_used_by(cell))
    return Run(data["per_rank_seconds"], quality, foreign), data["trainable_params"]


def ratio_summary(ratios: Sequence[float], threshold: float = THRESHOLD) -> dict:
    """Median and geometric mean of the pairs' ratios, the latter's 95% interval (t on the
    log ratios; None for one pair), and the verdict: ``holds`` (the threshold below the
    interval), ``fails`` (above it), ``undecided`` (inside it), or ``one pair``."""
    logs = [math.log(r) for r in ratios]
    centre = statistics.fmean(logs)
    interval, verdict = None, "one pair"
    if len(logs) > 1:
        half = t_quantile_975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        low, high = math.exp(centre - half), math.exp(centre + half)
        interval = [low, high]
        verdict = "holds" if low > threshold else "fails" if high < threshold else "undecided"
    return {
        "pairs": len(ratios),
        "ratios": list(ratios),
        "median": statistics.median(ratios),
        "geometric_mean": math.exp(centre),
        "ci95": interval,
        "threshold": threshold,
        "verdict": verdict,
    }


def race(framework: str, cell: Cell, args: argparse.Namespace) -> dict:
    """``args.pairs`` alternated pairs of the cell and its plain loop; the ratios' summary."""
    prefix = ensure_env(strategy(cell.strategy).env, args.env_dir)
    p, where = protocol(cell), args.out / framework
    runs: dict[str, list[Run]] = {"dpscale": [], "plain": []}
    params: dict[str, set[int]] = {"dpscale": set(), "plain": set()}
    attempt = iter(range(10**6))

    def measured(side: str, pair: int) -> Run:
        name = f"pair{pair + 1}-{side}-{next(attempt)}"
        if side == "dpscale":
            run, count = run_dpscale(cell, prefix, where / name)
        else:
            run, count = run_plain(framework, cell, prefix, where / f"{name}.log", args.tf_sgd)
        params[side].add(count)
        return run

    where.mkdir(parents=True, exist_ok=True)
    for pair in range(args.pairs):
        order = ("dpscale", "plain") if pair % 2 == 0 else ("plain", "dpscale")
        for side in order:
            runs[side].append(clean_run(partial(measured, side, pair), args.reruns))
        a, b = (runs[side][-1].dpscale_convention(p) for side in ("dpscale", "plain"))
        print(
            f"{framework} pair {pair + 1} ({' then '.join(order)}): dpscale {a:.2f} img/s "
            f"({runs['dpscale'][-1].quality}), plain {b:.2f} img/s "
            f"({runs['plain'][-1].quality}), ratio {a / b:.3f}",
            flush=True,
        )
    if params["dpscale"] != params["plain"]:
        print(f"{framework}: the models differ: trainable parameters {params}", flush=True)
    ratios = [
        a.dpscale_convention(p) / b.dpscale_convention(p)
        for a, b in zip(runs["dpscale"], runs["plain"], strict=True)
    ]
    return {
        "framework": framework,
        "strategy": cell.strategy,
        "img_s": {side: [r.dpscale_convention(p) for r in done] for side, done in runs.items()},
        "qualities": {side: [r.quality for r in done] for side, done in runs.items()},
        "foreign_cores": [r.foreign_cores for done in runs.values() for r in done],
        "trainable_params": sorted(params["dpscale"] | params["plain"]),
        **ratio_summary(ratios, args.threshold),
    }


def interval_text(s: dict) -> str:
    return "-" if s["ci95"] is None else "{:.3f}-{:.3f}".format(*s["ci95"])


def verdict_line(s: dict) -> str:
    interval = "no interval" if s["ci95"] is None else "95% interval " + interval_text(s)
    return (
        f"{s['framework']} ({s['strategy']}): dpscale / plain over {s['pairs']} pair(s): "
        f"median {s['median']:.3f}, geometric mean {s['geometric_mean']:.3f}, {interval}; "
        f"{s['threshold']} below the interval: {s['verdict']}"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    defaults = Measure()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--frameworks", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "results" / "folder-race")
    parser.add_argument("--env-dir", default=".envs")
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--per-class", type=int, default=120, help="images per class")
    parser.add_argument("--pixels", type=int, default=96, help="the images' side")
    parser.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    parser.add_argument("--windows", type=int, default=defaults.windows)
    parser.add_argument("--steps-per-window", type=int, default=defaults.steps_per_window)
    parser.add_argument("--reruns", type=int, default=2, help="of a contaminated run")
    parser.add_argument("--threshold", type=float, default=THRESHOLD)
    parser.add_argument(
        "--tf-sgd",
        choices=["fused", "keras"],
        default="fused",
        help="the plain TF loop's update: dpscale's fused kernels (the same arithmetic) or "
        "Keras' SGD (what a user would write)",
    )
    page.add_page_option(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    args.out = args.out.resolve()
    run = page.describe_run()
    name = f"images-{args.classes}x{args.per_class}-{args.pixels}px"
    folder = write_folder(args.out / name, args.classes, args.per_class, args.pixels, seed=0)
    # 2 ranks + their loader workers want more CPUs than 2 cores: both sides run the same
    # processes, so the race compares them under the same sharing (measure.oversubscribe)
    measure = Measure(
        args.warmup_steps, args.windows, args.steps_per_window, timeout_s=TIMEOUT_S,
        oversubscribe=True,
    )  # fmt: skip
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    summaries = []
    with machine_lock():
        os.environ["DPSCALE_LOCK_DIR"] = str(args.out)  # the race's own cells: its lock held
        for framework in args.frameworks:
            cell = race_cell(framework, folder, args.classes, measure)
            summaries.append(race(framework, cell, args))
    print(f"started {started}")
    for s in summaries:
        print(verdict_line(s))
    rows = [
        [s["framework"], s["pairs"], s["median"], s["geometric_mean"]]
        + [interval_text(s), s["verdict"]]
        + [" ".join(f"{r:.3f}" for r in s["ratios"])]
        for s in summaries
    ]
    header = ["framework", "pairs", "median", "geo. mean", "95% interval", "verdict", "ratios"]
    caption = (
        f"dpscale folder cell / plain loop, order alternating; {BATCH} images per device, "
        f"{DEVICES} devices, {args.windows} windows of {args.steps_per_window} steps after "
        f"{args.warmup_steps}; plain TF update: {args.tf_sgd}"
    )
    page.print_page(
        "Folder cells against plain loops", [caption, page.table(header, rows)], run,
        load_text(summaries), args.page,
    )  # fmt: skip
    print(json.dumps({"started": started, "races": summaries}), flush=True)


if __name__ == "__main__":
    main()
