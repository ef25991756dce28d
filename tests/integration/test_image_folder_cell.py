"""A folder cell end to end: torch-ddp, 2 ranks, a generated image folder read through the
torch pipeline by the real launcher, in the torch environment test_runners.py uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpscale.plan.cell import FolderInput
from helpers.folder_cell import images_read_per_rank, launch_folder_cell
from helpers.image_folder import write_image_folder

pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]


def test_torch_ddp_folder_cell_trains_on_the_images_and_times_the_loader(tmp_path: Path):
    folder = write_image_folder(tmp_path / "images")
    (folder / "class1" / "broken.jpg").write_bytes(b"not an image at all")
    settings = FolderInput(str(folder), workers=1, prefetch=2, pin_memory=False)
    result = launch_folder_cell(tmp_path, "torch-ddp", "torch", 2, settings)
    measurement = result["measurement"]
    assert len(measurement["per_rank_window_seconds"]) == 2
    pipeline = measurement["pipeline"]
    assert len(pipeline["per_rank_window_seconds"]) == 2
    assert pipeline["bound_by"] in {"loader", "device"}
    # 4 workers x prefetch 2 would come at once: the loader's warm-up discards them
    assert pipeline["warmup_batches"] == 1 * 2 + 1
    read = result["system"]["image_folder"]
    # torchvision's own ImageFolder read it, its C++ operators loaded or not
    assert read["pipeline"] == "torchvision.datasets.ImageFolder"
    assert read.get("torchvision_ops", True) in {True, False}
    assert (read["classes"], read["images"]) == (3, 25)
    # both ranks read from the folder: the timed steps and the loader alone, and more
    assert read["images_read"] == [images_read_per_rank(pipeline)] * 2
    # the shuffled epochs (seed 0) reach the broken file: skipped, counted once, named
    assert read["skipped_count"] == 1
    assert read["skipped_files"] == [str(folder / "class1" / "broken.jpg")]
