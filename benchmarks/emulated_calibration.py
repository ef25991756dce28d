"""The calibrated prediction checked end to end on emulated nodes, by the protocol of
docs/decisions/emulated-calibration-check.md: for each network and per-device batch of the
H100 machine's 16-CPU study, `dpscale predict` with a nominal cluster file and --calibrate
the study's cells up to 2 nodes predicts 4 and 8 nodes; printed beside what was measured,
the link-only figure and the two baselines. Another study of the same shape (one rank per
emulated node, nominal links) is checked the same way with ``--study`` (its results folder),
``--model`` and ``--predict`` (docs/decisions/emulated-calibration-two-cores.md); a measured
cell whose quality is contaminated is not checked, and the summary counts it.

    PYTHONPATH=src .venv/bin/python benchmarks/emulated_calibration.py [--study RESULTS]
        [--model KEY] [--predict 4 8]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dpscale.steps.predict import predict

STUDY = Path("evidence/2026-11-26-nvidia-h100/cpu16_torch_ddp_nodes_two_links")
MODEL, STRATEGY = "resnet18-imagenet64-c10", "torch-ddp"
CALIBRATE_UP_TO, PREDICT = 2, (4, 8)
CONTAMINATED = "contaminated"  # time-shared compute: no cluster's cell looks like it
METHODS = ("calibrated", "link_only", "hold", "repeat")


@dataclass(frozen=True)
class Check:
    study: Path = STUDY
    model: str = MODEL
    predict: tuple[int, ...] = PREDICT


def cluster_file(folder: Path, check: Check, network: str, batch: int) -> Path:
    path = folder / f"emulated-{network}-b{batch}.yaml"
    path.write_text(
        f"name: emulated-{network}\n"
        f"inter_node: {{rate: {network}, latency: 0us}}\n"
        "devices_per_node: 1\n"
        f"nodes: {list(check.predict)}\n"
        f"model: {check.model}\nstrategy: {STRATEGY}\nbatch_per_device: {batch}\n",
        encoding="utf-8",
    )
    return path


def small_run(folder: Path, cells: pd.DataFrame) -> Path:
    """The study's cells cut to the calibration's nodes: all the prediction sees (its
    scaling table is made from them)."""
    (folder / "small" / "tables").mkdir(parents=True)
    cells[cells["nodes"] <= CALIBRATE_UP_TO].to_csv(
        folder / "small" / "tables" / "cells.csv", index=False
    )
    return folder / "small"


def contaminated_nodes(cells: pd.DataFrame, network: str, batch: int) -> set[int]:
    """Node counts whose measured synthetic cell of this network and batch is contaminated."""
    mine = cells[
        (cells["mode"] == "synthetic")
        & (cells["network"] == network)
        & (cells["batch_per_device"] == batch)
        & (cells["quality"] == CONTAMINATED)
    ]
    return {int(n) for n in mine["nodes"]}


def one_group(
    folder: Path, check: Check, small: Path, tables: dict[str, pd.DataFrame], network: str,
    batch: int,
) -> list[dict]:  # fmt: skip
    out = folder / f"predicted-{network}-b{batch}.csv"
    predict(check.study, cluster_file(folder, check, network, batch), out, small, network)
    predicted = pd.read_csv(out)
    scaling = tables["scaling"]
    mine = scaling[
        (scaling["batch_per_device"] == batch)
        & ((scaling["network"] == network) | (scaling["nodes"] == 1))
    ].set_index("nodes")
    e2 = float(mine.loc[CALIBRATE_UP_TO, "efficiency"])
    unfit = contaminated_nodes(tables["cells"], network, batch)
    rows = []
    for row in predicted.itertuples():
        n = int(row.nodes)
        measured = float(mine.loc[n, "efficiency"]) if n in mine.index else math.nan
        rows.append(
            {
                "network": network,
                "batch": batch,
                "nodes": n,
                "checked": n in mine.index and n not in unfit,
                "measured": measured,
                "measured_ci95": float(mine.loc[n, "efficiency_ci95"])
                if n in mine.index
                else math.nan,
                "calibrated": row.calibrated_efficiency,
                "calibrated_lo": row.calibrated_efficiency_lo,
                "calibrated_hi": row.calibrated_efficiency_hi,
                "link_only": row.efficiency,
                "hold": e2,
                "repeat": e2 - (1 - e2) * math.log2(n / CALIBRATE_UP_TO),
                "inside": row.calibrated_efficiency_lo <= measured <= row.calibrated_efficiency_hi,
            }
        )
    return rows


def parse_args(argv: list[str] | None = None) -> Check:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, default=STUDY, help="a study's results folder")
    parser.add_argument("--model", default=MODEL, help="the model key of its cells")
    parser.add_argument("--predict", type=int, nargs="+", default=list(PREDICT), help="nodes")
    args = parser.parse_args(argv)
    return Check(args.study, args.model, tuple(args.predict))


def main(argv: list[str] | None = None) -> int:
    check = parse_args(argv)
    tables = {}
    for name in ("scaling", "cells"):
        table = pd.read_csv(check.study / "tables" / f"{name}.csv")
        tables[name] = table[(table["strategy"] == STRATEGY) & (table["model"] == check.model)]
    scaling = tables["scaling"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small = small_run(folder, pd.read_csv(check.study / "tables" / "cells.csv"))
        for network in sorted(set(scaling.loc[scaling["nodes"] >= 2, "network"])):
            for batch in sorted(set(scaling["batch_per_device"])):
                rows += one_group(folder, check, small, tables, network, int(batch))
    everything = pd.DataFrame(rows)
    table = everything[everything["checked"]].copy()
    for method in METHODS:
        table[f"{method}_rel_err"] = (table[method] - table["measured"]).abs() / table["measured"]
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.round(3).to_string(index=False))
    left = everything[~everything["checked"]]
    summary = {
        "predictions": len(table),
        "not_checked": [f"{r.network} b{r.batch} {r.nodes} nodes" for r in left.itertuples()],
        "median_rel_err": {m: float(table[f"{m}_rel_err"].median()) for m in METHODS},
        "worst_rel_err": {m: float(table[f"{m}_rel_err"].max()) for m in METHODS},
        "measured_inside_calibrated_range": int(table["inside"].sum()),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
