"""Measure a study's cells where Snakemake is not installed (a borrowed GPU machine, a compute
node without the analysis environment), then analyse the results elsewhere with the
workflow.

``python -m dpscale.launch.without_snakemake STUDY.yaml... --interpreter python3
[--deadline-s S]``

Each study file is merged over config.yaml as the workflow merges it, and its cells are
planned by the same code. Every cell whose result is missing is launched exactly as rule
``bench_cell`` launches it (``python -m dpscale.launch --cell ... --out ... --log ...``),
one at a time, in the workflow's run order; a cell that has a result is never measured
again. The framework runs in the given interpreter (config ``interpreters``), since no
environment is built here. With a deadline, no cell starts once the time is spent, so a
caller's own time limit never cuts a cell in half.

Second measurements (``measure.again``) and drift probes' place after them are the
workflow's; a study measured here sets ``measure.again: []``, or the analysis, run on
another machine, would measure its noisy cells there.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dpscale.plan.cell import Cell
from dpscale.plan.config_files import study_config
from dpscale.plan.errors import ConfigError
from dpscale.plan.matrix import run_priorities
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES


@dataclass(frozen=True)
class PlannedCell:
    cell: Cell
    out: Path
    log: Path


def planned_cells(study_file: Path) -> list[PlannedCell]:
    """The study's cells in the workflow's run order, with the paths rule bench_cell uses."""
    checked, cells = plan_study(study_config([study_file]), STRATEGIES)
    if checked["measure"]["again"]:
        raise ConfigError(
            f"{study_file}: measure.again: {checked['measure']['again']!r} needs the workflow; "
            "allowed without Snakemake: []"
        )
    results = Path(checked["results_dir"]) / checked["study"]
    priority = run_priorities(cells)
    ordered = sorted(cells, key=lambda cell: -priority[cell.cell_id])
    return [
        PlannedCell(
            cell, cell.result_path(results), results / "logs" / "cells" / f"{cell.cell_id}.log"
        )
        for cell in ordered
    ]


def launch_command(planned: PlannedCell, interpreter: list[str]) -> list[str]:
    """What rule bench_cell runs for the cell, with the configured interpreter."""
    return [
        sys.executable,
        "-m",
        "dpscale.launch",
        "--cell",
        planned.cell.to_json(),
        "--interpreter",
        json.dumps(interpreter),
        "--out",
        str(planned.out),
        "--log",
        str(planned.log),
    ]


def run_cells(cells: list[PlannedCell], interpreter: list[str], deadline: float) -> int:
    """Launch each cell without a result until the deadline; how many were launched."""
    launched = 0
    for number, planned in enumerate(cells, 1):
        if planned.out.exists():
            continue
        if time.monotonic() >= deadline:
            print(f"dpscale: deadline reached; not started: {planned.cell.cell_id}", flush=True)
            continue
        print(f"dpscale: [{number}/{len(cells)}] {planned.cell.cell_id}", flush=True)
        planned.log.parent.mkdir(parents=True, exist_ok=True)
        with open(planned.log, "a", encoding="utf-8") as log:
            subprocess.run(launch_command(planned, interpreter), stderr=log, check=False)
        launched += 1
    return launched


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("studies", nargs="+", type=Path, help="study files, run in this order")
    parser.add_argument(
        "--interpreter",
        required=True,
        help="the framework's interpreter: a path, or a command as a JSON list",
    )
    parser.add_argument("--deadline-s", type=float, default=None, help="start no cell after this")
    args = parser.parse_args(argv)
    interpreter = (
        json.loads(args.interpreter)
        if args.interpreter.startswith("[")
        else shlex.split(args.interpreter)
    )
    deadline = time.monotonic() + (args.deadline_s if args.deadline_s is not None else float("inf"))
    try:
        studies = [(path, planned_cells(path)) for path in args.studies]
    except ConfigError as error:
        raise SystemExit(f"dpscale: config error: {error}") from None
    for path, cells in studies:
        print(f"dpscale: {path}: {len(cells)} cells", flush=True)
        run_cells(cells, interpreter, deadline)


if __name__ == "__main__":
    main()
