"""A user's image folder through torch's input pipeline (mode folder, config ``image_folder``).

torchvision's ImageFolder reads the folder (one sub-folder per class, sorted names giving
the labels, .jpg/.jpeg/.png files at any depth) with the training transforms of torchvision's
ImageNet reference: RandomResizedCrop to the model's image size, RandomHorizontalFlip,
ToTensor, Normalize. Where torchvision does not import (PyPI's wheel beside CPU-only torch),
:class:`FolderStandIn` and :func:`stand_in_transform` apply the same rules on Pillow and
torch, and the result says so. A DataLoader (num_workers, prefetch_factor, pin_memory,
persistent_workers) batches it, with a DistributedSampler across the ranks of torch-ddp.

A file that does not decode is skipped: the next file in the folder's order stands in for
it in its batch, and the skipped file is counted and named in the result, never a failed
cell. Only files a run reads are checked; plan time checked names only
(dpscale.plan.image_folder).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from dpscale.frameworks.folder_batches import EpochBatches
from dpscale.plan.cell import Cell, FolderInput
from dpscale.plan.image_folder import IMAGE_EXTENSIONS, MAX_SKIPS, is_image_name, too_many_skips

# the channel means and deviations of torchvision's ImageNet reference training
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# RandomResizedCrop's defaults: the crop's share of the area, its aspect ratio, its tries
CROP_SCALE, CROP_RATIO, CROP_TRIES = (0.08, 1.0), (3 / 4, 4 / 3), 10
# what a decode failure raises: Pillow's UnidentifiedImageError is an OSError; a truncated
# or malformed file may raise ValueError or SyntaxError inside Pillow's plugins
UNREADABLE = (OSError, ValueError, SyntaxError)
STAND_IN = "dpscale's stand-in for torchvision's ImageFolder and transforms"


def import_torchvision() -> tuple[Any, str | None]:
    """torchvision, or None and why it did not import: PyPI's wheel beside CPU-only torch
    raises RuntimeError while registering its operators, not ImportError."""
    try:
        import torchvision
    except Exception as error:  # noqa: BLE001 (any failure means: use the stand-in)
        return None, f"{type(error).__name__}: {str(error)[:200]}"
    return torchvision, None


def load_rgb(path: str) -> Image.Image:
    """An image file as RGB, as torchvision's pil_loader opens it."""
    with open(path, "rb") as file:
        image = Image.open(file)
        return image.convert("RGB")


class FolderStandIn(Dataset):
    """ImageFolder's rules without torchvision: classes are the sorted sub-folders, samples
    every image file below each, in sorted order per folder, links followed."""

    def __init__(self, root: str, transform: Callable[[Image.Image], torch.Tensor]) -> None:
        with os.scandir(root) as entries:
            self.classes = sorted(entry.name for entry in entries if entry.is_dir())
        self.samples: list[tuple[str, int]] = []
        for label, name in enumerate(self.classes):
            for folder, _, files in sorted(os.walk(os.path.join(root, name), followlinks=True)):
                self.samples += [
                    (os.path.join(folder, file), label)
                    for file in sorted(files)
                    if is_image_name(file)
                ]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        return self.transform(load_rgb(path)), label


def _uniform(low: float, high: float) -> float:
    return float(torch.empty(1).uniform_(low, high).item())


def crop_box(width: int, height: int) -> tuple[int, int, int, int]:
    """RandomResizedCrop's box (left, top, width, height), drawn from torch's generator as
    torchvision draws it: a random share of the area at a random aspect ratio, else the
    centre crop at the nearest allowed ratio."""
    area = width * height
    low, high = math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1])
    for _ in range(CROP_TRIES):
        target = area * _uniform(*CROP_SCALE)
        ratio = math.exp(_uniform(low, high))
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            left = int(torch.randint(0, width - w + 1, (1,)).item())
            top = int(torch.randint(0, height - h + 1, (1,)).item())
            return left, top, w, h
    shape = width / height
    if shape < CROP_RATIO[0]:
        w, h = width, round(width / CROP_RATIO[0])
    elif shape > CROP_RATIO[1]:
        w, h = round(height * CROP_RATIO[1]), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def stand_in_transform(size: int) -> Callable[[Image.Image], torch.Tensor]:
    """The training transforms on Pillow and torch: crop and resize (bilinear), flip with
    probability 1/2, to a float CHW tensor in [0, 1], normalised."""
    mean = torch.tensor(MEAN).view(3, 1, 1)
    std = torch.tensor(STD).view(3, 1, 1)

    def transform(image: Image.Image) -> torch.Tensor:
        left, top, w, h = crop_box(*image.size)
        image = image.resize((size, size), Image.BILINEAR, box=(left, top, left + w, top + h))
        if torch.rand(1).item() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        pixels = torch.from_numpy(np.asarray(image, dtype=np.uint8).copy())
        return (pixels.permute(2, 0, 1).float() / 255 - mean) / std

    return transform


def folder_dataset(root: str, size: int) -> tuple[Dataset, str, str | None]:
    """The folder as a dataset of (image tensor, label), its pipeline's name, and why the
    stand-in serves (None where torchvision's ImageFolder does)."""
    torchvision, why = import_torchvision()
    if torchvision is None:
        return FolderStandIn(root, stand_in_transform(size)), STAND_IN, why
    t = torchvision.transforms
    transform = t.Compose(
        [
            t.RandomResizedCrop(size, scale=CROP_SCALE, ratio=CROP_RATIO),
            t.RandomHorizontalFlip(),
            t.ToTensor(),
            t.Normalize(MEAN, STD),
        ]
    )
    images = torchvision.datasets.ImageFolder(
        root, transform=transform, extensions=IMAGE_EXTENSIONS
    )
    return images, "torchvision.datasets.ImageFolder", None


class Skipping(Dataset):
    """A folder dataset whose undecodable files are passed over: each sample is (image,
    label, the indices it skipped padded with -1), so the loader's batches carry the skips
    from its worker processes to the rank, which counts them."""

    def __init__(self, images: Dataset) -> None:
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, torch.Tensor]:
        skipped = torch.full((MAX_SKIPS,), -1, dtype=torch.int64)
        for offset in range(MAX_SKIPS):
            at = (index + offset) % len(self.images)
            try:
                image, label = self.images[at]
            except UNREADABLE:
                skipped[offset] = at
                continue
            return image, label, skipped
        raise RuntimeError(too_many_skips(f"from sample {index}"))


def make_loader(cell: Cell, dataset: Dataset, batch: int, rank: int, size: int) -> DataLoader:
    """The cell's DataLoader: every batch full (drop_last), shuffled by the cell's seed,
    split across ``size`` ranks by a DistributedSampler where there are several."""
    settings: FolderInput = cell.image_folder
    sampler = None
    if size > 1:
        sampler = DistributedSampler(
            dataset, size, rank, shuffle=True, seed=cell.seed, drop_last=True
        )
    workers = {}
    if settings.workers:  # DataLoader refuses these without worker processes
        workers = {
            "prefetch_factor": settings.prefetch,
            "persistent_workers": settings.persistent_workers,
        }
    return DataLoader(
        dataset,
        batch_size=batch,
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=settings.workers,
        pin_memory=settings.pin_memory,
        drop_last=True,
        generator=torch.Generator().manual_seed(cell.seed),
        **workers,
    )


class Batches(EpochBatches):
    """The loader's batches, epoch after epoch (the sampler told each new epoch), with the
    files skipped so far and the images delivered."""

    def __init__(self, loader: DataLoader, samples: list[tuple[str, int]]) -> None:
        super().__init__()
        self.loader, self.samples = loader, samples
        self.skipped: set[int] = set()

    def next_epoch(self) -> Iterator:
        if isinstance(self.loader.sampler, DistributedSampler):
            self.loader.sampler.set_epoch(self.epoch)
        return iter(self.loader)

    def taken(self, found: Any) -> tuple[torch.Tensor, torch.Tensor, int]:
        images, labels, skipped = found
        self.skipped.update(skipped[skipped >= 0].tolist())
        return images, labels, len(labels)

    def no_full_batch(self) -> str:
        return (
            f"image_folder: an epoch gives this rank no full batch of {self.loader.batch_size}; "
            f"allowed: a folder with at least one global batch of images ({len(self.samples)} here)"
        )

    def skipped_names(self) -> list[str]:
        return sorted(self.samples[index][0] for index in self.skipped)


class FolderPipeline:
    """A rank's view of the folder: the dataset, the loader, and what it read."""

    def __init__(self, cell: Cell, batch: int, rank: int, size: int) -> None:
        settings: FolderInput = cell.image_folder
        images, self.name, self.why_stand_in = folder_dataset(settings.path, cell.model.image_size)
        self.classes = len(images.classes)
        self.settings = settings
        loader = make_loader(cell, Skipping(images), batch, rank, size)
        self.batches = Batches(loader, images.samples)

    def record(self) -> dict[str, Any]:
        """This rank's ``system.image_folder`` (runner.rank.Rank.folder_record)."""
        s = self.settings
        record = {
            "pipeline": self.name,
            "path": s.path,
            "workers": s.workers,
            "prefetch": s.prefetch if s.workers else None,
            "pin_memory": s.pin_memory,
            "persistent_workers": s.persistent_workers if s.workers else None,
            "classes": self.classes,
            "images": len(self.batches.samples),
            "images_read": self.batches.images_read,
            "skipped_files": self.batches.skipped_names(),
        }
        if self.why_stand_in:
            record["torchvision_unavailable"] = self.why_stand_in
        return record
