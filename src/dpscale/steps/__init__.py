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

from dpscale.render.png import compact_png

Step = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], str]

# rule -> "module.function" in dpscale.steps. A job imports its own step's module only, not
# every step's: each job is a Python start, and the other modules' imports (altair, the
# comparison page) cost a few tenths of a second of CPU per job
# (docs/measurements/2026-11-27-suite-cuts.md). tests/unit/test_rules.py resolves every entry.
STEPS: dict[str, str] = {
    "quality_review": "tables.quality_review",
    "aggregate": "tables.aggregate",
    "html_tables": "tables.html_tables",
    "data_tables": "tables.data_tables",
    "figures": "tables.figures",
    "accuracy": "tables.accuracy",
    "collectives": "tables.collectives",
    "imports": "imports.imports",
    "drift": "tables.drift",
    "loss_breakdown": "tables.loss_breakdown",
    "startup": "tables.startup",
    "cost": "findings.cost",
    "remedies": "findings.remedies",
    "findings": "findings.findings",
    "post_vs_run": "findings.post_vs_run",
    "answer_figures": "findings.answer_figures",
    "remedies_figure": "findings.remedies_figure",
    "mfu_figure": "findings.mfu_figure",
    "comm_model": "model.comm_model",
    "published_cases": "published.published_cases",
    "compare": "compare.compare",
    "cluster_predictions": "predict.cluster_predictions",
}


def step_of(rule: str) -> Step:
    """The step function of ``rule``, its module imported now."""
    module, function = STEPS[rule].split(".")
    return getattr(importlib.import_module(f"dpscale.steps.{module}"), function)


def named(items: Any) -> dict[str, Any]:
    """A Snakemake Namedlist's named entries as a plain dict (lists stay lists)."""
    return {name: (list(value) if isinstance(value, list) else value) for name, value in items}


def run_rule(smk: Any) -> None:
    """Run the step of rule ``smk.rule`` with the rule's files; its output goes to the log."""
    step = step_of(smk.rule)
    log = Path(smk.log[0]) if smk.log else None
    with contextlib.ExitStack() as stack:
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            handle = stack.enter_context(log.open("w", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stdout(handle))
            stack.enter_context(contextlib.redirect_stderr(handle))
        outputs = named(smk.output.items())
        print(step(named(smk.input.items()), outputs, named(smk.params.items())))
        compact_figures(outputs)


def compact_figures(outputs: Mapping[str, Any]) -> None:
    """Every PNG among a step's outputs, as an 8-bit palette PNG of the same size."""
    for path in outputs.values():
        if isinstance(path, str) and path.endswith(".png") and Path(path).is_file():
            compact_png(path)
