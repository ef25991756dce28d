"""One cell measured again (``dpscale rerun STUDY CELL``) and whether a study's report still
shows its tables (``dpscale status``). The cell is named as a person has it at hand: its id
as ``dpscale status`` prints it, or its result's path; anything else is one line with the
study's nearest cell ids. Snakemake removes a job's output before the job runs, so a result
is kept by its copy under ``runs/`` (plan.result writes one with every result):
:func:`keep_previous` makes sure the copy is there before the cell is forced."""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection
from pathlib import Path

from dpscale.plan.result import archive_path, atomic_file

SUGGESTED = 3  # nearest cell ids named for an unknown cell
STUDY_FILES = (".yaml", ".yml")


def cell_id_of(argument: str, cells_dir: Path, ids: Collection[str]) -> str:
    """The planned cell ``argument`` names: its id, or its result's path under this study's
    ``cells_dir`` (relative to the current folder or absolute), with or without ``.json``.
    Anything else is a ValueError of one line naming the argument, what is allowed and the
    nearest ids (difflib), so a typo in a long id is one look away from the right one."""
    text = argument.strip()
    stem = text.removesuffix(".json")
    if stem in ids:
        return stem
    inside = _under(Path(stem), cells_dir)
    if inside in ids:
        return inside
    if text.endswith(STUDY_FILES):
        raise ValueError(
            f"{argument!r} is a study file, not a cell: give the cell after the study files "
            "(dpscale rerun STUDY.yaml CELL)"
        )
    elsewhere = _after_cells(Path(stem))
    if inside is None and elsewhere in ids:
        raise ValueError(
            f"{argument!r} is not under this study's cells folder {cells_dir}: give its id "
            f"({elsewhere}) or its result there"
        )
    raise ValueError(_unknown(argument, inside or elsewhere or stem, cells_dir, ids))


def _unknown(argument: str, key: str, cells_dir: Path, ids: Collection[str]) -> str:
    """The one line for an argument that names no planned cell, with the nearest ids."""
    nearest = difflib.get_close_matches(key, list(ids), n=SUGGESTED)
    hint = f"nearest: {', '.join(nearest)}" if nearest else f"none of its {len(ids)} is close"
    return (
        f"{argument!r} is not a cell of this study: give a cell id (as dpscale status prints "
        f"them) or its result under {cells_dir}/; {hint}"
    )


def _under(path: Path, cells_dir: Path) -> str | None:
    """``path``'s place under ``cells_dir`` as a cell id would read, both resolved (a
    relative path is the current folder's, a linked results folder its target); None
    where it lies elsewhere."""
    try:
        return path.resolve().relative_to(cells_dir.resolve()).as_posix()
    except ValueError:
        return None


def _after_cells(path: Path) -> str | None:
    """What follows the last ``cells`` folder of ``path`` (a result of some study), if any."""
    parts = path.parts
    if "cells" not in parts:
        return None
    last = len(parts) - 1 - parts[::-1].index("cells")
    return "/".join(parts[last + 1 :]) or None


def keep_previous(path: Path) -> Path | None:
    """The copy under ``runs/`` of the result at ``path``, written now where none has the
    same bytes (a result copied in from elsewhere, or written before runs/ existed): Snakemake
    removes the result when the forced job starts, and this copy is what keeps it. None
    where there is no readable result to keep (none yet, or one cut short by a crash)."""
    try:
        data = path.read_bytes()
        archive = archive_path(path, json.loads(data))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    for copy in sorted(archive.parent.glob("*.json")):
        try:
            if copy.read_bytes() == data:
                return copy
        except OSError:
            continue
    with atomic_file(archive) as handle:
        handle.write(data)
    return archive


def report_is_stale(report: Path, tables: Path) -> bool:
    """Whether ``report`` exists and is older than the newest file under ``tables``: the
    tables changed (a cell rerun, a study still running) and ``dpscale report`` was not run
    since. A report not written yet is not stale: nothing then claims to show the tables."""
    try:
        written = report.stat().st_mtime_ns
    except OSError:
        return False
    return any(_mtime(path) > written for path in tables.rglob("*"))


def _mtime(path: Path) -> int:
    """A file's modification time (ns); 0 for a folder or a file gone meanwhile."""
    try:
        return path.stat().st_mtime_ns if path.is_file() else 0
    except OSError:
        return 0
