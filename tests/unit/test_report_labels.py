"""One set of report label keys: every report() entry has a ``name``, sits in a ``tables``,
``figures`` or ``interactive figures`` subcategory, and each figure in ``interactive
figures`` comes in both views, which is what makes Snakemake's report show one entry with a
static/interactive toggle (its rule: a second label with exactly two values, each on half of
the subcategory's results)."""

from __future__ import annotations

import ast
import re
from collections import Counter, defaultdict

from conftest import REPO

SUBCATEGORIES = {"tables", "figures", "interactive figures"}
VIEWS = {"static", "interactive"}


def report_entries() -> list[dict]:
    """Every report(...) call's keyword arguments, parsed from the rules' text."""
    entries = []
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"report\(\n(.*?)\n\s*\),?\n", text, re.S):
            body = re.sub(r"\n\s*", " ", match.group(1)).strip()
            call = ast.parse(f"f({body})", mode="eval").body
            keywords = {k.arg: k.value for k in call.keywords}
            entry = {
                key: ast.literal_eval(value)
                for key, value in keywords.items()
                if key in {"category", "subcategory", "labels"}
            }
            entry["where"] = path.name
            entries.append(entry)
    return entries


def test_the_parser_sees_every_report_entry():
    text = "".join(p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk"))
    assert len(report_entries()) == text.count("report(\n") > 20


def test_every_entry_has_a_name_a_known_subcategory_and_no_other_label_key():
    for entry in report_entries():
        assert entry.get("subcategory") in SUBCATEGORIES, entry
        labels = entry["labels"]
        assert "name" in labels, entry
        allowed = {"name", "view"} if entry["subcategory"] == "interactive figures" else {"name"}
        assert set(labels) <= allowed, entry


def test_each_interactive_figure_has_both_views_so_the_report_shows_a_toggle():
    views = defaultdict(Counter)
    for entry in report_entries():
        if entry["subcategory"] == "interactive figures":
            assert entry["labels"].get("view") in VIEWS, entry
            views[(entry["category"], entry["labels"]["name"])][entry["labels"]["view"]] += 1
    assert views, "no figure has an interactive view"
    for figure, counted in views.items():
        assert counted == Counter({"static": 1, "interactive": 1}), (figure, counted)
