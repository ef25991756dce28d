"""Every strategy trains real data (digits, 16 px) to the same accuracy through its launcher.

The config is the default study's training config (4 epochs, linear lr rule, warm-up, cosine,
SGD momentum 0.9, weight decay 5e-4); PyTorch reaches about 0.96 with it. Each runs in its
framework environment (built once, then cached under .envs/); multi-process strategies must
end with every rank holding bit-identical parameters.
"""

from __future__ import annotations

import time
from functools import cache
from pathlib import Path

import pytest

from dpscale.launch import launcher
from dpscale.launch.setup.dataprep import prepare_digits
from dpscale.launch.setup.envs import ensure_env
from dpscale.plan.cell import Cell, Measure, ModelConfig, Training
from dpscale.plan.result import read_result
from dpscale.registry import STRATEGIES, strategy

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]

MODEL = ModelConfig("resnet18", "imagenet", 16, 10)
TARGET = 0.8


@cache
def prefix_for(env: str) -> Path:
    return ensure_env(env)


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    return prepare_digits(tmp_path_factory.mktemp("data"), image_size=16)


def training_cell(name: str, digits: Path) -> Cell:
    training = Training(
        dataset="digits",
        dataset_file=str(digits),
        epochs=4,
        lr_rule="linear",
        base_lr=0.025,
        base_batch=32,
        warmup_epochs=1.0,
        schedule="cosine",
        momentum=0.9,
        weight_decay=5e-4,
        augment=False,
        target_accuracy=TARGET,
    )
    devices = 1 if strategy(name).one_process else 2
    return Cell(
        "test",
        name,
        MODEL,
        "train",
        1,
        devices,
        32,
        measure=Measure(timeout_s=900),
        training=training,
    )


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_strategy_trains_to_the_target(tmp_path, digits, name):
    cell = training_cell(name, digits)
    out = cell.result_path(tmp_path / "results")
    log = tmp_path / "cell.log"
    prefix = prefix_for(strategy(name).env)
    start = time.perf_counter()
    status = launcher.launch(cell, out, prefix, log)
    wall = time.perf_counter() - start
    result = read_result(out)  # validates against the schema
    assert status == result["status"] == "ok", (result.get("reason"), log.read_text()[-3000:])
    training = result["training"]
    accuracies = " ".join(f"{e['val_accuracy']:.3f}" for e in training["epochs"])
    print(f"{name}: val accuracy by epoch {accuracies}, {wall:.1f} s launch to result")
    assert training["final_val_accuracy"] >= TARGET, training["epochs"]
    assert len(training["epochs"]) == 4
    for epoch in training["epochs"]:  # the epoch's sums were reduced over every rank
        assert epoch["train_images"] == training["steps_per_epoch"] * cell.global_batch
    checksums = training["rank_param_checksums"]
    assert len(checksums) == cell.world_size and len(set(checksums)) == 1, checksums
    assert result["framework"] == strategy(name).framework
