"""A small image folder in ImageNet's layout, written at test time with Pillow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def write_image_folder(
    root: Path, classes: int = 3, per_class: int = 8, size: int = 32, seed: int = 0
) -> Path:
    """``root`` with ``classes`` sub-folders of ``per_class`` random RGB images each, JPEG
    and PNG in turn; returns ``root``."""
    rng = np.random.default_rng(seed)
    for label in range(classes):
        folder = root / f"class{label}"
        folder.mkdir(parents=True)
        for index in range(per_class):
            pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            suffix = "jpg" if index % 2 == 0 else "png"
            Image.fromarray(pixels).save(folder / f"image{index}.{suffix}")
    return root
