"""dpscale predict --calibrate on a small run's folder cells (a user's images read through the
framework's input pipeline): the prediction is then for folder training and says so; a small
run of both modes is calibrated on the one named (--mode), never on the two pooled."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from test_calibrated_predict import STUDY, cluster

from conftest import aggregate, make_cell
from dpscale import cli
from dpscale.plan.cell import FolderInput, ModelConfig, Network
from dpscale.plan.result import now_iso
from dpscale.runner.records import write_synthetic_result

# the evidence study's strategy, model and batch (its one-device profile prices the link)
MODEL = ModelConfig("resnet18", "imagenet", 64, 10)
BATCH = 32
ONE_GBIT = Network("1gbit", rate="1gbit", delay="0us")
ONE_DEVICE_STEP_S = 0.5
# weak-scaling efficiency at two nodes (one device each) of the fabricated cells, by mode
EFFICIENCY = {"synthetic": 0.55, "folder": 0.3}


def write_cell(root: Path, mode: str, nodes: int) -> Path:
    """One ok cell of ``mode`` on ``nodes`` nodes of one device, written by the runner's own
    writer; its step time gives the mode's efficiency at two nodes. A folder cell carries
    its loader alone and its folder's record, as one measured does."""
    cell = replace(
        make_cell(nodes=nodes, devices=1, batch=BATCH, mode=mode),
        model=MODEL,
        network=ONE_GBIT if nodes > 1 else make_cell().network,
        image_folder=FolderInput("images") if mode == "folder" else None,
    )
    step_s = ONE_DEVICE_STEP_S / (EFFICIENCY[mode] if nodes > 1 else 1.0)
    windows = [[cell.measure.steps_per_window * step_s] * cell.measure.windows] * nodes
    folder = {
        "pipeline": "torchvision ImageFolder",
        "path": "images",
        "classes": 2,
        "images": 640,
        "images_read": [64] * nodes,
        "skipped_count": 0,
        "skipped_files": [],
    }
    out = root / "cells" / f"{mode}-{nodes}.json"
    write_synthetic_result(
        cell,
        out,
        started_at=now_iso(),
        per_rank_windows=windows,
        framework="torch",
        framework_versions={"torch": "2"},
        threads_used=1,
        trainable_params=1000,
        system_extra={"image_folder": folder} if mode == "folder" else None,
        pipeline_windows=[[0.01] * cell.measure.windows] * nodes if mode == "folder" else None,
        pipeline_warmup=2,
    )
    return out


def small_run(tmp_path: Path, *modes: str, nodes: tuple[int, ...] = (1, 2)) -> Path:
    """A small run's results folder: each mode's cells written as result files, its tables
    made by the aggregate rule's own step."""
    root = tmp_path / "small"
    paths = [write_cell(root, mode, n) for mode in modes for n in nodes]
    aggregate(root / "tables", paths)
    return root


def predict(tmp_path: Path, small: Path, *words: str) -> pd.DataFrame:
    out = tmp_path / "predicted.csv"
    cli.main(
        ["predict", "--results", str(STUDY), "--cluster", str(cluster(tmp_path))]
        + ["--calibrate", str(small), "--out", str(out), *words]
    )
    return pd.read_csv(out).set_index("nodes")


def test_folder_cells_calibrate_a_prediction_for_folder_training(tmp_path, capsys):
    table = predict(tmp_path, small_run(tmp_path, "folder"))
    # one measured scale: the calibrated law passes through it
    assert table.loc[2, "calibrated_efficiency"] == pytest.approx(EFFICIENCY["folder"])
    assert (table["calibrated_mode"] == "folder").all()
    assert table["calibration"].str.startswith("folder cells, for training from an image").all()
    printed = capsys.readouterr().out
    assert "calibrated for folder training 30%" in printed
    assert "Calibrated on the small run's folder cells, so for training from its image" in printed


def test_synthetic_cells_calibrate_as_before(tmp_path, capsys):
    table = predict(tmp_path, small_run(tmp_path, "synthetic"))
    assert table.loc[2, "calibrated_efficiency"] == pytest.approx(EFFICIENCY["synthetic"])
    assert (table["calibrated_mode"] == "synthetic").all()
    assert "folder" not in capsys.readouterr().out


def test_a_small_run_of_both_modes_is_one_line_until_one_is_named(tmp_path):
    small = small_run(tmp_path, "synthetic", "folder")
    with pytest.raises(SystemExit) as stop:
        predict(tmp_path, small)
    said = str(stop.value)
    assert "mode: the small run measured both folder and synthetic cells" in said
    assert "allowed: ['folder', 'synthetic']" in said and "\n" not in said
    for mode, efficiency in EFFICIENCY.items():
        table = predict(tmp_path, small, "--mode", mode)
        assert table.loc[2, "calibrated_efficiency"] == pytest.approx(efficiency)
        assert (table["calibrated_mode"] == mode).all()


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (
            ("--mode", "train"),
            "dpscale: predict: --mode: 'train' is not a mode a small run calibrates on; "
            "allowed: ['folder', 'synthetic']",
        ),
        (
            ("--mode", "folder"),
            "dpscale: predict: --mode names the small run's cells; give --calibrate",
        ),
    ],
)
def test_a_mode_that_cannot_be_calibrated_on_is_one_line(tmp_path, words, said):
    calibrate = ("--calibrate", str(tmp_path)) if words[1] == "train" else ()
    with pytest.raises(SystemExit) as stop:
        cli.main(
            ["predict", "--results", str(STUDY), "--cluster", str(cluster(tmp_path))]
            + [*calibrate, *words]
        )
    assert str(stop.value) == said


def test_folder_cells_without_their_one_device_baseline_say_so(tmp_path):
    small = small_run(tmp_path, "folder", nodes=(2,))
    with pytest.raises(SystemExit) as stop:
        predict(tmp_path, small)
    assert "has no folder multi-device cell" in str(stop.value)
    assert "beside a one-device folder cell" in str(stop.value)
