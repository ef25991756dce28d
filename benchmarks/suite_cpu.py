"""Where the test suite's CPU goes: each test's CPU seconds, its own and its children's.

As a pytest plugin, it writes one row per test (worker, test, start, wall s, own CPU s,
children's CPU s) to ``$SUITE_CPU_OUT`` (default ``suite-cpu.tsv``), and one row per
worker at its end with the worker's whole CPU:

    PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/suite-cpu.tsv \\
        .venv/bin/python -m pytest -n 3 -m side_by_side -p suite_cpu

As a script, it sums a file of rows by module, by kind (unit/integration/e2e) and by worker:

    .venv/bin/python benchmarks/suite_cpu.py /tmp/suite-cpu.tsv

Why CPU and not pytest's durations: the first phase runs three workers on two cores, so a
test's wall time there is mostly the other workers' load, while its CPU is its own. A
child's CPU counts once the child is waited for (``RUSAGE_CHILDREN``), grandchildren
included; what another process runs for a test (a SLURM daemon's job steps) is not counted:
compare the total with the machine's busy time (``/proc/stat``) over the same run.
A module's first test carries its module fixtures (a study run once for the module).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

OUT = Path(os.environ.get("SUITE_CPU_OUT", "suite-cpu.tsv"))
WORKER_END = "WORKER_END"


def cpu_seconds() -> tuple[float, float]:
    """This process' CPU seconds, and those of its children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def write_row(test: str, start: float, wall: float, own: float, children: float) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with OUT.open("a", encoding="utf-8") as handle:
        handle.write(f"{worker}\t{test}\t{start:.1f}\t{wall:.2f}\t{own:.2f}\t{children:.2f}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    own, children = cpu_seconds()
    start = time.time()
    yield
    own_after, children_after = cpu_seconds()
    wall = time.time() - start
    write_row(item.nodeid, start, wall, own_after - own, children_after - children)


def pytest_sessionfinish(session: pytest.Session) -> None:
    write_row(WORKER_END, time.time(), 0.0, *cpu_seconds())


def summarise(path: Path, top: int) -> None:
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    kinds: dict[str, float] = defaultdict(float)
    workers: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        worker, test, _, wall, own, children = line.split("\t")
        if test == WORKER_END:
            workers[worker] = float(own) + float(children)
            continue
        module = test.split("::", 1)[0]
        row = modules[module]
        row[0] += float(own) + float(children)
        row[1] += float(wall)
        row[3] += 1
        kinds[Path(module).parent.name] += float(own) + float(children)
    total = sum(row[0] for row in modules.values())
    print(
        f"tests' CPU: {total:.0f} s; by kind: "
        + ", ".join(f"{kind} {seconds:.0f} s" for kind, seconds in sorted(kinds.items()))
    )
    print("workers' whole CPU: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(workers.items())))
    print(f"{'CPU s':>7} {'wall s':>7} {'tests':>5}  module")
    for module, (cpu, wall, _, count) in sorted(modules.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{cpu:7.1f} {wall:7.1f} {count:5d}  {module}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", type=Path, help="the file the plugin wrote")
    parser.add_argument("--top", type=int, default=30, help="modules to list")
    args = parser.parse_args()
    summarise(args.rows, args.top)


if __name__ == "__main__":
    main()
