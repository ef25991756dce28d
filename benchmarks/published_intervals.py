"""The link-only prediction's leave-one-source-out 80% intervals over every published case
with an efficiency (studies/published/cases.yaml and series.yaml), by the protocol of
docs/decisions/published-conformal-intervals.md, and their measured coverage.

    PYTHONPATH=src .venv/bin/python benchmarks/published_intervals.py
"""

from __future__ import annotations

import json
import sys

import pandas as pd

from dpscale.analysis.answers import published_intervals
from dpscale.steps.published import interval_table


def main() -> int:
    table = interval_table()
    with pd.option_context("display.width", 200, "display.max_colwidth", 50):
        print(table.round(1).to_string(index=False))
    print(json.dumps(published_intervals.coverage_summary(table), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
