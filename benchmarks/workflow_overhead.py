"""Snakemake's own cost per job: a study's wall time minus its cells' launcher times, over
the number of jobs (issue 8's definition).

    .venv/bin/python benchmarks/workflow_overhead.py --configfile benchmarks/overhead_study.yaml

Runs ``snakemake`` on the study in a fresh results folder (environments as configured, so
build them first with ``snakemake envs``), reads the launcher time of every cell from its
result (``system.launcher.wall_s``: seconds of the whole ``dpscale.launch`` process,
interpreter start-up included), and prints wall time, summed launcher time, jobs and the
overhead per job. ``--repo`` runs another checkout of dpscale (for before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import page

HERE = Path(__file__).resolve().parents[1]


def study_command(
    repo: Path, configfile: Path | None, results: Path, extra: Sequence[str] = ()
) -> tuple[list[str], dict[str, str]]:
    """The ``snakemake`` command (and its environment) that runs a study of ``repo`` on 2
    cores into ``results``; no ``configfile``: the repository's config.yaml alone."""
    env = dict(os.environ, PYTHONPATH=str(repo / "src"))
    command = [str(Path(sys.executable).parent / "snakemake"), "--cores", "2"]
    command += ["--configfile", str(configfile)] if configfile else []
    return [*command, "--config", f"results_dir={results}", *extra], env


def run_study(repo: Path, configfile: Path, results: Path) -> tuple[float, int, str]:
    command, env = study_command(repo, configfile, results)
    started = time.monotonic()
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f"snakemake failed ({done.returncode}):\n{done.stderr[-3000:]}")
    jobs = re.findall(r"^(?:total|\s*\d+)\s+\d+\s*$", done.stderr, re.MULTILINE)
    match = re.search(r"^total\s+(\d+)\s*$", done.stderr, re.MULTILINE)
    return wall, int(match.group(1)) if match else len(jobs), done.stderr


def launcher_seconds(results: Path) -> list[float]:
    seconds = []
    for path in results.rglob("cells/**/*.json"):
        launcher = json.loads(path.read_text())["system"].get("launcher") or {}
        if launcher.get("wall_s") is not None:
            seconds.append(launcher["wall_s"])
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", type=Path, default=HERE / "benchmarks/overhead_study.yaml")
    parser.add_argument("--repo", type=Path, default=HERE)
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    with tempfile.TemporaryDirectory(prefix="dpscale-overhead-") as tmp:
        wall, jobs, _ = run_study(args.repo.resolve(), args.configfile.resolve(), Path(tmp))
        cells = launcher_seconds(Path(tmp))
    if not cells:
        sys.exit("no cell result records system.launcher.wall_s (a checkout before issue 19?)")
    overhead = wall - sum(cells)
    print(
        f"repo {args.repo}: {jobs} jobs ({len(cells)} cells), wall {wall:.1f} s, "
        f"launchers {sum(cells):.1f} s, overhead {overhead:.1f} s = {overhead / jobs:.2f} s/job"
    )
    header = ["repo", "study", "jobs", "cells", "wall s", "launchers s", "overhead s", "s/job"]
    row = [str(args.repo), str(args.configfile), jobs, len(cells), f"{wall:.1f}"]
    row += [f"{sum(cells):.1f}", f"{overhead:.1f}", f"{overhead / jobs:.2f}"]
    caption = (
        "launchers s: the cells' summed dpscale.launch seconds (system.launcher.wall_s of "
        "their results); overhead = wall - launchers."
    )
    table = page.table(header, [row])
    page.print_page("Snakemake cost per job", [caption, table], run, path=args.page)


if __name__ == "__main__":
    main()
