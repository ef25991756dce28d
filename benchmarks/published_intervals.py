"""The link-only prediction's leave-one-source-out 80% intervals over every published case
with an efficiency (studies/published/cases.yaml and series.yaml), by the protocol of
docs/decisions/published-conformal-intervals.md, and their measured coverage.

    PYTHONPATH=src .venv/bin/python benchmarks/published_intervals.py
"""

from __future__ import annotations

import json
import sys

import pandas as pd

from dpscale.analysis.answers import published_check, published_intervals
from dpscale.plan.published import published_files, read_cases
from dpscale.steps.published import profiles

FILES = ("studies/published/cases.yaml", "studies/published/series.yaml")


def main() -> int:
    cases = [case for path in FILES for case in read_cases(path)]
    check = published_check.check(cases, profiles(published_files({})["profile"]))
    table = published_intervals.held_out(published_intervals.efficiency_rows(cases, check))
    with pd.option_context("display.width", 200, "display.max_colwidth", 50):
        print(table.round(1).to_string(index=False))
    print(json.dumps(published_intervals.coverage_summary(table), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
