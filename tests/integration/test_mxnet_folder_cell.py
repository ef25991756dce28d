"""A folder cell end to end in MXNet: mxnet-dist, 2 workers, a generated image folder read
through Gluon's pipeline by the real launcher, in the mxnet environment test_runners.py uses."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dpscale.launch.setup.envs import ensure_env, env_python
from dpscale.plan.cell import FolderInput
from helpers.folder_cell import images_read_per_rank, launch_folder_cell
from helpers.image_folder import write_image_folder

pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]


def test_mxnet_dist_folder_cell_shards_the_images_and_times_the_loader(tmp_path: Path):
    folder = write_image_folder(tmp_path / "images")
    (folder / "class1" / "broken.jpg").write_bytes(b"not an image at all")
    (folder / "class2" / "deeper").mkdir()  # Gluon lists a class folder's own files only
    (folder / "class2" / "deeper" / "nested.jpg").write_bytes(b"left out, never decoded")
    settings = FolderInput(str(folder), workers=1, prefetch=2, pin_memory=False)
    result = launch_folder_cell(tmp_path, "mxnet-dist", "mxnet", 2, settings)
    measurement = result["measurement"]
    assert len(measurement["per_rank_window_seconds"]) == 2
    pipeline = measurement["pipeline"]
    assert len(pipeline["per_rank_window_seconds"]) == 2
    assert pipeline["bound_by"] in {"loader", "device"}
    # 1 worker x prefetch 2 would come at once: the loader's warm-up discards them
    assert pipeline["warmup_batches"] == 1 * 2 + 1
    read = result["system"]["image_folder"]
    assert read["pipeline"] == "gluon.data.vision.ImageFolderDataset"
    assert (read["classes"], read["images"], read["nested_images_left_out"]) == (3, 25, 1)
    assert read["persistent_workers"] is True  # Gluon's pool lives with its loader
    # both workers read from the folder: the timed steps and the loader alone
    assert read["images_read"] == [images_read_per_rank(pipeline)] * 2
    # 12 batches of 2 per worker cover its shard of 12 every epoch: the broken file is
    # read by the worker whose shard holds it, skipped, counted once and named
    assert read["skipped_count"] == 1
    assert read["skipped_files"] == [str(folder / "class1" / "broken.jpg")]
    assert len(set(result["measurement"]["rank_param_checksums"])) == 1


def test_mxnet_device_folder_cell_loads_in_its_process(tmp_path: Path):
    folder = write_image_folder(tmp_path / "images", classes=2, per_class=3)
    (folder / "class0" / "broken.png").write_bytes(b"")
    result = launch_folder_cell(
        tmp_path, "mxnet-device", "mxnet", 1, FolderInput(str(folder), workers=0)
    )
    pipeline = result["measurement"]["pipeline"]
    assert len(pipeline["per_rank_window_seconds"]) == 1
    read = result["system"]["image_folder"]
    assert (read["classes"], read["images"], read["nested_images_left_out"]) == (2, 7, 0)
    assert read["prefetch"] is None and read["persistent_workers"] is None
    assert read["images_read"] == [images_read_per_rank(pipeline)]
    # 3 batches of 2 per epoch from 7 images, over 4 epochs: the empty file comes up
    assert read["skipped_files"] == [str(folder / "class0" / "broken.png")]


SHARDS = """
import json
from dpscale.frameworks.mxnet_folder import ShardSampler
shards = {}
for epoch in (0, 1):
    for rank in (0, 1, 2):
        sampler = ShardSampler(length=11, rank=rank, size=3, seed=5)
        sampler.set_epoch(epoch)
        shards[f"{epoch}.{rank}"] = list(sampler)
print(json.dumps(shards))
"""


def test_each_worker_takes_its_own_share_of_every_epoch():
    """MXNet 1.9 has no splitting sampler: dpscale's deals every epoch over the workers."""
    python = env_python(ensure_env("mxnet"))
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run(
        [str(python), "-c", SHARDS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "PYTHONPATH": src},
    )
    shards = json.loads(done.stdout.strip().splitlines()[-1])
    for epoch in (0, 1):
        mine = [shards[f"{epoch}.{rank}"] for rank in (0, 1, 2)]
        assert [len(share) for share in mine] == [3, 3, 3]  # 11 cut to 9: equal shares
        every = [index for share in mine for index in share]
        assert len(set(every)) == 9 and set(every) <= set(range(11))
    assert shards["0.0"] != shards["1.0"]  # a new shuffle each epoch
