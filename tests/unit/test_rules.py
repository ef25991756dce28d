"""Workflow rules: a cell takes both bench slots of the machine, and a job that can start before
the last cell has finished takes one, so it never runs beside a measuring cell (two such jobs
may run side by side; docs/decisions/benchmark-cells-never-overlap.md)."""

from __future__ import annotations

import re

from conftest import REPO

RULES = REPO / "workflow" / "rules"
# what waits for every cell: every cell's result, the aggregate's tables, and the targets
# that only collect
AFTER_EVERY_CELL = re.compile(
    r"cell_results\(\)|\{TABLES\}|rules\.|training_tables\(|tidy_tables\b"
)
TARGETS = {"cells", "envs"}


def rule_blocks() -> dict[str, str]:
    blocks = {}
    for path in sorted(RULES.glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(
            r"^(?:rule|checkpoint) (\w+):\n(.*?)(?=^\S|\Z)", text, re.M | re.S
        ):
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
    without = sorted(name for name in early if not re.search(r"bench_slot=[12]\b", blocks[name]))
    assert without == [], f"rules that can run beside a cell without the bench slot: {without}"


def test_a_cell_takes_every_bench_slot_of_the_profile():
    profile = (REPO / "profiles" / "default" / "config.yaml").read_text(encoding="utf-8")
    slots = int(re.search(r"- bench_slot=(\d+)", profile).group(1))
    measuring = [name for name, block in rule_blocks().items() if "dpscale.launch --cell" in block]
    assert measuring, "no rule launches a cell"
    for name in measuring:
        assert f"bench_slot={slots}," in rule_blocks()[name], f"{name} leaves a slot free"


# a rule, a checkpoint or a `use rule ... as name with:`, and the line after its header
RULE_HEADER = re.compile(
    r"^(?:(?:rule|checkpoint) (\w+)|use rule \S+(?: from \w+)? as (\w+)(?: with)?):?\n(.*)$",
    re.M,
)


def undocumented_rules(text: str) -> tuple[list[str], list[str]]:
    """Every rule named in a rule file's text, and those whose body does not open with a
    docstring (Snakemake reads it as the rule's; ``snakemake --list-rules`` prints it)."""
    names, bare = [], []
    for match in RULE_HEADER.finditer(text):
        name = match.group(1) or match.group(2)
        names.append(name)
        if not re.match(r'\s+"""\S', match.group(3)):
            bare.append(name)
    return names, bare


def test_every_rule_says_what_it_makes_from_what():
    names, bare = [], []
    for path in [REPO / "Snakefile", *sorted(RULES.glob("*.smk"))]:
        found, without = undocumented_rules(path.read_text(encoding="utf-8"))
        names += found
        bare += [f"{path.relative_to(REPO)}: {name}" for name in without]
    assert {"all", "bench_cell", "quality_review", "measure_again", "comm_model"} <= set(names)
    assert bare == [], f"rules without a docstring (snakemake --list-rules shows them bare): {bare}"


def test_the_docstring_check_sees_a_bare_rule():
    text = (
        'rule made:\n    """Made from nothing."""\n    output:\n        "a"\n\n\n'
        'rule bare:\n    output:\n        "b"\n\n\n'
        "checkpoint bare_checkpoint:\n    input:\n        'b'\n\n\n"
        "use rule made as again with:\n    output:\n        'c'\n"
    )
    assert undocumented_rules(text) == (
        ["made", "bare", "bare_checkpoint", "again"],
        ["bare", "bare_checkpoint", "again"],
    )


def test_every_step_rule_has_a_step_that_resolves():
    """The rules whose body is workflow/scripts/step.py, and dpscale.steps.STEPS, name the same
    rules, and each entry imports (a job imports its own step's module only, when it runs)."""
    from dpscale.steps import STEPS, steps_of

    stepped = {name for name, block in rule_blocks().items() if "scripts/step.py" in block}
    assert stepped == set(STEPS)
    assert all(all(map(callable, steps_of(name))) for name in STEPS)
