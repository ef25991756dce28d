"""Run one cell: decide whether it can run here, start its processes, and make sure a
result file exists afterwards whatever happened (ok, oom, failed or skipped, with a reason).

Read top to bottom, this module is the cell's story: the checks (dpscale.launch.checks),
the environment, starting and waiting (dpscale.launch.supervise), settling the result
(dpscale.launch.failures) and amending it with what the launch itself saw.

Benchmark processes of different cells never overlap on one machine: each launch holds an
exclusive lock for its devices (the host's CPUs, or the visible GPUs) while it measures.
Inside a SLURM job the scheduler gives each cell its own CPUs and GPUs, so it takes the lock
shared (jobs do not wait for each other; a local cell on the node waits for them);
multi-process cells start their ranks as SLURM tasks (dpscale.launch.slurm.allocation), after
a probe step that checks each node gave the job what the cell needs, and the result's system
description records what the job got (``system.allocation``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from dpscale.launch import checks, contention, failures, supervise
from dpscale.launch.emulation import interventions, netns
from dpscale.launch.kinds import Placement, kind, netns_placement, runner_argv, srun_placement
from dpscale.launch.ports import free_port
from dpscale.launch.setup.interpreters import Interpreter
from dpscale.launch.slurm import allocation as slurm
from dpscale.plan.cell import Cell
from dpscale.plan.paths import import_root
from dpscale.plan.progress import (
    STUDY_CELLS_ENV,
    cells_left,
    finished_line,
    parse_study_cells,
)
from dpscale.plan.result import now_iso, rewrite_result
from dpscale.plan.strategy import Strategy
from dpscale.registry import strategy
from dpscale.runner import startup
from dpscale.runner.sysinfo import git_commit
from dpscale.runner.temporary import SCRATCH_VARIABLE


def launch(cell: Cell, out: Path, interpreter: Interpreter | Path, log_path: Path) -> str:
    """Measure ``cell`` into ``out``; ``interpreter`` runs its processes (a Path: the
    prefix of a built environment). The result records the launcher's own footprint.

    A bug of the launcher's own still leaves a result: the cell ends ``failed`` with the
    exception's last line and the log's path, and its traceback goes to the log."""
    started_at = now_iso()
    try:
        status, sampler, applied = _launch(cell, out, interpreter, log_path)
    except Exception as error:  # noqa: BLE001 (any bug: a cell always leaves a result)
        return _launcher_failed(cell, out, log_path, error, started_at)
    try:
        quality = finish_result(out, sampler, cell, applied)
    except Exception:  # noqa: BLE001 (the measured result stays as it was written)
        _log_traceback(log_path, "amending the result failed; it is kept as the cell wrote it")
        return status
    if quality is not None:
        with open(log_path, "a") as log:
            print(f"[dpscale] measurement quality: {quality}", file=log, flush=True)
    return status


def _launcher_failed(
    cell: Cell, out: Path, log_path: Path, error: Exception, started_at: str
) -> str:
    """Record a cell the launcher itself failed; a result that cannot be written (OSError)
    still ends the job, as nothing was recorded."""
    _log_traceback(log_path, "the launcher failed")
    last = traceback.format_exception_only(error)[-1].strip()
    reason = f"the launcher failed: {last} (traceback in {log_path})"
    failures.write_status(cell, out, "failed", reason, started_at)
    return "failed"


def _log_traceback(log_path: Path, what: str) -> None:
    with suppress(OSError), open(log_path, "a") as log:
        print(f"[dpscale] {what}:", file=log)
        traceback.print_exc(file=log)


def _launch(
    cell: Cell, out: Path, interpreter: Interpreter | Path, log_path: Path
) -> tuple[str, contention.ContentionSampler | None, dict | None]:
    """The launch itself: its status, and the sampler and the interventions applied when
    the cell's processes ran."""
    if isinstance(interpreter, Path):
        interpreter = Interpreter.built(strategy(cell.strategy).env, interpreter)
    started_at = now_iso()
    log_start = failures.log_size(log_path)
    with open(log_path, "a") as log:
        plan = strategy(cell.strategy)
        allocation = slurm.allocation_from_env(os.environ) if not cell.skip_reason else None
        srun = checks.ranks_as_tasks(cell, allocation)
        reason = checks.runtime_skip_reason(cell, allocation, srun)
        if reason:
            return _unmeasured(cell, out, "skipped", reason, started_at, log), None, None
        python = list(interpreter.command)
        env = runner_env(cell, interpreter)
        if srun:
            env = slurm.srun_env(env)
        probe, shortage = checks.shortage(cell, allocation, srun, python, env, log)
        described = checks.describe_allocation(allocation, srun, probe)
        if shortage:
            failed = _unmeasured(cell, out, "failed", shortage, started_at, log, described)
            return failed, None, None
        if described:
            env["DPSCALE_ALLOCATION"] = json.dumps(described, sort_keys=True)
        try:
            returncode, sampler, applied = _run_cell(
                cell, out, plan, allocation, srun, python, env, log
            )
        except netns.NetnsError as error:
            reason = f"could not build the emulated network: {error}"
            return _unmeasured(cell, out, "failed", reason, started_at, log), None, None
        text = failures.log_since(log_path, log_start, failures.CLASSIFY_CHARS)
        status = failures.settle(cell, out, returncode, text, started_at, described)
        return status, sampler, applied


def _unmeasured(
    cell: Cell,
    out: Path,
    status: str,
    reason: str,
    started_at: str,
    log: TextIO,
    allocation: dict | None = None,
) -> str:
    """Record a cell whose processes never ran (skipped, or failed before they started)."""
    failures.write_status(cell, out, status, reason, started_at, allocation=allocation)
    print(f"[dpscale] {cell.cell_id} {status}: {reason}", file=log, flush=True)
    return status


def runner_env(cell: Cell, interpreter: Interpreter) -> dict[str, str]:
    """The environment the cell's processes start with: dpscale importable, one thread pool
    per device, the interpreter's own settings, no GPU for a CPU cell, and a real
    interconnect's interface."""
    env = dict(os.environ)
    threads = str(cell.threads_per_device)
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(import_root()), env.get("PYTHONPATH")])),
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS=threads,
        MKL_NUM_THREADS=threads,
        OPENBLAS_NUM_THREADS=threads,
        DPSCALE_COMMIT=git_commit(),
        **interpreter.environment(env),
        # the adapter's own, from the cell's options (plan.strategy.Strategy.environment)
        **strategy(cell.strategy).rank_environment(cell),
    )
    if cell.accelerator == "cpu":
        # a CPU cell sees no GPU: framework code that asks whether CUDA is available (torch's
        # PowerSGD hook synchronises CUDA then, on CPU tensors too, and fails) takes its CPU path
        env["CUDA_VISIBLE_DEVICES"] = ""
    if cell.network.interface:  # a real interconnect, selected by name (config networks)
        for variable in kind(strategy(cell.strategy).launch).interface_variables:
            env[variable] = cell.network.interface
        env.update(dict(cell.network.env))
    return env


def _run_cell(
    cell: Cell,
    out: Path,
    plan: Strategy,
    allocation: slurm.Allocation | None,
    srun: bool,
    python: list[str],
    env: dict[str, str],
    log: TextIO,
) -> tuple[int | None, contention.ContentionSampler | None, dict]:
    """Run the cell's processes, sampled for contention, under the cell's interventions:
    their exit status (None: timed out), the sampler and the interventions applied."""
    # the scratch folder holds the cell file every rank reads: on the shared file
    # system next to the result when the ranks may run on other nodes
    scratch_root = out.resolve().parent if srun else None
    if scratch_root:
        scratch_root.mkdir(parents=True, exist_ok=True)
    env["DPSCALE_CELL_TOKEN"] = uuid.uuid4().hex  # every process of this launch
    with supervise.scratch_folder(scratch_root, log) as scratch:
        # ranks' arrival marks (runner.measure) and Python temporary files (runner.temporary)
        env[SCRATCH_VARIABLE] = str(scratch)
        cell_file = scratch / "cell.json"
        cell_file.write_text(cell.to_json())
        runner = runner_argv(plan.runner, cell_file, out.resolve())
        # a SLURM job's CPUs are the cell's own, its ranks not the launcher's children
        with (
            contention.sampling(enabled=allocation is None) as sampler,
            interventions.applied(cell, env["DPSCALE_CELL_TOKEN"], log) as applied,
        ):
            returncode = _start(cell, plan, allocation, srun, python, runner, env, log)
    return returncode, sampler, applied


def _start(
    cell: Cell,
    plan: Strategy,
    allocation: slurm.Allocation | None,
    srun: bool,
    python: list[str],
    runner: list[str],
    env: dict[str, str],
    log: TextIO,
) -> int | None:
    """Start the cell's processes, wait for them; the exit status (None: timed out).

    Outside SLURM the cell holds this machine's bench lock; inside a job the scheduler gave
    it its own CPUs and GPUs, and it holds the lock shared: jobs do not wait for each other,
    a local cell on the same machine waits for them and they for it."""
    with (
        supervise.bench_lock(cell, log, shared=allocation is not None),
        _placed(cell, allocation if srun else None, log) as placement,
    ):
        if placement is None:
            command = kind(plan.launch).local(cell, python, runner)
        else:
            rendered = kind(plan.launch).tasks(cell, python, runner, placement.tasks, free_port())
            command = [*placement.prefix, *rendered.argv]
            env.update(rendered.env)
        command = supervise.guarded(command, cell.measure.memory_limit_mb)
        print("[dpscale] $ " + " ".join(command), file=log, flush=True)
        env[startup.LAUNCH_TIME_ENV] = repr(time.time())  # the start-up's origin
        try:
            return supervise.run_with_deadline(command, env, log, cell.measure.timeout_s)
        finally:  # also when Snakemake interrupts the launcher
            supervise.reap_leftovers(env["DPSCALE_CELL_TOKEN"], log)


@dataclass(frozen=True)
class Placed:
    tasks: Placement  # where the ranks run as tasks
    prefix: list[str]  # what the launch kind's command runs under (its first node)


@contextmanager
def _placed(
    cell: Cell, allocation: slurm.Allocation | None, log: TextIO
) -> Iterator[Placed | None]:
    """Where a multi-process cell's ranks start as tasks: SLURM's nodes, emulated nodes (network
    namespaces built for this run and removed after it), or None: locally, as on a workstation."""
    if allocation is not None:
        yield Placed(srun_placement(cell, allocation), [])
    elif cell.nodes > 1 and cell.network.emulated:
        with netns.emulated_nodes(cell.nodes, cell.network.link, log) as nodes:
            placement = netns_placement(cell, nodes.names, nodes.addresses)
            yield Placed(placement, nodes.exec_prefix(0))
    else:
        yield None


def finish_result(
    out: Path,
    sampler: contention.ContentionSampler | None,
    cell: Cell,
    applied: dict | None = None,
) -> str | None:
    """Amend the result the launch left, in one rewrite: the contention verdict (an ok
    result of a sampled run), ``system.launcher`` (what Snakemake's ``benchmark:``
    directive measured by polling, read once at the end instead) and the interventions
    applied (``system.interventions``). Returns the quality."""
    try:
        result = json.loads(out.read_text())
    except (OSError, ValueError):
        return None
    quality = contention.annotate(result, sampler, cell) if sampler else None
    result["system"]["launcher"] = supervise.launcher_footprint()
    if applied:
        result["system"]["interventions"] = applied
    job_id = os.environ.get("SLURM_JOB_ID") or os.environ.get("SLURM_JOBID")
    if job_id and result.get("startup"):
        result["startup"]["queue_wait_s"] = slurm.queue_wait_s(job_id)
    rewrite_result(out, result)
    return quality


def exit_on_sigterm() -> None:
    """SIGTERM (Snakemake stopping a job, scancel) unwinds like Ctrl-C: the ranks are
    stopped and emulated networks removed (Python's default would just end the process)."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def main(argv: list[str] | None = None) -> None:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description="Measure one dpscale cell")
    parser.add_argument("--cell", required=True, help="cell JSON (see dpscale.plan.cell.Cell)")
    runs = parser.add_mutually_exclusive_group(required=True)
    runs.add_argument("--env", type=Path, help="prefix of the built framework environment")
    runs.add_argument(
        "--interpreter", type=json.loads, help="the configured interpreter command, a JSON list"
    )
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--log", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        args.log.parent.mkdir(parents=True, exist_ok=True)
        cell = Cell.from_json(args.cell)
        env = strategy(cell.strategy).env
        runs = Interpreter(env, tuple(args.interpreter)) if args.interpreter else args.env
        status = launch(cell, args.out, runs, args.log)
    except OSError as error:  # a full disk, a read-only file system: nothing was recorded
        # (results are written atomically: an earlier result and runs/ are as they were)
        sys.exit(f"dpscale: cannot record {args.out}: {error.strerror or error}")
    print(f"[dpscale] {args.out}: {status}", file=sys.stderr)
    try:  # the study's own output: a line per finished cell (the log has the detail)
        again = args.out.name.endswith(".again.json")  # the second measurement of a cell
        line = finished_line(json.loads(args.out.read_text()), again)
    except (OSError, ValueError):
        line = f"dpscale: {cell.cell_id}: {status}"
    study = parse_study_cells(os.environ.get(STUDY_CELLS_ENV))
    if study is not None:
        line += f"; {cells_left(cells_dir_of(args.out, cell), *study)}"
    print(line, flush=True)


def cells_dir_of(out: Path, cell: Cell) -> Path:
    """The study's cells folder: ``<cells>/<cell id>.json`` (or ``.again.json``)."""
    depth = len(Path(cell.cell_id).parts)
    return out.parents[depth - 1]


if __name__ == "__main__":
    main()
