"""Print the exported-log check (issue 50 item 5) of a results folder: each multi-node cell
predicted through the study's own collectives exported as nccl-tests logs, the summary beside
the native held-out medians, and the median over the 2- and 4-node cells (the issue's target).

    PYTHONPATH=src .venv/bin/python benchmarks/exported_log_check.py [results/<study>]

Without a folder: the 16-core evidence (2, 4 and 8 emulated nodes over 10 and 1 Gbit/s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from dpscale.analysis.answers import exported_log_check as elc
from dpscale.analysis.answers import exported_log_summary as els

REPO = Path(__file__).resolve().parents[1]
EVIDENCE = REPO / "evidence/2026-11-26-nvidia-h100/cpu16_torch_ddp_nodes_two_links"
TABLES = (
    "cells",
    "collectives",
    "bucket_timeline",
    "model_validation",
    "model_validation_summary",
    "comm_model",
)
SHOWN = ["scheme", "network", "nodes", "batch_per_device", "log_ranks", "one_process_step_s"]
SHOWN += ["measured_step_s", "predicted_step_s", "relative_error", "status"]


def main(folder: Path) -> int:
    read = {name: pd.read_csv(folder / "tables" / f"{name}.csv") for name in TABLES}
    table = elc.check_cells(
        read["cells"], read["collectives"], read["bucket_timeline"], folder.name
    )
    summary = els.summarise(
        table, read["model_validation"], read["model_validation_summary"], read["comm_model"]
    )
    with pd.option_context("display.width", 220, "display.max_colwidth", 50):
        print(table[SHOWN].round(4).to_string(index=False))
        print()
        print(summary.drop(columns=["note"]).round(4).to_string(index=False))
    print()
    print(summary["note"].iloc[0])
    ok = table[(table["status"] == elc.OK) & table["nodes"].isin([2, 4])]
    for scheme, rows in ok.groupby("scheme"):
        errors = rows["relative_error"].abs()
        print(
            f"2 and 4 nodes, {scheme}: median |error| {errors.median():.1%} over {len(rows)} "
            f"cells, {int((errors <= els.WITHIN).sum())} within 10%"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else EVIDENCE))
