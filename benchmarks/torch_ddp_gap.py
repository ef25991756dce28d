"""What makes torch-ddp's step slower than the reference step (race_reference.py)?

    .venv/bin/python benchmarks/torch_ddp_gap.py [--ranks 2] [--rounds 8] [--variants ...]

One torchrun job (1 thread per rank, gloo, as the runner) builds one DDP model per variant
(same seed, dpscale's ResNet-18, imagenet stem, 64 px, batch 16 per rank), warms each up,
then times them interleaved: in every round each variant runs 10 batches, in an order that
rotates from round to round, so a drift of the machine hits all alike. Each rank times its
own batches; the script prints, per variant, global img/s (slowest rank per round, mean over
rounds) and its ratio to the reference step (median of per-round ratios).

- reference: Horovod's pytorch_synthetic_benchmark step (benchmarks/reference/): plain
  ``optim.SGD(lr=0.01 x ranks)``, ``F.cross_entropy``;
- runner: dpscale's step (dpscale.frameworks.torch_ops.make_train_step: SGD with momentum
  0.9 and L2 weight decay, as every framework's runner);
- momentum: the reference step with momentum 0.9 (no decay);
- sgd_loop / sgd_foreach / sgd_fused: the runner's optimiser with torch's per-tensor loop
  (the CPU default), its multi-tensor ``foreach`` path, and its ``fused`` kernel.
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
VARIANTS = ["reference", "runner", "momentum", "sgd_loop", "sgd_foreach", "sgd_fused"]


def make_step(name: str, cell: Cell, world: int):
    """(step, model) for one variant; the step's model is its own DDP-wrapped copy."""
    import torch
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    from dpscale.frameworks import torch_ops

    model, _ = torch_ops.build_model(cell, torch.device("cpu"))
    model = DistributedDataParallel(model)
    if name == "runner":
        return torch_ops.make_train_step(cell, model, torch.device("cpu"), cell.batch_per_device)
    sgd = cell.sgd
    if name == "reference":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * world)
    elif name == "momentum":
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * world, momentum=0.9)
    else:
        flags = {"sgd_loop": {"foreach": False}, "sgd_foreach": {"foreach": True}}
        optimizer = torch.optim.SGD(
            model.parameters(),
            lr=sgd.lr,
            momentum=sgd.momentum,
            weight_decay=sgd.weight_decay,
            **flags.get(name, {"fused": True}),
        )
    size = cell.model.image_size
    data = torch.randn(cell.batch_per_device, 3, size, size)
    target = torch.randint(0, cell.model.classes, (cell.batch_per_device,))

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()

    return step


def worker(cell: Cell, variants: list[str], rounds: int, batches: int, warmup: int) -> None:
    """Runs under torchrun in the torch environment."""
    import torch
    import torch.distributed as dist

    from dpscale.runner.support import exit_without_finalization

    torch.set_num_threads(cell.threads_per_device)
    dist.init_process_group("gloo")
    steps = {name: make_step(name, cell, dist.get_world_size()) for name in variants}
    for step in steps.values():
        for _ in range(warmup):
            step()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds):
        order = variants[round_ % len(variants) :] + variants[: round_ % len(variants)]
        for name in order:
            start = time.perf_counter()
            for _ in range(batches):
                steps[name]()
            seconds[name].append(time.perf_counter() - start)
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, seconds)
    if dist.get_rank() == 0:
        print("GAP_RESULT " + json.dumps(gathered), flush=True)
    dist.destroy_process_group()
    exit_without_finalization()


def gap_rows(
    per_rank: list[dict[str, list[float]]], images_per_round: int
) -> list[tuple[str, float, float, list[float]]]:
    """Per variant: global img/s (slowest rank per round, mean over rounds), its ratio to the
    reference (median of per-round ratios) and the per-round ratios."""
    ranks = len(per_rank)

    def slowest(name: str) -> list[float]:
        return [
            ranks * images_per_round / max(w)
            for w in zip(*(r[name] for r in per_rank), strict=True)
        ]

    reference = slowest("reference")
    rows = []
    for name in per_rank[0]:
        rates = slowest(name)
        ratios = [a / b for a, b in zip(rates, reference, strict=True)]
        rows.append((name, statistics.fmean(rates), statistics.median(ratios), ratios))
    return rows


def report(rows: list[tuple[str, float, float, list[float]]]) -> None:
    print(f"{'variant':14s} {'img/s':>8s} {'/ref':>6s}  per-round ratios")
    for name, rate, ratio, ratios in rows:
        shown = " ".join(f"{r:.3f}" for r in ratios)
        print(f"{name:14s} {rate:8.2f} {ratio:6.3f}  {shown}")


def page_table(rows: list[tuple[str, float, float, list[float]]]) -> str:
    header = ["variant", "img/s", "/ reference", "per-round ratios"]
    shown = [
        (name, f"{rate:.2f}", f"{ratio:.3f}", " ".join(f"{r:.3f}" for r in ratios))
        for name, rate, ratio, ratios in rows
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
    variants = ["reference"] + [v for v in args.variants if v != "reference"]
    measure = Measure(args.warmup, args.rounds, args.batches)
    cell = Cell("gap", "torch-ddp", MODEL, "synthetic", 1, args.ranks, args.batch, measure=measure)
    if args.worker:
        worker(cell, variants, args.rounds, args.batches, args.warmup)
        return
    run = page.describe_run()
    prefix = env_prefix("torch", args.env_dir)
    python = str(prefix / "bin" / "python")
    env = dict(os.environ, PYTHONPATH=str(SRC_DIR), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    command = [python, "-m", "torch.distributed.run", "--standalone"]
    command += [f"--nproc_per_node={args.ranks}", str(Path(__file__).resolve()), "--worker"]
    command += sys.argv[1:]
    per_rank, load = run_gap_job(command, env, args.ranks, "torchrun")
    rows = gap_rows(per_rank, args.batches * args.batch)
    report(rows)
    caption = (
        f"{args.ranks} ranks, batch {args.batch} per rank, {args.rounds} rounds of "
        f"{args.batches} batches; img/s: global, slowest rank per round, mean over rounds; "
        "/ reference: median of the per-round ratios."
    )
    page.print_page(
        "torch-ddp step against the reference step",
        [caption, page_table(rows)],
        run,
        load,
        args.page,
    )


if __name__ == "__main__":
    main()
