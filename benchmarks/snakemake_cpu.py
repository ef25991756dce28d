"""The Snakemake main process's CPU while each cell of a study measures (issue 19).

    .venv/bin/python benchmarks/snakemake_cpu.py                      # the default study
    .venv/bin/python benchmarks/snakemake_cpu.py --configfile studies/post003_interconnect_mini.yaml

Runs ``snakemake`` on the study in a fresh results folder (environments as configured: build
them first with ``snakemake envs``), samples the main process's own CPU (utime + stime of
``/proc/<pid>/stat``: all its threads, not its children) every ``--interval`` seconds, and
prints, for every measured cell in the order it ran: the Snakemake process's cores over the
cell's timed span (its whole run for training cells), the foreign cores the cell's sampler
saw, and the cell's quality. ``--repo`` runs another checkout (for before/after);
``--snakemake-args`` passes more options (``"--scheduler greedy"``).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from workflow_overhead import study_command

import page

HERE = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CellSpan:
    cell_id: str
    start: float
    end: float
    foreign: float | None
    quality: str


def process_cpu_seconds(pid: int) -> float | None:
    """utime + stime of one process (its threads, not its children), in seconds."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def sample_until_exit(process: subprocess.Popen, interval: float) -> list[tuple[float, float]]:
    """(wall, cpu seconds) of ``process`` every ``interval`` until it exits."""
    samples: list[tuple[float, float]] = []
    while process.poll() is None:
        cpu = process_cpu_seconds(process.pid)
        if cpu is not None:
            samples.append((time.time(), cpu))
        time.sleep(interval)
    return samples


def cores_between(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Mean cores over [start, end], the CPU curve interpolated between samples."""
    walls = [wall for wall, _ in samples]
    if not samples or start < walls[0] or end > walls[-1] or end <= start:
        return None

    def cpu_at(moment: float) -> float:
        i = max(bisect.bisect_right(walls, moment) - 1, 0)
        if i + 1 >= len(samples):
            return samples[-1][1]
        (w0, c0), (w1, c1) = samples[i], samples[i + 1]
        return c0 + (c1 - c0) * (moment - w0) / (w1 - w0)

    return (cpu_at(end) - cpu_at(start)) / (end - start)


def timestamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def cell_spans(results: Path) -> list[CellSpan]:
    """Every measured (ok) cell's timed span, in the order the cells started."""
    spans = []
    for path in results.rglob("cells/**/*.json"):
        result = json.loads(path.read_text())
        if result.get("status") != "ok":
            continue
        contention = result["system"].get("contention") or {}
        span = contention.get("timed_span") or [
            timestamp(result["started_at"]),
            timestamp(result["finished_at"]),
        ]
        foreign = contention.get("foreign_cpu_cores_mean")
        quality = result.get("quality", "unknown")
        spans.append(CellSpan(result["cell"]["cell_id"], span[0], span[1], foreign, quality))
    return sorted(spans, key=lambda span: span.start)


def run_study(
    repo: Path, configfile: Path | None, results: Path, extra: list[str], interval: float
) -> tuple[float, list[tuple[float, float]]]:
    command, env = study_command(repo, configfile, results, extra)
    started = time.monotonic()
    log = open(results / "snakemake.log", "w")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(command, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    samples = sample_until_exit(process, interval)
    log.close()
    wall = time.monotonic() - started
    if process.returncode != 0:
        sys.exit(f"snakemake failed ({process.returncode}); see {results / 'snakemake.log'}")
    return wall, samples


def fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", type=Path, help="a study file (default: config.yaml)")
    parser.add_argument("--repo", type=Path, default=HERE)
    parser.add_argument("--snakemake-args", default="", help='e.g. "--scheduler greedy"')
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--keep", type=Path, help="keep the results folder and samples here")
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    configfile = args.configfile.resolve() if args.configfile else None
    with tempfile.TemporaryDirectory(prefix="dpscale-smkcpu-") as tmp:
        results = args.keep.resolve() if args.keep else Path(tmp)
        results.mkdir(parents=True, exist_ok=True)
        extra = shlex.split(args.snakemake_args)
        wall, samples = run_study(args.repo.resolve(), configfile, results, extra, args.interval)
        (results / "snakemake_cpu_samples.json").write_text(json.dumps(samples))
        spans = cell_spans(results)
    rows, per_cell = [], []
    for order, span in enumerate(spans, 1):
        cores = cores_between(samples, span.start, span.end)
        per_cell.append(cores)
        rows.append(
            [order, span.cell_id, f"{span.end - span.start:.1f}", fmt(cores), fmt(span.foreign)]
            + [span.quality]
        )
    measured = [cores for cores in per_cell if cores is not None]
    whole = (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0])
    fifth = max(len(measured) // 5, 1)
    summary = (
        f"{len(spans)} measured cells, wall {wall:.0f} s; Snakemake main process over the "
        f"whole run {whole:.3f} cores; while cells measured: median "
        f"{statistics.median(measured):.3f}, max {max(measured):.3f}; first fifth of the cells "
        f"{statistics.mean(measured[:fifth]):.3f}, "
        f"last fifth {statistics.mean(measured[-fifth:]):.3f}"
        if measured
        else f"{len(spans)} measured cells: no cell span inside the samples"
    )
    print(summary)
    header = ["#", "cell", "span s", "snakemake cores", "foreign cores", "quality"]
    page.print_page(
        "Snakemake's CPU while cells measure",
        [summary, page.table(header, rows)],
        run,
        path=args.page,
    )


if __name__ == "__main__":
    main()
