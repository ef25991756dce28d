"""Print dpscale's scale-out prediction for each published case (studies/published) and the
summary of its errors (issue 50 item 4): `dpscale published` on the workflow's own cases
and profile, then the summary as JSON.

    PYTHONPATH=src .venv/bin/python benchmarks/published_check.py
"""

from __future__ import annotations

import json
import sys

from dpscale.analysis.answers import published_summary
from dpscale.plan.published import published_files
from dpscale.steps.published import check_table, published_file

# the workflow's defaults (config published_cases): studies/published/cases.yaml and the
# H200 profile table under evidence/, as the rule published_cases reads them
FILES = published_files({})


def main() -> int:
    print(published_file(FILES["cases"], FILES["profile"]))
    print()
    table = check_table(FILES["cases"], FILES["profile"])
    print(json.dumps(published_summary.summary(table), indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
