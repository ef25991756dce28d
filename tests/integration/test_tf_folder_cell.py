"""A folder cell end to end on TensorFlow: horovod-tf, 2 ranks, a generated image folder
read through tf.data by the real launcher, in the environment test_runners.py uses."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dpscale.launch.setup.envs import ensure_env, env_python
from dpscale.plan.cell import FolderInput
from helpers.folder_cell import images_read_per_rank, launch_folder_cell
from helpers.image_folder import write_image_folder

pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]


def test_horovod_tf_folder_cell_trains_on_each_ranks_shard_and_times_the_loader(tmp_path: Path):
    folder = write_image_folder(tmp_path / "images")
    broken = folder / "class1" / "broken.jpg"  # first of class1: in rank 0's shard
    broken.write_bytes(b"not an image at all")
    settings = FolderInput(str(folder), workers=1, prefetch=2)
    result = launch_folder_cell(tmp_path, "horovod-tf", "tf-horovod", 2, settings)
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
    assert read["images_read"] == [images_read_per_rank(pipeline)] * 2
    # rank 0's shuffled epochs (seed 0) reach the broken file: skipped, counted once, named
    assert read["skipped_count"] == 1
    assert read["skipped_files"] == [str(broken)]


NOTHING_DECODES = """
import sys
from dpscale.frameworks.tf_folder import FolderPipeline
from dpscale.plan.cell import Cell, FolderInput, ModelConfig
cell = Cell("t", "horovod-tf", ModelConfig("resnet18", "imagenet", 32, 10), "folder", 1, 1, 2,
            image_folder=FolderInput(sys.argv[1], workers=1, prefetch=2))
try:
    FolderPipeline(cell, 2, 0, 1).batches.next()
except RuntimeError as error:
    print("refused:", error)
"""


def test_a_shard_none_of_whose_files_decodes_ends_with_one_line(tmp_path: Path):
    """The epochs follow one another in chunks: a shard of broken files ends its chunks
    with the no-full-batch line instead of reading forever."""
    folder = tmp_path / "images"
    for name in ("a", "b"):
        (folder / name).mkdir(parents=True)
        (folder / name / "broken.jpg").write_bytes(b"not an image at all")
    done = subprocess.run(
        [str(env_python(ensure_env("tf-horovod"))), "-c", NOTHING_DECODES, str(folder)],
        capture_output=True, text=True, timeout=300, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
    )  # fmt: skip
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("refused: image_folder: ") and "no full batch of 2" in last, last
