"""The calibrated law on the published series (studies/published/series.yaml) by the protocol
of docs/decisions/calibrated-published-series.md: per series, the calibrated prediction of
the largest scale beside the link-only one and the two baselines, then the verdict.

    PYTHONPATH=src .venv/bin/python benchmarks/published_series.py
"""

from __future__ import annotations

import json
import sys

import pandas as pd

from dpscale.analysis.answers import published_check, published_series
from dpscale.plan.published import published_files, read_cases
from dpscale.steps.published import profiles

SERIES = "studies/published/series.yaml"
COLUMNS = [
    "series",
    "calibrated_on",
    "predicted_devices",
    "published_pct",
    "calibrated_pct",
    "calibrated_lo_pct",
    "calibrated_hi_pct",
    "link_only_pct",
    "hold_pct",
    "repeat_pct",
    "g",
    "s_per_doubling",
]


def main() -> int:
    cases = read_cases(SERIES)
    check = published_check.check(cases, profiles(published_files({})["profile"]))
    table = published_series.series_table(cases, check)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table[COLUMNS].round(1).to_string(index=False))
        print()
        print(published_series.errors(table).drop(columns="source").to_string(index=False))
        for row in table.itertuples():
            print(f"{row.series}: {row.status}")
    print(json.dumps(published_series.verdict(table), indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
