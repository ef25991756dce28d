"""The term-by-term prediction checked end to end on emulated nodes, by the protocol of
docs/decisions/loss-breakdown-prediction.md: for each link of a study like
studies/validation_terms_mini.yaml, `dpscale predict` with a nominal cluster file whose nodes
share one host, and --calibrate the study's cells up to 2 nodes (control cells included),
predicts 4 and 8 nodes; printed beside what was measured, today's calibrated law, link-only
and the two baselines, and each predicted term beside the one the 4- and 8-node controls
measured.

    PYTHONPATH=src .venv/bin/python benchmarks/term_calibration.py \
        --study RESULTS/validation_terms_mini [--networks 3gbit] [--predict 4 8]
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

from dpscale.analysis.results.loss_breakdown import loss_breakdown
from dpscale.steps.predict import predict

MODEL, STRATEGY, BATCH = "resnet18-imagenet64-c10", "torch-ddp", 16
CALIBRATE_UP_TO, PREDICT = 2, (4, 8)
METHODS = ("terms", "calibrated", "link_only", "hold", "repeat")
TERMS = (("contention", "contention_s"), ("waiting", "waiting_s"), ("exposed", "exposed_comm_s"))


@dataclass(frozen=True)
class Check:
    study: Path
    networks: tuple[str, ...] | None
    predict: tuple[int, ...] = PREDICT


def cluster_file(folder: Path, check: Check, network: str) -> Path:
    path = folder / f"emulated-{network}.yaml"
    path.write_text(
        f"name: emulated-{network}\n"
        f"inter_node: {{rate: {network}, latency: 0us}}\n"
        "devices_per_node: 1\n"
        "one_host: true\n"
        f"nodes: {list(check.predict)}\n"
        f"model: {MODEL}\nstrategy: {STRATEGY}\nbatch_per_device: {BATCH}\n",
        encoding="utf-8",
    )
    return path


def small_run(folder: Path, cells: pd.DataFrame) -> Path:
    """The study's cells cut to the calibration's nodes: all the prediction sees."""
    (folder / "small" / "tables").mkdir(parents=True)
    cells[cells["nodes"] <= CALIBRATE_UP_TO].to_csv(
        folder / "small" / "tables" / "cells.csv", index=False
    )
    return folder / "small"


def one_network(
    folder: Path, check: Check, small: Path, tables: dict[str, pd.DataFrame], network: str
) -> list[dict]:
    out = folder / f"predicted-{network}.csv"
    print(predict(check.study, cluster_file(folder, check, network), out, small, network))
    predicted = pd.read_csv(out)
    scaling = tables["scaling"]
    mine = scaling[
        (scaling["mode"] == "synthetic")
        & (scaling["batch_per_device"] == BATCH)
        & ((scaling["network"] == network) | (scaling["nodes"] == 1))
    ].set_index("nodes")
    measured_terms = tables["breakdown"]
    measured_terms = measured_terms[
        (measured_terms["network"] == network) & (measured_terms["mode"] == "synthetic")
    ].set_index("nodes")
    e2 = float(mine.loc[CALIBRATE_UP_TO, "efficiency"])
    rows = []
    for row in predicted.itertuples():
        n = int(row.nodes)
        measured = float(mine.loc[n, "efficiency"]) if n in mine.index else math.nan
        record = {
            "network": network,
            "nodes": n,
            "measured": measured,
            "measured_ci95": float(mine.loc[n, "efficiency_ci95"]) if n in mine.index else math.nan,
            "terms": row.terms_efficiency,
            "terms_lo": row.terms_efficiency_lo,
            "terms_hi": row.terms_efficiency_hi,
            "calibrated": row.calibrated_efficiency,
            "link_only": row.efficiency,
            "hold": e2,
            "repeat": e2 - (1 - e2) * math.log2(n / CALIBRATE_UP_TO),
            "inside": row.terms_efficiency_lo <= measured <= row.terms_efficiency_hi,
        }
        for name, column in TERMS:
            record[f"{name}_predicted_s"] = getattr(row, f"terms_{name}_s")
            record[f"{name}_measured_s"] = (
                float(measured_terms.loc[n, column]) if n in measured_terms.index else math.nan
            )
        rows.append(record)
    return rows


def parse_args(argv: list[str] | None = None) -> Check:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", type=Path, required=True, help="the study's results folder")
    parser.add_argument("--networks", nargs="+", help="only these links (default: every one)")
    parser.add_argument("--predict", type=int, nargs="+", default=list(PREDICT), help="nodes")
    args = parser.parse_args(argv)
    return Check(args.study, tuple(args.networks) if args.networks else None, tuple(args.predict))


def main(argv: list[str] | None = None) -> int:
    check = parse_args(argv)
    cells = pd.read_csv(check.study / "tables" / "cells.csv")
    tables = {
        "scaling": pd.read_csv(check.study / "tables" / "scaling.csv"),
        "breakdown": loss_breakdown(cells),
    }
    for name, table in tables.items():
        tables[name] = table[(table["strategy"] == STRATEGY) & (table["model"] == MODEL)]
    scaling = tables["scaling"]
    networks = sorted(set(scaling.loc[scaling["nodes"] >= 2, "network"]))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small = small_run(folder, cells)
        for network in networks:
            if check.networks is None or network in check.networks:
                rows += one_network(folder, check, small, tables, network)
    table = pd.DataFrame(rows)
    checked = table[table["measured"].notna()].copy()
    for method in METHODS:
        checked[f"{method}_rel_err"] = (checked[method] - checked["measured"]).abs() / checked[
            "measured"
        ]
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(checked.round(4).to_string(index=False))
    summary = {
        "predictions": len(checked),
        "median_rel_err": {m: float(checked[f"{m}_rel_err"].median()) for m in METHODS},
        "worst_rel_err": {m: float(checked[f"{m}_rel_err"].max()) for m in METHODS},
        "measured_inside_terms_range": int(checked["inside"].sum()),
    }
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
