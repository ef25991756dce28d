"""``dpscale status``, ``rerun-failed`` and ``rerun``: where a study stands, and its cells
measured again. Each reads the study's result files and calls the workflow as ``dpscale
run`` does (cli_workflow.py: the same Snakefile, ``--configfile`` and report)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpscale import cli_workflow as workflow

if TYPE_CHECKING:
    from dpscale.plan.progress import Progress


def _planned_progress(files: list[Path], writes: bool = True) -> tuple[dict[str, Any], Progress]:
    """The checked config and the study's progress read from its result files; one line
    where this user may not read them. ``writes=False``: the study is only read (status),
    so its folders need not be writable (cli_workflow.planned)."""
    from dpscale.plan.progress import study_progress

    config, cells = workflow.planned(files, writes=writes)
    folder = workflow.study_folder(config)
    try:
        return config, study_progress(config["study"], folder / "cells", cells)
    except PermissionError as error:
        raise SystemExit(workflow.cannot_read(error.filename, folder)) from None


def _words(files: list[Path]) -> str:
    """The study files as a command takes them (nothing for the default study)."""
    return "".join(f" {path}" for path in files)


def status(args: argparse.Namespace) -> None:
    """The study's cells by state (plan.progress), and a line where its report is older
    than its tables (a cell rerun, or a study still running, since dpscale report)."""
    from dpscale.plan.config_rules import node_cpus_words
    from dpscale.plan.progress import progress_lines
    from dpscale.plan.rerun import report_is_stale

    config, progress = _planned_progress(args.files, writes=False)
    lines = progress_lines(progress, reasons=args.reasons)
    if config["accelerator"] == "cuda":  # a GPU study's ranks on SLURM: the CPUs each asks
        lines.append(node_cpus_words(config))
    report = workflow.report_file(config)
    if report_is_stale(report, workflow.study_folder(config) / "tables"):
        lines.append(
            f"the report ({report}) is older than its tables: "
            f"run dpscale report{_words(args.files)}"
        )
    print("\n".join(lines))


def rerun_failed(args: argparse.Namespace) -> None:
    """Snakemake with ``--forcerun`` on exactly the failed and oom cells' results (and so
    what reads them); a result is replaced only when its cell has run again."""
    from dpscale.plan.progress import failed_paths

    paths = failed_paths(_planned_progress(args.files)[1])
    if not paths:
        print("dpscale: no failed or oom cell in this study: nothing to rerun")
        return
    command = workflow.workflow_command(
        args.files, [*args.snakemake_args, "--forcerun", *map(str, paths)]
    )
    print(f"dpscale: rerunning {len(paths)} cell(s): {' '.join(command)}", flush=True)
    if not args.dry_run:
        os.execv(command[0], command)


def _to_measure(progress: Progress, cell_id: str) -> int:
    """The study's other cells still without a result that the plan does not skip."""
    return sum(
        state.status == "pending" and not state.cell.skip_reason and state.cell.cell_id != cell_id
        for state in progress.states
    )


def _forced(path: Path, alone: bool, dry_run: bool, snakemake_args: list[str]) -> list[str]:
    """Snakemake's words after the study files: the cell's result as the target where it
    runs ``alone`` (else the default target: every table, as ``dpscale run``), the user's
    options, ``-n`` for --dry-run, and ``--forcerun`` on the result last (it takes every
    word up to the next option)."""
    targets = [str(path)] if alone else []
    return [*targets, *snakemake_args, *(["-n"] * dry_run), "--forcerun", str(path)]


def rerun(args: argparse.Namespace) -> None:
    """One cell measured again (``--forcerun`` on its result), then the tables and the
    report brought up to date as ``dpscale run`` does, in the same two Snakemake calls. In
    a study with cells still to measure the tables cannot be made: the cell runs alone and
    a line says so. ``--dry-run``: Snakemake's own (``-n``), the jobs it would run."""
    from dpscale.plan.rerun import cell_id_of, keep_previous

    files = workflow.study_files(args)
    workflow.readable(files)
    config, progress = _planned_progress(files)
    ids = [state.cell.cell_id for state in progress.states]
    try:
        cell_id = cell_id_of(args.cell, progress.cells_dir, ids)
    except ValueError as error:
        raise SystemExit(f"dpscale: rerun: {error}") from None
    path = progress.cells_dir / f"{cell_id}.json"
    dry = args.dry_run or bool(workflow.DRY_RUN & set(args.snakemake_args))
    others = _to_measure(progress, cell_id)
    if others:
        print(
            f"dpscale: rerun: study {config['study']} has {others} other "
            f"cell{'s' * (others != 1)} without a result: {cell_id} runs alone, without the "
            f"tables and the report; dpscale run{_words(files)} measures the rest and writes them",
            flush=True,
        )
    kept = None if dry else keep_previous(path)
    if kept:
        print(f"dpscale: rerun: {cell_id}: the previous result stays in {kept}", flush=True)
    extra = _forced(path, bool(others), args.dry_run, args.snakemake_args)
    code = workflow.call(workflow.workflow_command(files, extra))
    if code == 0 and not (dry or others):
        code = workflow.write_report(files, args.snakemake_args)
    if code:
        raise SystemExit(code)


def add_commands(commands) -> None:
    """status, rerun-failed and rerun."""
    state = workflow.command_parser(
        commands,
        "status",
        "example: dpscale status mystudy.yaml --reasons 20",
        help="cells done, ok, failed and pending, why, and the time left",
    )
    state.add_argument("files", nargs="*", type=Path, help="study files (YAML), as --configfile")
    state.add_argument(
        "--reasons",
        type=int,
        default=10,
        help="failed cells, and reasons cells were skipped (with their cells), listed (10)",
    )
    state.set_defaults(func=status)
    failed = workflow.command_parser(
        commands,
        "rerun-failed",
        "example: dpscale rerun-failed mystudy.yaml -- --profile slurm",
        help="rerun exactly the failed and oom cells (snakemake --forcerun on their results); "
        "Snakemake's own options after --",
    )
    failed.add_argument("files", nargs="*", type=Path, help="study files (YAML), as --configfile")
    failed.add_argument("--dry-run", action="store_true", help="print the command only")
    failed.set_defaults(func=rerun_failed)
    one = workflow.command_parser(
        commands,
        "rerun",
        "example: dpscale rerun mystudy.yaml <cell id as dpscale status prints it> --dry-run",
        help="measure one cell again (snakemake --forcerun on its result), then bring the "
        "tables and the report up to date; Snakemake's own options after --",
    )
    workflow.study_arguments(one)
    one.add_argument(
        "cell",
        help="the cell: its id as dpscale status prints it, or its result's path "
        "(results/<study>/cells/<id>.json; .json may be left out)",
    )
    one.add_argument(
        "--dry-run", action="store_true", help="show what would rerun (snakemake -n), run nothing"
    )
    one.set_defaults(func=rerun)
