"""Workflow rules: a job that can start before the last cell has finished holds the bench slot,
so it never runs beside a measuring cell (docs/decisions/benchmark-cells-never-overlap.md)."""

from __future__ import annotations

import re

from conftest import REPO

RULES = REPO / "workflow" / "rules"
# what waits for every cell: every cell's result, the aggregate's tables, and the targets
# that only collect
AFTER_EVERY_CELL = re.compile(r"cell_results\(\)|\{TABLES\}|rules\.|training_tables\(")
TARGETS = {"cells", "envs"}


def rule_blocks() -> dict[str, str]:
    blocks = {}
    for path in sorted(RULES.glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", text, re.M | re.S):
            blocks[match.group(1)] = match.group(2)
    return blocks


def input_section(block: str) -> str:
    found = re.search(r"^    input:\n(.*?)(?=^    \w+:|\Z)", block, re.M | re.S)
    return found.group(1) if found else ""


def test_every_job_that_can_run_beside_a_cell_holds_the_bench_slot():
    blocks = rule_blocks()
    assert {"bench_cell", "prepare_digits", "aggregate", "accuracy"} <= set(blocks)
    early = {
        name
        for name, block in blocks.items()
        if name not in TARGETS and not AFTER_EVERY_CELL.search(input_section(block))
    }
    assert {"bench_cell", "build_env", "prepare_digits", "accuracy", "collectives"} <= early
    assert "aggregate" not in early and "figures" not in early
    without = sorted(name for name in early if "bench_slot=1" not in blocks[name])
    assert without == [], f"rules that can run beside a cell without the bench slot: {without}"
