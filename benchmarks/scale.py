"""How dpscale's own steps grow with a study's size, from 100 to 10,000 generated cells.

check-config, the dry run, status, the aggregate and every analysis rule, and the report,
timed at 100, 1,000 and 10,000 cells (``--cells``).

    .venv/bin/python benchmarks/scale.py [--cells 100 1000 10000] [--out DIR] [--keep]
                                         [--page PATH]

Why: a cluster study runs thousands of cells, and everything dpscale does besides
measuring (planning, Snakemake's DAG, reading every result, the fits, the report) must stay
usable there. Measuring thousands of cells is not needed to time those: for each size N
this writes a study of about N cells (benchmarks/scale_cells.py: synthetic throughput,
torch-ddp, horovod-tf and mxnet-dist over models x batch sizes x devices per node x nodes x
networks x repeats) and a result JSON for every cell it plans, made from measured results
(benchmarks/scale_templates/) with each cell's fields and plausibly varied numbers, where
the workflow looks for them, plus the environments' ready markers: Snakemake then plans no
``bench_cell`` (the dry run is checked for that) and runs the analysis alone.

What is timed, each as its own process in the study's scratch folder (so its
``.snakemake/`` is not the checkout's): ``dpscale check-config``, ``snakemake -n``,
``dpscale status``, ``snakemake <tables>/cells.csv`` (the quality review and the aggregate),
``snakemake`` (every other analysis rule, figures and pages: the default target), and
``dpscale report``. Each gets its wall seconds, the peak resident memory of its largest
process (``wait4``'s ``ru_maxrss``, what ``/usr/bin/time -f %M`` prints) and the peak of
the whole process tree's summed RSS (psutil, sampled every 0.2 s). The two analysis runs
use ``--cores 1`` so that rules run one at a time; each rule's seconds are its start and
end as Snakemake's metadata records them (``.snakemake/metadata``), and its memory the
tree's peak in that span. The report's HTML size is recorded too.

Prints one table per N, then each step's growth exponent between sizes, log(time ratio) /
log(cell ratio): 1 is linear, above 1 grows worse than linearly. Every figure, with the
exact commands and the folder they ran in, goes to ``<out>/scale.json`` and
``<out>/scale.csv`` (``--out``, default results/scale/), for a measurements page; each
size's study, results and report are written to ``<out>/cells<N>/`` (emptied first: stale
outputs would skip their rules) and removed after it unless ``--keep``. The "10k limit"
column is issue 78's bound at 10,000 cells, checked only there. The analysis runs as long
as it takes at 10,000 cells (hours on 2 cores where a rule grows faster than linearly);
``--timeout`` ends a command after that many seconds, and the size's later steps are then
not timed.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

import page
import scale_cells

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SAMPLE_S = 0.2
# issue 78's bounds at 10,000 cells on 2 cores (seconds; the report's HTML in bytes)
LIMITS = {
    "check-config": 5,
    "dry run": 60,
    "status": 5,
    "rule aggregate": 60,
    "report": 300,
    "report HTML bytes": 10_000_000,
}
# rules Snakemake must not plan when every cell has its result
MEASURING_RULES = ("bench_cell", "measure_again", "build_env", "prepare_digits", "prepare_cifar10")


@dataclass
class Timed:
    """One command: wall seconds, the largest process's peak RSS, the tree's summed peak."""

    name: str
    command: list[str]
    wall_s: float
    max_rss_mib: float
    tree_peak_mib: float
    returncode: int
    samples: list[tuple[float, float]] = field(default_factory=list, repr=False)
    output: str = field(default="", repr=False)


def tree_rss(root: psutil.Process) -> float:
    """Summed RSS (bytes) of ``root`` and its descendants now."""
    total = 0.0
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return total
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total


def timed(name: str, command: list[str], cwd: Path, timeout: float) -> Timed:
    """Run ``command`` in ``cwd`` and measure it; stdout and stderr kept together."""
    with tempfile.TemporaryFile(mode="w+") as log:
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        samples: list[tuple[float, float]] = []
        done = threading.Event()

        def sample() -> None:
            try:
                root = psutil.Process(process.pid)
            except psutil.Error:  # ended and reaped already
                return
            while not done.is_set():
                samples.append((time.time(), tree_rss(root)))
                done.wait(SAMPLE_S)

        def stop() -> None:  # --timeout: the command and everything it started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        killer = threading.Timer(timeout, stop)
        killer.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.monotonic() - started
        killer.cancel()
        done.set()
        sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read()
    peak = max((rss for _, rss in samples), default=0.0)
    return Timed(
        name,
        command,
        wall,
        usage.ru_maxrss / 1024,  # KiB on Linux
        peak / 2**20,
        process.returncode,
        samples,
        output,
    )


def job_counts(output: str) -> dict[str, int]:
    """Snakemake's "Job stats" table: jobs per rule."""
    counts: dict[str, int] = {}
    block = output.split("Job stats:", 1)[-1] if "Job stats:" in output else ""
    for line in block.splitlines()[3:]:
        match = re.fullmatch(r"(\S+)\s+(\d+)", line.strip())
        if not match or match.group(1) == "total":
            break
        counts[match.group(1)] = int(match.group(2))
    return counts


def rule_spans(work: Path) -> dict[str, list[tuple[float, float]]]:
    """Each rule's jobs as (start, end), from Snakemake's metadata of their outputs."""
    jobs: dict[tuple[str, object], tuple[float, float]] = {}
    for path in (work / ".snakemake" / "metadata").rglob("*"):
        if not path.is_file():
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        start, end = record.get("starttime"), record.get("endtime")
        if record.get("rule") and start and end:
            key = (record["rule"], record.get("job_hash"))
            old = jobs.get(key)
            jobs[key] = (min(start, old[0]), max(end, old[1])) if old else (start, end)
    spans: dict[str, list[tuple[float, float]]] = {}
    for (rule, _), span in jobs.items():
        spans.setdefault(rule, []).append(span)
    return spans


def peak_in(samples: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """The tree's peak RSS (MiB) sampled within [start, end], the sample before it included."""
    inside = [rss for t, rss in samples if start - SAMPLE_S <= t <= end + SAMPLE_S]
    return max(inside, default=0.0) / 2**20


@dataclass
class Size:
    """Everything measured at one study size."""

    target: int
    cells: int
    matrix: str
    study_file: str
    generate_s: float
    results_bytes: int
    dry_run_jobs: dict[str, int]
    steps: list[dict]
    rules: list[dict]
    report_bytes: int | None


def measure_size(target: int, folder: Path, timeout: float, seed: int) -> Size:
    """Write the study of about ``target`` cells and its results in ``folder``, then time
    each step there."""
    folder.mkdir(parents=True, exist_ok=True)
    matrix = scale_cells.matrix_for(target)
    name = f"scale_{target}"
    config = scale_cells.study_config(name, matrix, folder / "results", folder / "envs")
    study = folder / f"{name}.yaml"
    scale_cells.write_study(study, config)
    started = time.monotonic()
    checked, cells = scale_cells.planned_cells(study)
    scale_cells.write_env_markers(checked)
    _, results_bytes = scale_cells.write_results(checked, cells, seed)
    generate_s = time.monotonic() - started
    print(
        f"{len(cells)} cells ({matrix.words()}): results written in {generate_s:.1f} s", flush=True
    )

    snakemake = [str(BIN / "snakemake"), "--configfile", str(study)]
    snakemake += ["--snakefile", str(REPO / "Snakefile"), "--directory", str(folder)]
    tables = Path(checked["results_dir"]) / checked["study"] / "tables"
    commands = [
        ("check-config", [str(BIN / "dpscale"), "check-config", str(study)]),
        ("dry run", [*snakemake, "-n"]),
        ("status", [str(BIN / "dpscale"), "status", str(study)]),
        ("aggregate", [*snakemake, "--cores", "1", str(tables / "cells.csv")]),
        ("analysis", [*snakemake, "--cores", "1"]),
        ("report", [str(BIN / "dpscale"), "report", str(study)]),
    ]
    steps: list[Timed] = []
    rules: list[dict] = []
    dry_jobs: dict[str, int] = {}
    for step, command in commands:
        result = timed(step, command, folder, timeout)
        steps.append(result)
        print(f"  {step}: {result.wall_s:.1f} s, rc {result.returncode}", flush=True)
        if result.returncode != 0:
            print(result.output[-3000:], file=sys.stderr)
            break
        if step == "dry run":
            dry_jobs = job_counts(result.output)
            measuring = sorted(set(dry_jobs) & set(MEASURING_RULES))
            if measuring or not dry_jobs:
                raise SystemExit(f"scale: the dry run plans {measuring or 'nothing'}: {dry_jobs}")
        if step in ("aggregate", "analysis"):
            done = {r["rule"] for r in rules}
            for rule, spans in sorted(rule_spans(folder).items(), key=lambda kv: min(kv[1])):
                if rule in done:
                    continue
                rules.append(
                    {
                        "rule": rule,
                        "stage": step,
                        "jobs": len(spans),
                        "seconds": sum(end - start for start, end in spans),
                        "tree_peak_mib": max(peak_in(result.samples, *span) for span in spans),
                    }
                )
    report = Path(checked["results_dir"]) / checked["study"] / "report.html"
    return Size(
        target=target,
        cells=len(cells),
        matrix=matrix.words(),
        study_file=str(study),
        generate_s=generate_s,
        results_bytes=results_bytes,
        dry_run_jobs=dry_jobs,
        steps=[
            {
                "step": s.name,
                "command": shlex.join(s.command),
                "cwd": str(folder),
                "wall_s": s.wall_s,
                "max_rss_mib": s.max_rss_mib,
                "tree_peak_mib": s.tree_peak_mib,
                "returncode": s.returncode,
            }
            for s in steps
        ],
        rules=rules,
        report_bytes=report.stat().st_size if report.is_file() else None,
    )


def rows_of(size: Size) -> list[dict]:
    """The size's figures as rows: each command, then each rule it ran (seconds only)."""
    rows = [
        {
            "name": s["step"],
            "kind": "command",
            "seconds": s["wall_s"],
            "max_rss_mib": s["max_rss_mib"],
            "tree_peak_mib": s["tree_peak_mib"],
            "returncode": s["returncode"],
            "command": s["command"],
        }
        for s in size.steps
    ]
    rows += [
        {
            "name": f"rule {r['rule']}",
            "kind": f"rule ({r['stage']})",
            "seconds": r["seconds"],
            "max_rss_mib": None,
            "tree_peak_mib": r["tree_peak_mib"],
            "returncode": None,
            "command": "",
        }
        for r in size.rules
    ]
    return rows


def limit_words(name: str, value: float | None, checked: bool) -> str:
    limit = LIMITS.get(name)
    if limit is None:
        return ""
    if not checked or value is None:
        return f"{limit:,}"
    return f"{limit:,} {'ok' if value <= limit else 'OVER'}"


def size_table(size: Size) -> str:
    checked = size.target == 10_000
    header = ["step", "kind", "rc", "wall s", "max RSS MiB", "tree peak MiB", "10k limit"]
    rows = [
        [
            row["name"],
            row["kind"],
            "" if row["returncode"] is None else str(row["returncode"]),
            f"{row['seconds']:.2f}",
            "" if row["max_rss_mib"] is None else f"{row['max_rss_mib']:.0f}",
            f"{row['tree_peak_mib']:.0f}",
            limit_words(row["name"], row["seconds"], checked),
        ]
        for row in rows_of(size)
    ]
    html = size.report_bytes
    rows.append(
        [
            "report HTML bytes",
            "size",
            "",
            f"{html:,}" if html is not None else "none",
            "",
            "",
            limit_words("report HTML bytes", html, checked),
        ]
    )
    return page.table(header, rows)


def exponents(sizes: Sequence[Size]) -> tuple[list[str], list[list[str]]]:
    """Each step's log(time ratio) / log(cell ratio) between consecutive sizes."""
    pairs = list(zip(sizes, sizes[1:], strict=False))
    header = ["step", *(f"{a.cells} -> {b.cells}" for a, b in pairs)]
    names = []
    for size in sizes:
        names += [row["name"] for row in rows_of(size) if row["name"] not in names]
    rows = []
    for name in [*names, "report HTML bytes"]:
        row = [name]
        for a, b in pairs:
            va, vb = _figure(a, name), _figure(b, name)
            ok = va and vb and va > 0 and vb > 0
            row.append(f"{math.log(vb / va) / math.log(b.cells / a.cells):.2f}" if ok else "")
        rows.append(row)
    return header, rows


def _figure(size: Size, name: str) -> float | None:
    if name == "report HTML bytes":
        return size.report_bytes
    found = [
        row["seconds"]
        for row in rows_of(size)
        if row["name"] == name and row["returncode"] in (None, 0)
    ]
    return found[0] if found else None


def write_outputs(out: Path, sizes: Sequence[Size], run: page.Run) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    header, rows = exponents(sizes)
    document = {
        "run": asdict(run),
        "limits_at_10000": LIMITS,
        "sizes": [asdict(size) for size in sizes],
        "exponents": [dict(zip(header, row, strict=True)) for row in rows],
    }
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    with out.with_suffix(".csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "cells",
                "name",
                "kind",
                "returncode",
                "seconds",
                "max_rss_mib",
                "tree_peak_mib",
                "command",
            ]
        )
        for size in sizes:
            for row in rows_of(size):
                writer.writerow(
                    [
                        size.cells,
                        row["name"],
                        row["kind"],
                        "" if row["returncode"] is None else row["returncode"],
                        f"{row['seconds']:.3f}",
                        "" if row["max_rss_mib"] is None else f"{row['max_rss_mib']:.1f}",
                        f"{row['tree_peak_mib']:.1f}",
                        row["command"],
                    ]
                )
            writer.writerow(
                [size.cells, "report HTML bytes", "size", "", size.report_bytes, "", "", ""]
            )
            writer.writerow(
                [size.cells, "results bytes", "size", "", size.results_bytes, "", "", ""]
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cells", type=int, nargs="+", default=[100, 1000, 10000], help="study sizes (cells)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "results" / "scale",
        help="folder of scale.json and scale.csv, and of each size's study while it runs",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep each size's study, results and report"
    )
    parser.add_argument(
        "--timeout", type=float, default=3600, help="seconds any one command may run"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated numbers")
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    sizes: list[Size] = []
    for target in sorted(set(args.cells)):
        folder = out / f"cells{target}"
        shutil.rmtree(folder, ignore_errors=True)  # stale outputs would skip their rules
        try:
            sizes.append(measure_size(target, folder, args.timeout, args.seed))
        finally:
            if args.keep:
                print(f"kept: {folder}", flush=True)
            else:
                shutil.rmtree(folder, ignore_errors=True)
        write_outputs(out / "scale.json", sizes, run)
    tables = []
    for size in sizes:
        caption = (
            f"**{size.cells} cells** ({size.matrix}; asked {size.target}): study "
            f"`{Path(size.study_file).name}`, results {size.results_bytes / 2**20:.1f} MiB "
            f"written in {size.generate_s:.1f} s (not timed below). Commands: wall seconds; "
            "max RSS: the largest process's peak; tree peak: the process tree's summed RSS, "
            "sampled. Rules: seconds from Snakemake's metadata, --cores 1."
        )
        tables += [caption, size_table(size)]
    if len(sizes) > 1:
        header, rows = exponents(sizes)
        tables += [
            "Growth exponent, log(time ratio) / log(cell ratio): 1 is linear, above 1 worse.",
            page.table(header, rows),
        ]
    tables.append(f"Every figure and command: `{out / 'scale.json'}` and `{out / 'scale.csv'}`.")
    page.print_page(
        "Scale: dpscale's own steps from 100 to 10,000 cells", tables, run, path=args.page
    )


if __name__ == "__main__":
    main()
