"""Synthetic img/s of every strategy on the same cells from two checkouts, alternated, and
each cell's wall time (its whole launcher process, start-up and exit included).

    .venv/bin/python benchmarks/ab_checkouts.py --a /path/to/before --b . --rounds 3

Each round runs every strategy's cell once from checkout A and once from checkout B (A B,
then B A in the next round, so drift hits both), through each checkout's own launcher
(``python -m dpscale.launch`` with that checkout's ``src`` first on PYTHONPATH) and the
same framework environments. The cells are the default study's shape: resnet18, imagenet
stem, 64 px, 10 classes, per-device batch 16, 1 thread per device; 2 processes for the
strategies with one process per device, 1 for the others. Prints each pair and, per
strategy, the median of the B/A ratios of mean img/s and of the cells' wall seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import page
from dpscale.launch.setup.envs import env_prefix
from dpscale.plan.cell import Cell, Measure, ModelConfig
from dpscale.registry import STRATEGIES

MODEL = ModelConfig("resnet18", "imagenet", 64, 10)
MEASURE = Measure(warmup_steps=3, windows=5, steps_per_window=3, timeout_s=600)


def cell_for(name: str) -> Cell:
    devices = 1 if STRATEGIES[name].one_process else 2
    return Cell("ab", name, MODEL, "synthetic", 1, devices, 16, measure=MEASURE)


CELL_SCRIPT = """
import sys
from dpscale.plan.cell import Cell, Measure, ModelConfig
name, devices = sys.argv[1], int(sys.argv[2])
print(Cell("ab", name, ModelConfig("resnet18", "imagenet", 64, 10), "synthetic", 1, devices, 16,
           measure=Measure(warmup_steps=3, windows=5, steps_per_window=3, timeout_s=600)).to_json())
"""


def cell_json(checkout: Path, cell: Cell) -> str:
    """The cell as the checkout's own Cell writes it (its fields may differ)."""
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    command = [sys.executable, "-c", CELL_SCRIPT, cell.strategy, str(cell.devices_per_node)]
    return subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout


def run(checkout: Path, cell: Cell, env_dir: str, scratch: Path) -> tuple[float, float]:
    """The cell's mean img/s and the wall seconds of its launcher process."""
    out, log = scratch / "cells" / "result.json", scratch / "cell.log"
    out.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    command = [sys.executable, "-m", "dpscale.launch", "--cell", cell_json(checkout, cell)]
    command += ["--env", str(env_prefix(STRATEGIES[cell.strategy].env, env_dir))]
    command += ["--out", str(out), "--log", str(log)]
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=checkout, check=True, capture_output=True)
    wall = time.perf_counter() - start
    result = json.loads(out.read_text())
    if result["status"] != "ok":
        sys.exit(f"{checkout} {cell.cell_id}: {result['status']}: {result['reason']}")
    return result["measurement"]["summary"]["img_s"]["mean"], wall


Pair = tuple[int, str, tuple[float, float], tuple[float, float]]  # round, name, A, B


def ratio_rows(ratios: dict[str, list[float]]) -> list[tuple]:
    return [
        (name, f"{statistics.median(v):.3f}", len(v), " ".join(f"{r:.3f}" for r in v))
        for name, v in ratios.items()
    ]


def page_tables(
    pairs: list[Pair], ratios: dict[str, list[float]], walls: dict[str, list[float]]
) -> list[str]:
    """The rounds' pairs (round, strategy, A and B img/s and wall seconds), then per
    strategy the median B/A of each."""
    rounds = [
        (i, name, f"{a[0]:.1f}", f"{b[0]:.1f}", f"{b[0] / a[0]:.3f}")
        + (f"{a[1]:.2f}", f"{b[1]:.2f}", f"{b[1] / a[1]:.3f}")
        for i, name, a, b in pairs
    ]
    head = ["round", "strategy", "A img/s", "B img/s", "B/A", "A wall s", "B wall s", "B/A wall"]
    medians = ["strategy", "median B/A", "pairs", "pairs' B/A"]
    return [
        page.table(head, rounds),
        "img/s:",
        page.table(medians, ratio_rows(ratios)),
        "The cell's wall seconds (its launcher process):",
        page.table(medians, ratio_rows(walls)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="checkout A (before)")
    parser.add_argument("--b", type=Path, default=Path("."), help="checkout B (after)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--env-dir", default=".envs")
    parser.add_argument("--strategies", nargs="*", default=list(STRATEGIES))
    page.add_page_option(parser)
    args = parser.parse_args()
    this_run = page.describe_run()
    pairs: list[Pair] = []
    checkouts = {"A": args.a.resolve(), "B": args.b.resolve()}
    ratios: dict[str, list[float]] = {name: [] for name in args.strategies}
    walls: dict[str, list[float]] = {name: [] for name in args.strategies}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.rounds):
            order = "AB" if index % 2 == 0 else "BA"
            for name in args.strategies:
                got = {k: run(checkouts[k], cell_for(name), args.env_dir, Path(tmp)) for k in order}
                (rate_a, wall_a), (rate_b, wall_b) = got["A"], got["B"]
                ratios[name].append(rate_b / rate_a)
                walls[name].append(wall_b / wall_a)
                pairs.append((index + 1, name, got["A"], got["B"]))
                print(
                    f"round {index + 1} {name}: A {rate_a:.1f} B {rate_b:.1f} img/s "
                    f"B/A {ratios[name][-1]:.3f}; wall A {wall_a:.2f} B {wall_b:.2f} s "
                    f"B/A {walls[name][-1]:.3f}",
                    flush=True,
                )
    for name in args.strategies:
        print(
            f"{name}: median B/A img/s {statistics.median(ratios[name]):.3f}, "
            f"wall {statistics.median(walls[name]):.3f} over {len(ratios[name])} pairs"
        )
    caption = (
        f"A: `{checkouts['A']}`, B: `{checkouts['B']}`; img/s: the cell's mean over its "
        "windows; order A B in odd rounds, B A in even ones."
    )
    tables = [caption, *page_tables(pairs, ratios, walls)]
    page.print_page("Two checkouts, alternated (A/B)", tables, this_run, path=args.page)


if __name__ == "__main__":
    main()
