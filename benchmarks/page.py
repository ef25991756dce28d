"""A benchmark's measurement page (docs/measurements/): its header and Output, printed.

A script adds ``--page PATH`` with add_page_option(parser), takes describe_run() when it
starts, and ends with print_page(topic, [table(header, rows)], run, load=...), which prints
the page (title with the date, commit, machine and load, command, ``## Output``, an empty
``## Reading``) and writes it to PATH when given. Standard library only: the framework
environments import it too.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"^[-+\u2212]?\.?\d[^A-Za-z]*$")  # "1.5", "1.5 ± 0.2", "0.98 1.01"


@dataclass(frozen=True)
class Run:
    """What a page says about the run: UTC date, commit, machine (no load), command."""

    date: str
    commit: str
    dirty: bool
    machine: str
    command: str


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def _proc_field(path: str, key: str) -> str | None:
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return None
    found = (line.split(":", 1)[1].strip() for line in lines if line.startswith(key))
    return next(found, None)


def _relative(path: str) -> str:
    try:
        return str(Path(os.path.abspath(path)).relative_to(REPO_ROOT))
    except ValueError:
        return path


def describe_run() -> Run:
    """The run as its page describes it; call it when the measurement starts."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = bool(_git("status", "--porcelain"))
    memory = _proc_field("/proc/meminfo", "MemTotal")
    memory = f"{int(memory.split()[0]) / 2**20:.1f} GiB" if memory else "unknown"
    cpu = _proc_field("/proc/cpuinfo", "model name") or "unknown CPU"
    machine = f"{cpu}, {os.cpu_count()} CPUs, {memory} memory"
    command = [_relative(sys.executable), _relative(sys.argv[0]), *sys.argv[1:]]
    date = time.strftime("%Y-%m-%d", time.gmtime())
    return Run(date, commit, dirty, machine, shlex.join(command))


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table; columns whose filled cells are all numbers align right.

    Floats are shown with 3 decimals; format a cell yourself for anything else.
    """
    cells = [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    right = [
        any(row[i] for row in cells) and all(NUMBER.match(row[i]) for row in cells if row[i])
        for i in range(len(header))
    ]
    widths = [max(len(str(h)), 3, *(len(row[i]) for row in cells)) for i, h in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        padded = (
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        )
        return "| " + " | ".join(padded) + " |"

    rule = ["-" * (w - 1) + ":" if r else "-" * w for w, r in zip(widths, right, strict=True)]
    return "\n".join([line(header), line(rule), *(line(row) for row in cells)])


def add_page_option(parser: argparse.ArgumentParser) -> None:
    """``--page PATH``: print_page also writes the page there."""
    parser.add_argument(
        "--page", type=Path, metavar="PATH", help="also write the measurement page (Markdown) here"
    )


def print_page(
    topic: str,
    tables: Sequence[str],
    run: Run | None = None,
    load: str | None = None,
    path: Path | None = None,
) -> str:
    """Print the page (and write it to ``path``); ``tables`` may hold captions too."""
    run = run or describe_run()
    commit = f"`{run.commit}`" + (" + uncommitted changes" if run.dirty else "")
    output = "\n\n".join(tables)
    page = (
        f"# {topic} ({run.date})\n\n- Commit: {commit}\n"
        f"- Machine: {run.machine}; load: {load or 'foreign CPU not sampled'}\n"
        f"- Command: `{run.command}`\n\n## Output\n\n{output}\n\n## Reading\n\n(to be written)\n"
    )
    print("\n" + page, end="", flush=True)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page)
    return page
