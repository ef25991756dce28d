"""A folder cell end to end on TensorFlow: horovod-tf, 2 ranks, a generated image folder
read through tf.data by the real launcher, in the environment test_runners.py uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpscale.launch import launcher
from dpscale.launch.setup.envs import ensure_env
from dpscale.plan.cell import Cell, FolderInput, Measure, ModelConfig
from dpscale.plan.result import read_result
from helpers.image_folder import write_image_folder

pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]

MODEL = ModelConfig("resnet18", "imagenet", 32, 10)
MEASURE = Measure(warmup_steps=1, windows=2, steps_per_window=2, timeout_s=600)


def test_horovod_tf_folder_cell_trains_on_each_ranks_shard_and_times_the_loader(tmp_path: Path):
    folder = write_image_folder(tmp_path / "images")
    broken = folder / "class1" / "broken.jpg"  # first of class1: in rank 0's shard
    broken.write_bytes(b"not an image at all")
    settings = FolderInput(str(folder), workers=1, prefetch=2)
    cell = Cell(
        "test", "horovod-tf", MODEL, "folder", 1, 2, 2, measure=MEASURE, image_folder=settings
    )
    out = cell.result_path(tmp_path / "results")
    status = launcher.launch(cell, out, ensure_env("tf-horovod"), tmp_path / "cell.log")
    result = read_result(out)  # validates against the schema
    log = (tmp_path / "cell.log").read_text()[-3000:]
    assert status == result["status"] == "ok", (result["reason"], log)
    assert result["cell"]["image_folder"]["path"] == str(folder)
    measurement = result["measurement"]
    assert len(measurement["per_rank_window_seconds"]) == 2
    pipeline = measurement["pipeline"]
    assert len(pipeline["per_rank_window_seconds"]) == 2
    assert pipeline["bound_by"] in {"loader", "device"}
    # 1 parallel call x prefetch 2 batches held ready: the loader's warm-up discards them
    assert pipeline["warmup_batches"] == 1 * 2 + 1
    read = result["system"]["image_folder"]
    assert read["pipeline"].startswith("tf.data")
    assert (read["classes"], read["images"]) == (3, 25)
    assert (read["num_parallel_calls"], read["prefetch_batches"]) == (1, 2)
    # both ranks read their shard: the timed steps and the loader alone
    steps = MEASURE.warmup_steps + MEASURE.windows * MEASURE.steps_per_window
    loader = pipeline["warmup_batches"] + MEASURE.windows * MEASURE.steps_per_window
    assert read["images_read"] == [(steps + loader) * 2] * 2
    # rank 0's shuffled epochs (seed 0) reach the broken file: skipped, counted once, named
    assert read["skipped_count"] == 1
    assert read["skipped_files"] == [str(broken)]
