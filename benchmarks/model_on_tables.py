"""The communication model of one study, fitted on tables already written (no cell measured):
for an equality check of two checkouts' analysis code on the same measured tables.

    PYTHONPATH=<checkout>/src python benchmarks/model_on_tables.py TABLES_DIR OUT_DIR \
        [--configfile studies/X.yaml]

Reads windows.csv, cells.csv, comm_fits.csv and, where present, bucket_timeline.csv and
gradient_replay.csv from TABLES_DIR; plans the config (config.yaml, then the study file) with
the checkout on PYTHONPATH and writes the model's tables (parameters, validation, summary,
predictions, remedies, remedy_validation, remedy_predictions) as CSV to OUT_DIR. Runs on
checkouts from before the strategies declared their traffic (their model inputs took the
config alone) too, so one script serves both sides of a comparison.
"""

from __future__ import annotations

import argparse
import inspect
import json
from pathlib import Path

import pandas as pd

from dpscale.analysis.laws.commmodel.study import study_model
from dpscale.plan.config import check_config
from dpscale.plan.config_files import study_config
from dpscale.registry import STRATEGIES
from dpscale.steps.model import TABLES, study_links


def model_inputs_of(config: dict) -> dict:
    """The checkout's own model inputs (plan.model_inputs, or plan.link before it)."""
    try:
        from dpscale.plan.model_inputs import model_inputs
    except ImportError:  # before the strategies declared their traffic
        from dpscale.plan.link import model_inputs
    if len(inspect.signature(model_inputs).parameters) == 2:
        return model_inputs(config, STRATEGIES)
    return model_inputs(config)


def read(tables: Path, name: str) -> pd.DataFrame | None:
    path = tables / f"{name}.csv"
    return pd.read_csv(path) if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--configfile", type=Path)
    args = parser.parse_args()
    files = [Path("config.yaml"), *([args.configfile] if args.configfile else [])]
    config = check_config(study_config(files), STRATEGIES)
    study = study_links(json.loads(json.dumps(model_inputs_of(config))))
    model = study_model(
        read(args.tables, "windows"),
        read(args.tables, "cells"),
        read(args.tables, "comm_fits"),
        study,
        read(args.tables, "bucket_timeline"),
        read(args.tables, "gradient_replay"),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        getattr(model, name).to_csv(args.out / f"{name}.csv", index=False)
    print(f"{args.out}: {' '.join(model.lines)}")


if __name__ == "__main__":
    main()
