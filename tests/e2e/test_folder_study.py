"""A user's image folder end to end through Snakemake: each framework reads it through its
own input pipeline, beside the synthetic cell of the same layout, into the tables and the
report, which say what binds."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO, built_envs
from helpers.image_folder import write_image_folder

# side_by_side: no test here asserts a measured speed; every count is of cells and rows
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]
STUDY = REPO / "tests" / "data" / "folder.yaml"
CONFIG = yaml.safe_load(STUDY.read_text(encoding="utf-8"))
STRATEGIES = CONFIG["strategies"]


def snakemake(*args: str, study: Path, results: Path) -> None:
    command = [sys.executable, "-m", "snakemake", "--configfile", str(study)]
    command += ["--config", f"results_dir={results}"]
    run = subprocess.run([*command, *args], cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("folder_study")
    images = write_image_folder(work / "images")
    # the folder the test wrote; one rank per cell and its loader's worker fit 2 cores
    study = work / "folder.yaml"
    study.write_text(
        yaml.safe_dump({**CONFIG, "image_folder": {"path": str(images), "workers": 1}})
    )
    results = work / "results"
    built_envs(STRATEGIES)
    snakemake(study=study, results=results)
    snakemake("--report", str(results / "report.html"), study=study, results=results)
    return results


def results_by_id(results: Path) -> dict[str, dict]:
    cells = results / "folder" / "cells"
    return {
        str(p.relative_to(cells).with_suffix("")): json.loads(p.read_text())
        for p in cells.rglob("*.json")
    }


def test_each_framework_reads_the_folder_through_its_own_pipeline(study):
    found = results_by_id(study)
    zoo = {key: cell for key, cell in found.items() if "/torchvision." in key}
    shared = {key: cell for key, cell in found.items() if key not in zoo}
    assert {cell["status"] for cell in shared.values()} == {"ok"}, {
        k: v["reason"] for k, v in shared.items() if v["status"] != "ok"
    }
    pipelines = {
        key.split("/")[0]: cell["system"]["image_folder"]["pipeline"]
        for key, cell in shared.items()
        if "/folder/" in key
    }
    assert set(pipelines) == set(STRATEGIES)
    assert pipelines["torch-ddp"] == "torchvision.datasets.ImageFolder"
    assert pipelines["horovod-tf"].startswith("tf.data")
    assert pipelines["mxnet-dist"] == "gluon.data.vision.ImageFolderDataset"


def test_a_torchvision_model_trains_where_torch_builds_it_and_is_skipped_elsewhere(study):
    zoo = {k: v for k, v in results_by_id(study).items() if "/torchvision." in k}
    assert len(zoo) == 2 * len(STRATEGIES)  # synthetic and folder, per strategy
    for key, cell in zoo.items():
        if key.startswith("torch-ddp/"):
            assert cell["status"] == "ok", cell["reason"]
            info = cell["model_info"]
            # MobileNetV3-Small: about 1.5 M parameters at 3 classes; a few MFLOPs at 32 px
            assert 1_000_000 < info["trainable_params"] < 2_500_000
            assert 1_000_000 < info["forward_flops_per_sample"] < 20_000_000
            assert info["train_flops_per_sample"] == 3 * info["forward_flops_per_sample"]
            # both ranks built and stepped the same model
            assert len(set(cell["measurement"]["rank_param_checksums"])) == 1
        else:
            assert cell["status"] == "skipped" and "torchvision" in cell["reason"], cell


def test_the_pipeline_table_sets_folder_beside_synthetic_and_names_what_binds(study):
    table = pd.read_csv(study / "folder" / "tables" / "input_pipeline.csv")
    # one row per folder cell that ran: each framework's ResNet and torch's zoo model
    assert sorted(table["strategy"]) == sorted([*STRATEGIES, "torch-ddp"])
    for column in ("synthetic_img_s", "folder_img_s", "loader_alone_img_s"):
        assert table[column].str.endswith("img/s").all(), table[column]
        assert table[column].str.contains(r"\[").all()  # each with its interval
    verdicts = r"(the loader|the training step|a tie|unresolved)\b"
    assert table["binds"].str.match(verdicts).all(), table["binds"]


def test_the_report_shows_the_pipeline_page(study):
    text = (study / "report.html").read_text()
    pages = set(re.findall(r'"name": "([^"]+)", "filename"', text))
    assert "input_pipeline.html" in pages, pages
