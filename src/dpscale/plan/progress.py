"""Where a study stands: each planned cell's result (done: ok, oom, failed, skipped; or
pending), the reasons of those that did not run, and the time the pending ones will take at
the pace of the most alike cells already measured. Read from the result files alone, so it
works while a study runs, after a crash, and on a SLURM cluster's shared results folder."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpscale.plan.cell import Cell
from dpscale.plan.layout import plural

NOT_RUN = ("failed", "oom")
SHOWN_IDS = 8  # cell ids listed under one skip reason


@dataclass(frozen=True)
class CellState:
    """One planned cell: its result file, its status (``pending`` without a readable
    result), the reason where it did not run, and the launcher's wall time."""

    cell: Cell
    path: Path
    status: str
    reason: str | None = None
    wall_s: float | None = None
    queue_wait_s: float | None = None


@dataclass(frozen=True)
class Progress:
    """The study's cells by state, and the estimate of the time the pending ones need."""

    study: str
    cells_dir: Path
    states: list[CellState]
    counts: Counter = field(default_factory=Counter)
    seconds_done: float = 0.0
    seconds_left: float = 0.0
    estimated: int = 0  # pending cells to measure with a done cell of their kind to time them by
    to_skip: int = 0  # pending cells the plan skips (skip_reason): no launch, no time
    queue_wait_s: float | None = None

    @property
    def not_run(self) -> list[CellState]:
        return [state for state in self.states if state.status in NOT_RUN]


def cell_state(cell: Cell, cells_dir: Path) -> CellState:
    """The cell's result as it stands on disk; a missing or unreadable file is pending (a
    crash or a kill can leave a cell half-written: the workflow measures it again). A file
    this user may not read (someone else's results folder) is no state to guess: the
    PermissionError goes to the caller, which names the permission needed."""
    path = cells_dir / f"{cell.cell_id}.json"
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
        status = result["status"]
    except PermissionError:
        raise
    except (OSError, ValueError, KeyError, TypeError):
        return CellState(cell, path, "pending")
    launcher = (result.get("system") or {}).get("launcher") or {}
    startup = result.get("startup") or {}
    return CellState(
        cell,
        path,
        status,
        reason=result.get("reason"),
        wall_s=launcher.get("wall_s"),
        queue_wait_s=startup.get("queue_wait_s"),
    )


def _kinds(cell: Cell) -> tuple[Any, ...]:
    """The cell's kinds, most alike first: the same point (another repeat), the same layout,
    strategy and mode, mode, any measured cell."""
    layout = (cell.strategy, cell.mode, cell.nodes, cell.devices_per_node)
    return ((*layout, cell.batch_per_device), layout, layout[:2], cell.mode, None)


def _pace(done: Iterable[CellState]) -> dict[Any, float]:
    """Median launcher wall time of the measured cells of each kind (_kinds)."""
    timed = [s for s in done if s.wall_s is not None and s.status != "skipped"]
    groups: dict[Any, list[float]] = {}
    for state in timed:
        for key in _kinds(state.cell):
            groups.setdefault(key, []).append(float(state.wall_s))
    return {key: statistics.median(values) for key, values in groups.items()}


def _estimate(cell: Cell, pace: dict[Any, float]) -> float | None:
    """The pace of the most alike measured cells (a cell the plan skips is not asked)."""
    return next((pace[key] for key in _kinds(cell) if key in pace), None)


def study_progress(study: str, cells_dir: Path, cells: Iterable[Cell]) -> Progress:
    """Every planned cell's state, the counts, and the time left at the measured pace."""
    states = [cell_state(cell, cells_dir) for cell in cells]
    done = [s for s in states if s.status != "pending"]
    pace = _pace(done)
    pending = [s.cell for s in states if s.status == "pending"]
    guesses = [_estimate(cell, pace) for cell in pending if not cell.skip_reason]
    waits = [s.queue_wait_s for s in done if s.queue_wait_s is not None]
    return Progress(
        study=study,
        cells_dir=cells_dir,
        states=states,
        counts=Counter(s.status for s in states),
        seconds_done=sum(float(s.wall_s) for s in done if s.wall_s is not None),
        seconds_left=sum(g for g in guesses if g is not None),
        estimated=sum(g is not None for g in guesses),
        to_skip=sum(bool(cell.skip_reason) for cell in pending),
        queue_wait_s=statistics.median(waits) if waits else None,
    )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def progress_lines(progress: Progress, reasons: int = 10) -> list[str]:
    """The study's state in a few lines: counts, the cells that did not run and why, why
    cells were skipped (grouped by reason), and the time left (one cell at a time, as on
    one machine; SLURM runs some side by side)."""
    counts = progress.counts
    total = len(progress.states)
    done = total - counts["pending"]
    lines = [
        f"study {progress.study} ({progress.cells_dir}): {plural(total, 'cell')}, {done} done "
        f"({counts['ok']} ok, {counts['failed']} failed, {counts['oom']} oom, "
        f"{counts['skipped']} skipped), {counts['pending']} pending"
    ]
    for state in progress.not_run[:reasons]:
        lines.append(f"  {state.status}: {state.cell.cell_id}: {_first_line(state.reason)}")
    if len(progress.not_run) > reasons:
        lines.append(f"  ... and {len(progress.not_run) - reasons} more not run")
    if progress.not_run:
        lines.append(
            "  rerun exactly these: dpscale rerun-failed [study files] [-- snakemake args]"
        )
    lines += skipped_lines(progress, reasons)
    lines.append(_time_line(progress))
    return lines


def _first_line(reason: str | None) -> str:
    return (reason or "no reason recorded").splitlines()[0][:200]


def skipped_groups(progress: Progress) -> dict[tuple[str, str], list[str]]:
    """(``skipped`` or ``will be skipped``, reason) -> the ids of its cells, in plan order:
    the cells whose result says skipped (its reason, else the plan's), and the pending cells
    the plan skips (a cell a strategy cannot run, e.g. one process driving two CPUs)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for state in progress.states:
        if state.status == "skipped":
            key = ("skipped", _first_line(state.reason or state.cell.skip_reason))
        elif state.status == "pending" and state.cell.skip_reason:
            key = ("will be skipped", _first_line(state.cell.skip_reason))
        else:
            continue
        groups.setdefault(key, []).append(state.cell.cell_id)
    return groups


def skipped_lines(progress: Progress, reasons: int = 10) -> list[str]:
    """Why cells were (or will be) skipped: one line per distinct reason with its count, and
    a line of its cells' ids (the first SHOWN_IDS); at most ``reasons`` reasons."""
    groups = skipped_groups(progress)
    lines = []
    for (label, reason), ids in list(groups.items())[:reasons]:
        lines.append(f"  {label}, {len(ids)} cell{'s' * (len(ids) != 1)}: {reason}")
        more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
        lines.append(f"    {', '.join(ids[:SHOWN_IDS])}{more}")
    if len(groups) > reasons:
        lines.append(f"  ... and {len(groups) - reasons} more reasons cells were skipped")
    return lines


def _time_line(progress: Progress) -> str:
    pending = progress.counts["pending"]
    done = f"the done cells took {_minutes(progress.seconds_done)} (launch to exit)"
    if pending == 0:
        return f"time: {done}; nothing left"
    to_measure = pending - progress.to_skip
    unknown = to_measure - progress.estimated
    if progress.estimated:
        text = (
            f"time: {done}; left, one cell at a time at their median pace: about "
            f"{_minutes(progress.seconds_left)} for {progress.estimated} of "
            f"{plural(to_measure, 'cell')} to measure"
        )
        if unknown:
            text += f" ({unknown} of a kind not measured yet: not counted)"
    elif to_measure:
        text = (
            f"time: {done}; left: not known until a cell of each kind has run "
            f"({plural(to_measure, 'cell')} to measure)"
        )
    else:
        text = f"time: {done}; no cell left to measure"
    if progress.to_skip:
        text += f"; {plural(progress.to_skip, 'pending cell')} will be skipped (no time)"
    if progress.queue_wait_s is not None:
        text += f"; SLURM jobs waited a median {_minutes(progress.queue_wait_s)} in the queue"
    return text + ", plus the analysis and report"


def failed_paths(progress: Progress) -> list[Path]:
    """The result files of the cells that did not run (failed, oom)."""
    return [state.path for state in progress.not_run]


AGAIN_WORDS = "measured again (the first read was noisy or disturbed; both kept)"


def finished_line(result: dict[str, Any], again: bool = False) -> str:
    """One line for a finished cell, as the study prints it: its id, status, and img/s with
    the 95% half-width over its windows, or the reason it did not measure; ``again``: the
    cell's second measurement (``<cell>.again.json``), said so, not read as a new result."""
    cell_id = (result.get("cell") or {}).get("cell_id", "?")
    if again:
        cell_id = f"{cell_id}: {AGAIN_WORDS}"
    status = result.get("status", "?")
    summary = ((result.get("measurement") or {}).get("summary") or {}).get("img_s") or {}
    if status == "ok" and summary.get("mean") is not None:
        spread = summary.get("ci95")
        interval = f" ±{spread:.1f} (95%, {summary.get('n')} windows)" if spread is not None else ""
        return f"dpscale: {cell_id}: ok, {summary['mean']:.1f} img/s{interval}"
    reason = (result.get("reason") or "").splitlines()[0][:160] if result.get("reason") else ""
    return f"dpscale: {cell_id}: {status}" + (f": {reason}" if reason else "")


# The workflow tells each cell's launcher how many cells the study plans, and how many of
# them it measures (not skipped by the plan), as "<planned> <to measure>" in this variable
# (workflow/rules/common.smk's shell prefix: not a param, so a changed plan reruns no cell).
STUDY_CELLS_ENV = "DPSCALE_STUDY_CELLS"


def parse_study_cells(value: str | None) -> tuple[int, int] | None:
    """(planned, to measure) from STUDY_CELLS_ENV, or None where it is unset or malformed."""
    try:
        planned, to_measure = (int(part) for part in (value or "").split())
    except ValueError:
        return None
    return (planned, to_measure) if 0 <= to_measure <= planned else None


def cells_left(cells_dir: Path, planned: int, to_measure: int) -> str:
    """ "12 of 36 cells done, about 4.2 min left (...)": the study's first results on disk
    (a cell measured again counts once), and the cells still to measure at the median
    launcher wall time of those measured so far; one cell at a time, as on one machine."""
    states = [_read_state(path) for path in cells_dir.rglob("*.json")]
    states = [state for state in states if state is not None]
    done = min(len(states), planned)
    measured = [wall for status, wall in states if status != "skipped"]
    left = max(0, to_measure - len(measured))
    text = f"{done} of {plural(planned, 'cell')} done"
    if done >= planned or left == 0:
        return text
    walls = [wall for wall in measured if wall is not None]
    if not walls:
        return f"{text}, {left} to measure (time left not known yet)"
    pace = statistics.median(walls)
    return (
        f"{text}, about {_minutes(pace * left)} left ({left} to measure, {_minutes(pace)} a cell)"
    )


def _read_state(path: Path) -> tuple[str, float | None] | None:
    """(status, launcher wall s) of a first result; None for a second one or a broken file."""
    if path.name.endswith(".again.json"):
        return None
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
        wall = ((result.get("system") or {}).get("launcher") or {}).get("wall_s")
        return str(result["status"]), (float(wall) if wall is not None else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
