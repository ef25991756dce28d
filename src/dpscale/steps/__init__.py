"""The bodies of the workflow's analysis and report rules, one function per rule.

Every such rule runs ``workflow/scripts/step.py`` (Snakemake's ``script:`` directive), which
calls :func:`run_rule`: the rule's name picks its function here, and the function gets the
rule's named inputs, outputs and params as plain mappings, so each file name is written once,
in its rule. A step reads its inputs, calls ``analysis`` for the numbers and ``render`` for
the pages and figures, writes its outputs and returns one line for the rule's log. Which rows
an analysis reads (with or without the communication remedies) is the analysis' own business.
Every PNG a step writes is then stored as an 8-bit palette PNG (render.png): the report embeds
each figure, and its size is the report's size.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dpscale.render.plot_settings import own_plot_settings
from dpscale.render.png import compact_png

Step = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], str]

# rule -> its steps, each "module.function" in dpscale.steps. A job imports its own steps'
# modules only, not every step's: each job is a Python start, and the other modules' imports
# (altair, the comparison page) cost a few tenths of a second of CPU per job
# (docs/measurements/2026-11-27-suite-cuts.md). A rule of several steps runs them in order in
# one job: most of a step's second of CPU is importing pandas, scipy and the plotting
# libraries, which one job pays once (docs/decisions/analysis-jobs.md). Each step then reads
# the rule's inputs and what the steps before it wrote, by their names in the rule.
# tests/unit/test_rules.py resolves every entry.
STEPS: dict[str, tuple[str, ...]] = {
    "quality_review": ("results.quality_review",),
    "aggregate": ("results.aggregate",),
    "figures_and_tables": (
        "tables.figures",
        "tables.html_tables",
        "tables.startup",
        "findings.mfu_figure",
    ),
    "data_tables": ("data.data_tables",),
    "accuracy": ("tables.accuracy",),
    "collectives": ("tables.collectives",),
    "imports": ("imports.imports",),
    "drift": ("tables.drift",),
    "loss_breakdown": ("tables.loss_breakdown",),
    "findings": (
        "findings.cost",
        "findings.findings",
        "findings.post_vs_run",
        "findings.answer_figures",
    ),
    "remedies": ("findings.remedies",),
    "remedies_figure": ("findings.remedies_figure",),
    "comm_model": ("model.comm_model",),
    "published_cases": ("published.published_cases",),
    "compare": ("compare.compare",),
    "cluster_predictions": ("predict.cluster_predictions",),
}


def steps_of(rule: str) -> list[Step]:
    """The step functions of ``rule``, in order, their modules imported now."""
    steps = []
    for entry in STEPS[rule]:
        module, function = entry.split(".")
        steps.append(getattr(importlib.import_module(f"dpscale.steps.{module}"), function))
    return steps


def step_of(rule: str) -> Step:
    """The step function of a rule of one step, its module imported now."""
    (step,) = steps_of(rule)
    return step


def named(items: Any) -> dict[str, Any]:
    """A Snakemake Namedlist's named entries as a plain dict (lists stay lists)."""
    return {name: (list(value) if isinstance(value, list) else value) for name, value in items}


def run_rule(smk: Any) -> None:
    """Run the steps of rule ``smk.rule`` with the rule's files; their lines go to the log."""
    steps = steps_of(smk.rule)
    log = Path(smk.log[0]) if smk.log else None
    with contextlib.ExitStack() as stack:
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            handle = stack.enter_context(log.open("w", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stdout(handle))
            stack.enter_context(contextlib.redirect_stderr(handle))
        inputs, outputs = named(smk.input.items()), named(smk.output.items())
        several = len(steps) > 1
        if several:  # a later step reads what an earlier one wrote, by its name
            inputs = readable_files(smk.rule, inputs, outputs)
        params = named(smk.params.items())
        settings = own_plot_settings if several else contextlib.nullcontext
        for step in steps:
            with settings():
                print(step(inputs, outputs, params), flush=True)
        compact_figures(outputs)


def readable_files(rule: str, inputs: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """A rule's inputs and outputs under one name each: what its steps read. A name given
    to both would leave a step reading the wrong file, so it is an error."""
    shared = sorted(inputs.keys() & outputs.keys())
    if shared:
        raise ValueError(f"rule {rule}: {shared} name both an input and an output")
    return {**inputs, **outputs}


def compact_figures(outputs: Mapping[str, Any]) -> None:
    """Every PNG among a step's outputs, as an 8-bit palette PNG of the same size."""
    for path in outputs.values():
        if isinstance(path, str) and path.endswith(".png") and Path(path).is_file():
            compact_png(path)
