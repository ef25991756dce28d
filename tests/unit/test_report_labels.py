"""One set of report label keys: every report() entry has a ``name`` and sits in a
``tables`` or ``figures`` subcategory, and no figure is in the report twice (one plotting
stack draws each figure; the report embeds one view of it:
docs/decisions/report-pages-with-data.md)."""

from __future__ import annotations

import ast
import re
from collections import Counter

from conftest import REPO

SUBCATEGORIES = {"tables", "figures"}


def report_entries() -> list[dict]:
    """Every report(...) and page(...) call's keyword arguments (page: a report entry when
    its tables have rows, common.smk), parsed from the rules' text."""
    entries = []
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"(?:report|page)\(\n(.*?)\n\s*\),?\n", text, re.S):
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
    calls = text.count("report(\n") + text.count("page(\n")
    assert len(report_entries()) == calls > 20


def test_every_entry_has_a_name_a_known_subcategory_and_no_other_label_key():
    for entry in report_entries():
        assert entry.get("subcategory") in SUBCATEGORIES, entry
        assert set(entry["labels"]) == {"name"}, entry


def test_no_figure_is_in_the_report_twice():
    names = Counter(
        (entry["category"], entry["subcategory"], entry["labels"]["name"])
        for entry in report_entries()
    )
    assert [name for name, count in names.items() if count > 1] == []
