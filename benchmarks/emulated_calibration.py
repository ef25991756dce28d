"""The calibrated prediction checked end to end on emulated nodes, by the protocol of
docs/decisions/emulated-calibration-check.md: for each network and per-device batch of the
H100 machine's 16-CPU study, `dpscale predict` with a nominal cluster file and --calibrate
the study's cells up to 2 nodes predicts 4 and 8 nodes; printed beside what was measured,
the link-only figure and the two baselines.

    PYTHONPATH=src .venv/bin/python benchmarks/emulated_calibration.py
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path

import pandas as pd

from dpscale.steps.predict import predict

STUDY = Path("evidence/2026-11-26-nvidia-h100/cpu16_torch_ddp_nodes_two_links")
MODEL, STRATEGY = "resnet18-imagenet64-c10", "torch-ddp"
CALIBRATE_UP_TO, PREDICT = 2, (4, 8)
METHODS = ("calibrated", "link_only", "hold", "repeat")


def cluster_file(folder: Path, network: str, batch: int) -> Path:
    path = folder / f"emulated-{network}-b{batch}.yaml"
    path.write_text(
        f"name: emulated-{network}\n"
        f"inter_node: {{rate: {network}, latency: 0us}}\n"
        "devices_per_node: 1\n"
        f"nodes: {list(PREDICT)}\n"
        f"model: {MODEL}\nstrategy: {STRATEGY}\nbatch_per_device: {batch}\n",
        encoding="utf-8",
    )
    return path


def small_run(folder: Path) -> Path:
    """The study's cells cut to the calibration's nodes: all the prediction sees (its
    scaling table is made from them)."""
    cells = pd.read_csv(STUDY / "tables" / "cells.csv")
    (folder / "small" / "tables").mkdir(parents=True)
    cells[cells["nodes"] <= CALIBRATE_UP_TO].to_csv(
        folder / "small" / "tables" / "cells.csv", index=False
    )
    return folder / "small"


def one_group(
    folder: Path, small: Path, scaling: pd.DataFrame, network: str, batch: int
) -> list[dict]:
    out = folder / f"predicted-{network}-b{batch}.csv"
    predict(STUDY, cluster_file(folder, network, batch), out, small, network)
    predicted = pd.read_csv(out)
    mine = scaling[
        (scaling["batch_per_device"] == batch)
        & ((scaling["network"] == network) | (scaling["nodes"] == 1))
    ].set_index("nodes")
    e2 = float(mine.loc[CALIBRATE_UP_TO, "efficiency"])
    rows = []
    for row in predicted.itertuples():
        n = int(row.nodes)
        measured = float(mine.loc[n, "efficiency"]) if n in mine.index else math.nan
        rows.append(
            {
                "network": network,
                "batch": batch,
                "nodes": n,
                "measured": measured,
                "measured_ci95": float(mine.loc[n, "efficiency_ci95"]),
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


def main() -> int:
    scaling = pd.read_csv(STUDY / "tables" / "scaling.csv")
    scaling = scaling[(scaling["strategy"] == STRATEGY) & (scaling["model"] == MODEL)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small = small_run(folder)
        for network in sorted(set(scaling.loc[scaling["nodes"] >= 2, "network"])):
            for batch in sorted(set(scaling["batch_per_device"])):
                rows += one_group(folder, small, scaling, network, int(batch))
    table = pd.DataFrame(rows)
    for method in METHODS:
        table[f"{method}_rel_err"] = (table[method] - table["measured"]).abs() / table["measured"]
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.round(3).to_string(index=False))
    summary = {
        "predictions": len(table),
        "median_rel_err": {m: float(table[f"{m}_rel_err"].median()) for m in METHODS},
        "worst_rel_err": {m: float(table[f"{m}_rel_err"].max()) for m in METHODS},
        "measured_inside_calibrated_range": int(table["inside"].sum()),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
