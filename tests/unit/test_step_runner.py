"""A rule of several steps runs them in order in one job (dpscale.steps.run_rule): a later step
reads what an earlier one wrote by its name in the rule, a name given to an input and an
output is refused, and no step's plot settings reach the next."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib
import pytest

import dpscale.steps as steps


class Named(dict):
    """The part of a Snakemake Namedlist that run_rule reads: its named entries."""


def job(rule: str, tmp_path: Path, inputs: dict[str, Any], outputs: dict[str, Any]) -> Any:
    log = tmp_path / f"{rule}.log"
    return SimpleNamespace(
        rule=rule, log=[str(log)], input=Named(inputs), output=Named(outputs), params=Named()
    )


def count_rows(inputs, outputs, params) -> str:
    rows = Path(inputs["table"]).read_text().splitlines()
    Path(outputs["count"]).write_text(str(len(rows)))
    return f"counted {len(rows)}"


def double_count(inputs, outputs, params) -> str:
    count = int(Path(inputs["count"]).read_text())  # what the step before wrote
    Path(outputs["doubled"]).write_text(str(2 * count))
    return f"doubled {count}"


def test_a_later_step_reads_what_an_earlier_one_wrote(tmp_path, monkeypatch):
    monkeypatch.setattr(steps, "steps_of", lambda rule: [count_rows, double_count])
    table = tmp_path / "table.csv"
    table.write_text("a\nb\nc\n")
    outputs = {"count": str(tmp_path / "count.txt"), "doubled": str(tmp_path / "doubled.txt")}
    steps.run_rule(job("two_steps", tmp_path, {"table": str(table)}, outputs))
    assert (tmp_path / "doubled.txt").read_text() == "6"
    assert (tmp_path / "two_steps.log").read_text().splitlines() == ["counted 3", "doubled 3"]


def test_a_name_given_to_an_input_and_an_output_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(steps, "steps_of", lambda rule: [count_rows, double_count])
    same = {"table": str(tmp_path / "table.csv")}
    with pytest.raises(ValueError, match=r"rule two_steps: \['table'\] name both"):
        steps.run_rule(job("two_steps", tmp_path, same, {**same, "doubled": "d"}))


def test_one_steps_theme_does_not_reach_the_next(tmp_path, monkeypatch):
    seen: list[Any] = []

    def themed(inputs, outputs, params) -> str:
        matplotlib.rcParams["axes.grid"] = not matplotlib.rcParams["axes.grid"]
        return "themed"

    def plain(inputs, outputs, params) -> str:
        seen.append(matplotlib.rcParams["axes.grid"])
        return "plain"

    before = matplotlib.rcParams["axes.grid"]
    monkeypatch.setattr(steps, "steps_of", lambda rule: [themed, plain])
    steps.run_rule(job("two_steps", tmp_path, {}, {}))
    assert seen == [before] and matplotlib.rcParams["axes.grid"] == before


def test_every_rule_of_several_steps_gives_each_file_one_name():
    """The workflow's rules of several steps, parsed: no name is both an input and an output."""
    from test_rules import rule_blocks

    several = [rule for rule, entries in steps.STEPS.items() if len(entries) > 1]
    assert several, "no rule runs several steps"
    for rule in several:
        block = rule_blocks()[rule]
        inputs = section_names(block, "input", "output")
        outputs = section_names(block, "output", "log")
        assert outputs and not inputs & outputs, (rule, sorted(inputs & outputs))


def section_names(block: str, name: str, end: str) -> set[str]:
    """The keyword names of one section of a rule's text (``name=`` at its first indent)."""
    body = block.split(f"    {name}:\n", 1)[1].split(f"    {end}:\n", 1)[0]
    return {
        line.strip().split("=", 1)[0]
        for line in body.splitlines()
        if line.startswith(" " * 8) and line[8:9].isidentifier() and "=" in line
    }
