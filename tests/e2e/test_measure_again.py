"""A cell measured on a busy machine is measured once more after the last cell: both results
are kept, the tables use the better one and say which (config measure.again)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from dpscale.plan.result import read_result, write_json_atomic
from helpers.fake_study import write_fake_study

pytestmark = pytest.mark.slow
STUDY_FILE = REPO / "tests" / "data" / "browser.yaml"
NOISY = "torch-ddp/resnet18-imagenet32-c10/synthetic/n1-d2-b8-r0"


def snakemake(*args: str, results: Path, envs: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", *args, "--configfile", str(STUDY_FILE)]
    command += ["--config", f"results_dir={results}", f"env_dir={envs}", "--cores", "2"]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def test_a_noisy_cell_is_measured_again_and_both_results_are_kept(tmp_path):
    results, envs = tmp_path / "results", tmp_path / "envs"
    config = write_fake_study(STUDY_FILE, results, envs)
    study = results / config["study"]
    first_path = study / "cells" / f"{NOISY}.json"
    first = read_result(first_path)
    first.update(quality="noisy", quality_reason="other processes used 0.12 cores")
    write_json_atomic(first_path, first)
    first_bytes = first_path.read_bytes()

    snakemake(str(study / "tables" / "cells.csv"), results=results, envs=envs)

    review = json.loads((study / "tables" / "measure_again.json").read_text())
    assert review["measure_again"] == [NOISY]
    # the written study has no framework to run, so the second measurement fails and says so;
    # the first is kept, untouched
    second = read_result(study / "cells" / f"{NOISY}.again.json")
    assert second["status"] == "failed" and second["reason"]
    assert first_path.read_bytes() == first_bytes
    import pandas as pd

    cells = pd.read_csv(study / "tables" / "cells.csv").set_index("cell_id")
    assert cells.loc[NOISY, ["measured_again", "first_quality", "kept"]].tolist() == [
        True,
        "noisy",
        "first",
    ]
    assert cells.loc[NOISY, "quality"] == "noisy" and cells.loc[NOISY, "status"] == "ok"
    assert not cells.drop(index=NOISY)["measured_again"].any()

    # nothing left to do: the review and the second measurement are not repeated
    run = snakemake(str(study / "tables" / "cells.csv"), "-n", results=results, envs=envs)
    assert "measure_again" not in run.stdout and "Nothing to be done" in run.stdout + run.stderr
