"""Print dpscale's scale-out prediction for each published case (studies/published) and the
summary of its errors (issue 50 item 4).

    PYTHONPATH=src .venv/bin/python benchmarks/published_check.py
"""

from __future__ import annotations

import json
import sys

import pandas as pd

from dpscale.analysis.answers import published_summary
from dpscale.plan.published import published_files
from dpscale.steps.published import check_table

# the workflow's defaults (config published_cases): studies/published/cases.yaml and the
# H200 profile table under evidence/, as the rule published_cases reads them
FILES = published_files({})


def main() -> int:
    table = check_table(FILES["cases"], FILES["profile"])
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
    print(json.dumps(published_summary.summary(table), indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
