"""How much CPU do Snakemake's main process and the launcher take while cells measure?

    .venv/bin/python benchmarks/footprint.py [--src src] [--cells-only]

Runs a small study (torch-ddp, resnet18 64 px, batch 16, 1 and 2 processes, 5 x 5 steps)
with ``snakemake cells`` (its results under a scratch folder), and samples /proc every
0.2 s: the CPU time (utime + stime, last value before each exits) of Snakemake's main
process, of the Snakemake process it starts per job (``--target-jobs``, which runs the
rule's ``run:`` block), and of every ``dpscale.launch`` process (their own CPU, not their
children's), and
the wall time each launcher ran. Prints each figure and the launcher's CPU as a share of
one core over its run. ``--src`` points the launcher at another source tree (e.g. an
exported older commit) to compare before/after: ``PYTHONPATH`` is prepended for the jobs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

import page
from dpscale.launch.contention import CLOCK_TICKS
from dpscale.plan.paths import REPO_ROOT

STUDY = {
    "study": "footprint",
    "strategies": ["torch-ddp"],
    "models": [{"name": "resnet18", "stem": "imagenet", "image_size": 64, "classes": 10}],
    "batch_sizes": [16],
    "devices_per_node": [1, 2],
    "modes": ["synthetic"],
    "measure": {"warmup_steps": 5, "windows": 5, "steps_per_window": 5, "repeats": 1},
}


def proc_stat(pid: int) -> tuple[str, int, float] | None:
    """(command line, own CPU jiffies, start time in jiffies since boot) of a process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2 :].split()
    return cmdline, int(rest[11]) + int(rest[12]), float(rest[19])


def children_tree(root: int) -> set[int]:
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                rest = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(rest[rest.rfind(")") + 2 :].split()[1])
    tree, todo = {root}, [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                todo.append(pid)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, help="source tree for the launcher (PYTHONPATH)")
    page.add_page_option(parser)
    args = parser.parse_args()
    run = page.describe_run()
    with tempfile.TemporaryDirectory(prefix="dpscale-footprint-") as scratch:
        config = dict(STUDY, results_dir=scratch, env_dir=str(REPO_ROOT / ".envs"))
        config_file = Path(scratch) / "study.yaml"
        config_file.write_text(yaml.safe_dump(config))
        env = dict(os.environ)
        if args.src:
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(args.src), env.get("PYTHONPATH")])
            )
        command = [sys.executable, "-m", "snakemake", "--configfile", str(config_file)]
        command += ["--cores", "2", "cells"]
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        seen: dict[int, tuple[str, int, float, float]] = {}  # pid -> cmd, cpu, first, last
        while process.poll() is None:
            now = time.monotonic()
            for pid in children_tree(process.pid):
                stat = proc_stat(pid)
                if stat is None:
                    continue
                cmd, cpu, _ = stat
                first = seen.get(pid, (cmd, cpu, now, now))[2]
                seen[pid] = (cmd, cpu, first, now)
            time.sleep(0.2)
        wall = time.monotonic() - started
    if process.returncode != 0:
        raise SystemExit(f"snakemake exited with {process.returncode}")
    _, main_cpu, _, _ = seen[process.pid]
    print(f"snakemake main process: {main_cpu / CLOCK_TICKS:.2f} CPU s over {wall:.1f} s wall")
    rows = [["snakemake main process", f"{main_cpu / CLOCK_TICKS:.2f}", f"{wall:.1f}", ""]]
    jobs = {pid: v for pid, v in seen.items() if "--target-jobs" in v[0] and pid != process.pid}
    for pid, (cmd, cpu, first, last) in sorted(jobs.items()):
        target = cmd.split("--target-jobs", 1)[1].split()[0][:60]
        print(
            f"snakemake job process {pid} ({target}): {cpu / CLOCK_TICKS:.2f} CPU s "
            f"over {last - first:.1f} s"
        )
        rows.append(
            [f"job {pid} ({target})", f"{cpu / CLOCK_TICKS:.2f}", f"{last - first:.1f}", ""]
        )
    launchers = {
        pid: v
        for pid, v in seen.items()
        if " dpscale.launch " in v[0] and Path(v[0].split()[0]).name.startswith("python")
    }
    for pid, (_, cpu, first, last) in sorted(launchers.items()):
        seconds = last - first
        print(
            f"launcher {pid}: {cpu / CLOCK_TICKS:.2f} CPU s over {seconds:.1f} s "
            f"({100 * cpu / CLOCK_TICKS / seconds:.2f}% of a core)"
        )
        share = f"{100 * cpu / CLOCK_TICKS / seconds:.2f}"
        rows.append([f"launcher {pid}", f"{cpu / CLOCK_TICKS:.2f}", f"{seconds:.1f}", share])
    caption = (
        "Own CPU (utime + stime) of each process, sampled from /proc every 0.2 s; wall: the "
        "study's for the main process, from first to last sample for the others."
    )
    table = page.table(["process", "CPU s", "wall s", "% of a core"], rows)
    page.print_page("Snakemake and launcher CPU footprint", [caption, table], run, path=args.page)


if __name__ == "__main__":
    main()
