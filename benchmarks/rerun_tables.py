"""After one cell is rerun, how long Snakemake takes to bring a study's tables up to date,
from two checkouts, alternated.

    .venv/bin/python benchmarks/rerun_tables.py --base 337842a \\
        --study studies/post002_throughput_law_mini.yaml --results /tmp/rerun-meas --rounds 3

A rerun cell's result is new, so the aggregate and every analysis step after it run again:
``snakemake --forcerun aggregate`` runs exactly those jobs, without the cell's own
measuring time (which is the cell's, not the workflow's). A is a checkout of ``--base`` (a
git worktree under the system's temporary folder, made once), B this checkout; each runs
its own workflow code (its ``src`` first on PYTHONPATH) with this checkout's Snakemake, on
the same results folder. Rounds alternate the order (A B, then B A). The study is run
first from B where its results are missing. Prints each run's wall seconds and, per side,
the median and range. Each side runs once untimed first: a checkout's first run also
writes its Snakemake records (and may remake what its own code makes differently).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import page

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def worktree(commit: str) -> Path:
    """A checkout of ``commit`` (made once, then reused)."""
    resolved = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", commit], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(tempfile.gettempdir()) / f"dpscale-base-{resolved[:12]}"
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), resolved],
            check=True,
            capture_output=True,
        )
    return path


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def snakemake(checkout: Path, study: Path, results_file: Path, *extra: str) -> tuple[float, float]:
    """Wall and CPU seconds of one Snakemake run of ``study`` from ``checkout`` (the CPU of
    Snakemake and every job it started)."""
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    command = [str(SNAKEMAKE), "--configfile", str(study), str(results_file), "-c2", "-q"]
    started, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(
        [*command, *extra], cwd=checkout, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"snakemake failed in {checkout}:\n{(done.stdout + done.stderr)[-3000:]}")
    return seconds, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare with (A)")
    parser.add_argument(
        "--study", type=Path, default=Path("studies/post002_throughput_law_mini.yaml")
    )
    parser.add_argument("--results", type=Path, default=Path("/tmp/rerun-meas"))
    parser.add_argument("--rounds", type=int, default=3)
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    study = args.study.resolve()
    results_file = Path(tempfile.gettempdir()) / "dpscale-rerun-results.yaml"
    results_file.write_text(f"results_dir: {args.results.resolve()}\n")
    sides = {"A": worktree(args.base), "B": REPO}
    print("the study once, from B (its cells; skipped where done):", flush=True)
    print(f"  {snakemake(REPO, study, results_file)[0]:.1f} s", flush=True)
    for side, checkout in sides.items():  # untimed: a checkout's first run writes its records
        took, _ = snakemake(checkout, study, results_file, "--forcerun", "aggregate")
        print(f"warm-up {side}: {took:.1f} s (not counted)", flush=True)
    seconds: dict[str, list[float]] = {"A": [], "B": []}
    cpu: dict[str, list[float]] = {"A": [], "B": []}
    for round_ in range(args.rounds):
        for side in ("A", "B") if round_ % 2 == 0 else ("B", "A"):
            took, used = snakemake(sides[side], study, results_file, "--forcerun", "aggregate")
            seconds[side].append(took)
            cpu[side].append(used)
            print(f"round {round_ + 1} {side}: {took:.1f} s, {used:.1f} s of CPU", flush=True)
    rows = [
        "| side | checkout | runs (s) | median (s) | range (s) | CPU median (s) | CPU range (s) |",
        "|---|---|---|---:|---|---:|---|",
    ]
    for side, runs in seconds.items():
        listed = " ".join(f"{s:.1f}" for s in runs)
        rows.append(
            f"| {side} | {sides[side]} | {listed} | {statistics.median(runs):.1f} | "
            f"{min(runs):.1f}-{max(runs):.1f} | {statistics.median(cpu[side]):.1f} | "
            f"{min(cpu[side]):.1f}-{max(cpu[side]):.1f} |"
        )
    caption = (
        f"`snakemake --forcerun aggregate -c2` on {args.study} (its results in "
        f"{args.results}): the aggregate and every analysis step, as after one rerun cell."
    )
    ratio = statistics.median(seconds["B"]) / statistics.median(seconds["A"])
    cpu_ratio = statistics.median(cpu["B"]) / statistics.median(cpu["A"])
    page.print_page(
        "Tables up to date after one rerun cell",
        [caption, "\n".join(rows), f"B / A (medians): wall {ratio:.2f}, CPU {cpu_ratio:.2f}"],
        run,
        "",
        args.page,
    )


if __name__ == "__main__":
    main()
