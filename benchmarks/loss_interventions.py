"""Each term of the loss breakdown checked by an intervention that should move it alone, by
the protocol of docs/decisions/loss-breakdown-interventions.md: per strategy (torch-ddp,
horovod-tf) a base study (two links), a slowed rank, a starved loader, every rank on one
core, and the base again; each study run by Snakemake into its own folder, then every check
printed (a term moved: its difference's 95% interval excludes zero).

    PYTHONPATH=src .venv/bin/python benchmarks/loss_interventions.py --out /tmp/interventions
    PYTHONPATH=src .venv/bin/python benchmarks/loss_interventions.py --out DIR --check-only

Run it on a quiet machine, nothing beside it. A study already complete in ``--out`` is not
measured again (Snakemake sees its results), so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from PIL import Image

from dpscale.analysis.results.loss_breakdown import loss_breakdown

STRATEGIES = ("torch-ddp", "horovod-tf")
BASE_LINK, SLOW_LINK = "3gbit", "1gbit"
LOADERS = {  # the base loader and the starved one, per strategy
    "torch-ddp": ({"workers": 1, "prefetch": 2}, {"workers": 0}),
    "horovod-tf": ({"workers": 0}, {"workers": 1, "prefetch": 1}),
}
CONDITIONS = ("base-A", "slow-rank", "starved", "packed", "base-B")
# the term each intervention should move, and which way (None: not predicted)
OWN = {
    "slower-link": ("exposed_comm", +1),
    "slow-rank": ("waiting", +1),
    "starved": ("input_pipeline", None),
    "packed": ("contention", +1),
}
STARVED_DIRECTION = {"torch-ddp": -1, "horovod-tf": None}
CHECKED = ("contention", "waiting", "exposed_comm", "input_pipeline")
IMAGES = {"classes": 10, "per_class": 40, "size": 256, "seed": 0}


def write_images(root: Path) -> Path:
    """Random-noise RGB JPEGs in class folders (noise compresses badly: each decodes in a
    few milliseconds, as a photograph of that size does)."""
    if root.is_dir() and any(root.iterdir()):
        return root
    rng = np.random.default_rng(IMAGES["seed"])
    size = IMAGES["size"]
    for label in range(IMAGES["classes"]):
        folder = root / f"class{label:02d}"
        folder.mkdir(parents=True)
        for index in range(IMAGES["per_class"]):
            pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"image{index:03d}.jpg", quality=90)
    return root


def study(strategy: str, condition: str, images: Path) -> dict[str, Any]:
    base_loader, starved_loader = LOADERS[strategy]
    loader = starved_loader if condition == "starved" else base_loader
    networks = [BASE_LINK, SLOW_LINK] if condition.startswith("base") else [BASE_LINK]
    config: dict[str, Any] = {
        "study": f"interventions_{strategy.replace('-', '_')}_{condition.replace('-', '_')}",
        "description": f"loss-breakdown intervention check: {strategy}, {condition}",
        "strategies": [strategy],
        "models": [{"name": "resnet18", "stem": "imagenet", "image_size": 64, "classes": 10}],
        "batch_sizes": [16],
        "devices_per_node": [1],
        "nodes": [1, 2],
        "networks": [{"name": name, "rate": name} for name in networks],
        "modes": ["synthetic", "folder"],
        "controls": ["local", "barrier"],
        "image_folder": {"path": str(images), **loader},
        "threads_per_device": 1,
        "measure": {
            "warmup_steps": 3,
            "windows": 10,
            "steps_per_window": 3,
            "repeats": 1,
            "timeout_s": 600,
            "again": [],
            "oversubscribe": True,
        },
    }
    if condition == "slow-rank":
        config["interventions"] = {"slow_rank": {"rank": 1, "cpu_fraction": 0.5}}
    if condition == "packed":
        config["interventions"] = {"cpus": [0]}
    return config


@dataclass(frozen=True)
class Run:
    strategy: str
    condition: str
    folder: Path  # its results folder's parent

    @property
    def name(self) -> str:
        return f"interventions_{self.strategy.replace('-', '_')}_{self.condition.replace('-', '_')}"

    @property
    def breakdown(self) -> Path:
        return self.folder / self.name / "tables" / "loss_breakdown.csv"

    @property
    def cells(self) -> Path:
        return self.folder / self.name / "tables" / "cells.csv"


def run_study(run: Run, images: Path, out: Path) -> float:
    """The study through Snakemake (its cells and tables); its wall time in seconds."""
    path = out / "studies" / f"{run.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(study(run.strategy, run.condition, images), sort_keys=False))
    started = time.monotonic()
    target = str(run.breakdown)
    command = [
        sys.executable, "-m", "snakemake", "--configfile", str(path),
        "--config", f"results_dir={run.folder}", "--", target,
    ]  # fmt: skip
    with open(out / "studies" / f"{run.name}.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
    return time.monotonic() - started


def term(table: pd.DataFrame, name: str, mode: str, network: str) -> tuple[float, float]:
    """(seconds, 95% half-width) of one term of the 2-node row of ``mode`` on ``network``."""
    rows = table[(table["mode"] == mode) & (table["network"] == network) & (table["nodes"] == 2)]
    if rows.empty:
        return math.nan, math.nan
    row = rows.iloc[0]
    seconds, points = row[f"{name}_s"], row[f"{name}_points"]
    half_points = row[f"{name}_points_ci95"]
    # the half-width in seconds: the points' relative half-width on the seconds
    half = abs(seconds) * half_points / abs(points) if points else math.nan
    return float(seconds), float(half)


def seconds_half(table: pd.DataFrame, name: str, network: str) -> tuple[float, float]:
    mode = "folder" if name == "input_pipeline" else "synthetic"
    return term(table, name, mode, network)


def pooled(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return (a[0] + b[0]) / 2, math.hypot(a[1], b[1]) / 2


def compare(
    intervention: tuple[float, float], baseline: tuple[float, float], direction: int | None
) -> dict[str, Any]:
    d = intervention[0] - baseline[0]
    h = math.hypot(intervention[1], baseline[1])
    moved = abs(d) > h
    return {
        "difference_s": d,
        "half_s": h,
        "moved": bool(moved),
        "direction_ok": True if direction is None or not moved else (d > 0) == (direction > 0),
    }


def checks(out: Path) -> list[dict[str, Any]]:
    """Every check of the protocol, one row per strategy, intervention and term."""
    rows = []
    for strategy in STRATEGIES:
        # from each study's cells, by the analysis as it is now (the same cells)
        tables = {
            condition: loss_breakdown(pd.read_csv(Run(strategy, condition, out / "results").cells))
            for condition in CONDITIONS
        }
        for name in CHECKED:
            a = seconds_half(tables["base-A"], name, BASE_LINK)
            b = seconds_half(tables["base-B"], name, BASE_LINK)
            baseline = pooled(a, b)
            rows.append(
                {"strategy": strategy, "intervention": "null (base-B vs base-A)", "term": name,
                 "own": False, **compare(b, a, None), "base_s": baseline[0]}
            )  # fmt: skip
            slow_link = pooled(
                seconds_half(tables["base-A"], name, SLOW_LINK),
                seconds_half(tables["base-B"], name, SLOW_LINK),
            )
            cases = {"slower-link": slow_link}
            for condition in ("slow-rank", "starved", "packed"):
                cases[condition] = seconds_half(tables[condition], name, BASE_LINK)
            for intervention, measured in cases.items():
                own_term, direction = OWN[intervention]
                if intervention == "starved":
                    direction = STARVED_DIRECTION[strategy]
                own = own_term == name
                rows.append(
                    {
                        "strategy": strategy,
                        "intervention": intervention,
                        "term": name,
                        "own": own,
                        **compare(measured, baseline, direction if own else None),
                        "base_s": baseline[0],
                    }
                )
    return rows


def verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """The 16 checks: per strategy and intervention, its own term moved (the expected way)
    and every other measured term stayed."""
    real = table[~table["intervention"].str.startswith("null")]
    out = []
    for (strategy, intervention), group in real.groupby(["strategy", "intervention"]):
        own = group[group["own"]].iloc[0]
        others = group[~group["own"] & group["difference_s"].notna()]
        moved = others[others["moved"]]
        out.append(
            {
                "strategy": strategy,
                "intervention": intervention,
                "own_term": own["term"],
                "own_moved": bool(own["moved"] and own["direction_ok"]),
                "others_stayed": moved.empty,
                "others_moved": ",".join(moved["term"]),
            }
        )
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--check-only", action="store_true", help="only read the studies")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    images = write_images(out / "images")
    if not args.check_only:
        for condition in CONDITIONS:
            for strategy in STRATEGIES:
                run = Run(strategy, condition, out / "results")
                print(f"{run.name}: {run_study(run, images, out):.0f} s", flush=True)
    table = pd.DataFrame(checks(out))
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(table.round(4).to_string(index=False))
        summary = verdicts(table)
        print(summary.to_string(index=False))
    passed = int(summary["own_moved"].sum() + summary["others_stayed"].sum())
    print(json.dumps({"checks": 2 * len(summary), "passed": passed}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
