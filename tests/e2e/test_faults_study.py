"""Snakemake killed mid-study: the next run needs --unlock, keeps every finished result,
and measures only the cells without one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dpscale.plan.result import read_result
from helpers.processes import GRACE_S, cmdline, marked, wait_for

# side_by_side: the study measures each cell once (again: []) and the test counts results and
# reruns, never a measured speed or quality (tests/conftest.py)
pytestmark = pytest.mark.side_by_side

KILLED_STUDY = """\
study: killed
strategies: [torch-dp, torch-ddp]
models:
  - {name: resnet18, stem: imagenet, image_size: 32, classes: 10}
batch_sizes: [2, 4]
devices_per_node: [1, 2]
nodes: [1]
modes: [synthetic]
# again: []: a cell that reads noisy is not measured a second time, so the results counted
# here are the first ones only, however busy the machine (measure again has its own test)
measure: {warmup_steps: 1, windows: 3, steps_per_window: 2, repeats: 1, timeout_s: 300, again: []}
controls: []  # the cells counted here: no control cells (the tiny study runs them)
"""


def snakemake_command(study: Path, results: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        *args,  # before --config, which takes every word after it
        "--configfile",
        str(study),
        "--config",
        f"results_dir={results}",
    ]


def checksums(folder: Path) -> dict[str, str]:
    import hashlib

    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*.json"))
    }


def cell_in_flight(mark: str) -> Path | None:
    """The result path of a cell whose launcher runs and has not written it yet."""
    for pid in marked(mark):
        words = cmdline(pid).split()
        if "dpscale.launch" in words and "--out" in words:
            out = Path(words[words.index("--out") + 1])
            if not out.exists():
                return out
    return None


def test_snakemake_killed_mid_study_needs_unlock_and_reruns_only_unfinished_cells(tmp_path, mark):
    from conftest import REPO, built_envs

    built_envs(["torch-dp", "torch-ddp"])  # side by side, no other study's Snakemake builds it
    study, results = tmp_path / "killed.yaml", tmp_path / "results"
    study.write_text(KILLED_STUDY)
    cells = results / "killed" / "cells"
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(
            snakemake_command(study, results, "cells"),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        in_flight = wait_for(
            lambda: (
                (len(list(cells.rglob("*.json"))) >= 3 and cell_in_flight(mark))
                or first.poll() is not None
            ),
            900,
            "three results and a cell being measured",
        )
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        before = checksums(cells)
        first.kill()  # SIGKILL: no chance to clean up or release its lock
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=30)
    # the cell job it was running is an orphan now: it finishes its cell (or its timeout)
    wait_for(lambda: not marked(mark), 300 + GRACE_S, "the orphaned cell job to end")

    again = subprocess.run(
        snakemake_command(study, results, "cells"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert again.returncode != 0
    assert "LockException" in again.stdout + again.stderr
    unlock = snakemake_command(study, results, "cells", "--unlock")
    subprocess.run(unlock, cwd=REPO, capture_output=True, timeout=300, check=True)
    rerun = subprocess.run(
        snakemake_command(study, results, "cells"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]

    after = checksums(cells)
    assert len(after) == 8 and in_flight.is_file()
    assert {name: after[name] for name in before} == before  # finished cells were kept
    runs = results / "killed" / "runs"
    assert all(len(list((runs / name).with_suffix("").iterdir())) == 1 for name in before)
    # every other cell ran now. The one it was measuring ran again where Snakemake had marked
    # it incomplete; where the kill came before that mark, its orphaned job's result stands
    # (the run's log says which), and it must then be a whole, valid result
    log = rerun.stdout + rerun.stderr
    jobs = re.search(r"^bench_cell\s+(\d+)$", log, re.M)
    in_flight_again = f"output: {in_flight}" in log
    if not in_flight_again:
        assert read_result(in_flight)["status"] in {"ok", "skipped"}, log[-3000:]
    expected = len(after) - len(before) - (0 if in_flight_again else 1)
    assert jobs and int(jobs.group(1)) == expected, log[-3000:]
    print(f"killed with {len(before)} of {len(after)} results written; rerun: {jobs.group(1)} jobs")
