"""The link rate each published figure implies, and a post-hoc look at whether that rate is
the link's: each case predicted at the median rate its siblings on the same named link
imply (its own figure left out). Exploratory: the grouping was chosen after the implied
rates were seen, so nothing here is a blind check (docs/decisions/published-implied-rates.md).

    PYTHONPATH=src .venv/bin/python benchmarks/published_implied_rates.py
"""

from __future__ import annotations

import statistics
import sys

import pandas as pd

from dpscale.analysis.answers import published_check
from dpscale.analysis.answers.published_model import Profile, choose_profile, figure_at
from dpscale.analysis.answers.published_setup import setup_for
from dpscale.plan.published import published_files, read_cases
from dpscale.plan.published_cases import case_fields
from dpscale.steps.published import profiles

FILES = published_files({})


def sibling_rows(cases: list[dict], shapes: list[Profile], table: pd.DataFrame) -> list[dict]:
    """Per compared case with compared siblings on its link: the siblings' median implied
    rate, the case's figure predicted at it, and the error."""
    lookup = {case["id"]: case for case in cases}
    implied = table.dropna(subset=["implied_gbit_s"]).set_index("id")
    rows = []
    for case_id, row in implied.iterrows():
        siblings = implied[(implied["link"] == row["link"]) & (implied.index != case_id)]
        if siblings.empty or row["link_kind"] == "nvlink":
            continue
        rate = statistics.median(siblings["implied_gbit_s"]) * 1e9 / 8
        case, fields = lookup[case_id], case_fields(lookup[case_id])
        profile = choose_profile(shapes, case["model"], fields.compute_precision)
        setup = setup_for(case, lookup, profile)
        ratio = not pd.isna(row["error_pct"])
        reference = setup_for(lookup[fields.reference], lookup, profile) if ratio else None
        predicted = figure_at(profile.timeline, setup, reference)(rate)
        published = row["published"] if ratio else row["published"] / 100
        rows.append(
            {
                "id": case_id,
                "link": row["link"],
                "own implied Gbit/s": round(row["implied_gbit_s"], 2),
                "siblings' median Gbit/s": round(rate * 8 / 1e9, 2),
                "predicted": round(predicted if ratio else 100 * predicted, 2),
                "published": round(row["published"], 2),
                "error": (
                    f"{100 * (predicted - published) / published:+.1f}%"
                    if ratio
                    else f"{100 * (predicted - published):+.1f} pts"
                ),
            }
        )
    return rows


def main() -> int:
    cases = read_cases(FILES["cases"])
    shapes = profiles(FILES["profile"])
    table = published_check.check(cases, shapes)
    columns = ["id", "link_kind", "link", "implied_gbit_s", "implied_pct_of_nominal"]
    with pd.option_context("display.width", 200):
        print(table.dropna(subset=["implied_gbit_s"])[columns].round(2).to_string(index=False))
        print()
        print(pd.DataFrame(sibling_rows(cases, shapes, table)).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
