"""Snakemake's scheduler with dpscale's coalesced re-evaluations
(launch/snakemake_hooks/scheduler_fix.py): jobs that wait for a resource cost two scheduling
passes per finished job, not a new 1-Hz chain per finished job."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dpscale.launch.snakemake_hooks.scheduler_fix import coalesce_reevaluations

# side_by_side: the passes are counted per finished job, however busy the machine is
# (tests/conftest.py)
pytestmark = pytest.mark.side_by_side
REPO = Path(__file__).resolve().parents[2]
JOBS = 8

SNAKEFILE = f"""
import sys
sys.path.insert(0, {str(REPO / "src")!r})
from dpscale.launch.snakemake_hooks.scheduler_fix import coalesce_reevaluations
coalesce_reevaluations()

rule all:
    input: expand("out/{{i}}.txt", i=range({JOBS}))

rule one:
    output: "out/{{i}}.txt"
    resources: slot=1
    shell: "sleep 1; touch {{output}}"
"""


def test_the_patched_method_exists_in_this_snakemake() -> None:
    assert coalesce_reevaluations()


def test_waiting_jobs_cost_two_passes_per_finished_job(tmp_path: Path) -> None:
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    command = [sys.executable, "-m", "snakemake", "--cores", "2", "--resources", "slot=1"]
    command += ["--scheduler", "greedy", "--verbose"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    passes = len(re.findall(r"Ready jobs", done.stderr + done.stdout))
    # Unpatched, pass k+1 comes (1 + k) times a second: about 44 passes for 8 jobs of 1 s.
    assert JOBS <= passes <= 2 * JOBS + 2, passes
