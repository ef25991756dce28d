"""Print dpscale's scale-out prediction for each published case (studies/published) and the
summary of its errors (issue 50 item 4).

    PYTHONPATH=src .venv/bin/python benchmarks/published_check.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from dpscale.analysis.answers import published_check
from dpscale.analysis.laws.commmodel.buckets import timelines
from dpscale.plan.config_files import load_yaml

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "studies" / "published" / "cases.yaml"
TIMELINE = (
    REPO / "evidence/2026-11-26-nvidia-h100/gpu_resnet50_bucket_timeline/tables/bucket_timeline.csv"
)
KEY = ("torch-ddp", "resnet50-imagenet224-c1000")


def main() -> int:
    timeline = timelines(pd.read_csv(TIMELINE))[KEY]
    table = published_check.check(load_yaml(CASES)["cases"], timeline)
    columns = ["id", "link", "predicted", "published", "error_points", "error_pct", "status"]
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(table[columns].round(2).to_string(index=False))
        print()
        for row in table.itertuples():
            print(f"{row.id}: {row.metric}\n  compute: {row.compute_source}")
            print(f"  assumptions: {row.assumptions if row.status != 'not predicted' else ''}")
            if row.reason:
                print(f"  reason: {row.reason}")
    print()
    print(json.dumps(published_check.summary(table), indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
