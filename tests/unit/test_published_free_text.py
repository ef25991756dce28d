"""The published check decides nothing from a case's words or its id: every free-text value
of the real cases file rewritten gives the same predictions, and no module of the check
names a case of the file."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd

from conftest import REPO
from dpscale.analysis.answers.published_check import check
from dpscale.plan.published import DEFAULT_PROFILE, read_cases
from dpscale.plan.published_cases import check_cases
from dpscale.steps.published import profiles

CASES = read_cases(REPO / "studies" / "published" / "cases.yaml")
PROFILES = profiles(REPO / DEFAULT_PROFILE)
# the typed fields whose strings are values the check may read (schema enums, ids, the
# model's name); every other string of a case is words
TYPED = {
    ("id",),
    ("model",),
    ("overlap",),
    ("wire_precision",),
    ("compute_precision",),
    ("baseline",),
    ("confidence",),
    ("intra_node_link", "kind"),
    ("inter_node_link", "rdma"),
    ("single_device", "borrowed_from"),
    ("published", "kind"),
    ("published", "reference"),
}
PREDICTION = [
    "predicted",
    "published",
    "error_points",
    "error_pct",
    "implied_gbit_s",
    "implied_pct_of_nominal",
    "link_kind",
    "status",
    "basis",
]


def rewritten(value: Any, path: tuple[str, ...] = ()) -> Any:
    """``value`` with every string outside TYPED (and outside traffic) replaced by words
    that say nothing: reversed, so each keeps its length and no keyword survives."""
    if path[:1] == ("traffic",) or path in TYPED:
        return value
    if isinstance(value, dict):
        return {key: rewritten(child, (*path, str(key))) for key, child in value.items()}
    if isinstance(value, list):
        return [rewritten(child, path) for child in value]
    if isinstance(value, str):
        return "lorem ipsum " + value[::-1]
    return value


def test_rewriting_every_free_text_value_changes_no_prediction():
    changed = [rewritten(copy.deepcopy(case)) for case in CASES]
    check_cases(changed, "rewritten")  # still a valid file
    for old, new in zip(CASES, changed, strict=True):
        for key in ("framework", "precision", "gpu", "intra_node_link", "published"):
            assert old[key] != new[key], (old["id"], key)  # every one of them rewritten
    before, after = check(CASES, PROFILES), check(changed, PROFILES)
    pd.testing.assert_frame_equal(before[["id", *PREDICTION]], after[["id", *PREDICTION]])
    assert before["predicted"].notna().sum() >= 16  # the rows compared, not all NaN


SOURCES = [
    *sorted((REPO / "src" / "dpscale" / "analysis" / "answers").glob("published_*.py")),
    *sorted((REPO / "src" / "dpscale" / "plan").glob("published*.py")),
    REPO / "src" / "dpscale" / "steps" / "published.py",
    REPO / "src" / "dpscale" / "render" / "published_page.py",
    REPO / "workflow" / "schemas" / "published_cases.schema.yaml",
    *sorted((REPO / "benchmarks").glob("published_*.py")),
]


def test_no_module_of_the_check_names_a_case():
    assert len(SOURCES) >= 9 and all(path.is_file() for path in SOURCES)
    found = [
        f"{Path(path).relative_to(REPO)}: {case['id']}"
        for path in SOURCES
        for case in CASES
        if case["id"] in path.read_text(encoding="utf-8")
    ]
    assert found == []
