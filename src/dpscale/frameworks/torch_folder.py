"""A user's image folder through torch's input pipeline (mode folder, config ``image_folder``).

torchvision's ImageFolder reads the folder (one sub-folder per class, sorted names giving
the labels, .jpg/.jpeg/.png files at any depth) with the training transforms of torchvision's
ImageNet reference: RandomResizedCrop to the model's image size, RandomHorizontalFlip,
ToTensor, Normalize (torchvision imported through dpscale.frameworks.torchvision_import,
which lets PyPI's wheel import beside CPU-only torch). A DataLoader (num_workers,
prefetch_factor, pin_memory, persistent_workers) batches it, with a DistributedSampler across
the ranks of torch-ddp.

A file that does not decode is skipped: the next file in the folder's order stands in for
it in its batch, and the skipped file is counted and named in the result, never a failed
cell. Only files a run reads are checked; plan time checked names only
(dpscale.plan.image_folder).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from dpscale.frameworks.folder_batches import EpochBatches
from dpscale.frameworks.torchvision_import import import_torchvision
from dpscale.plan.cell import Cell, FolderInput
from dpscale.plan.image_folder import MAX_SKIPS, is_image_name, too_many_skips

# the channel means and deviations of torchvision's ImageNet reference training
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# RandomResizedCrop's defaults: the crop's share of the area and its aspect ratio
CROP_SCALE, CROP_RATIO = (0.08, 1.0), (3 / 4, 4 / 3)
# what a decode failure raises: Pillow's UnidentifiedImageError is an OSError; a truncated
# or malformed file may raise ValueError or SyntaxError inside Pillow's plugins
UNREADABLE = (OSError, ValueError, SyntaxError)
PIPELINE = "torchvision.datasets.ImageFolder"


def folder_dataset(root: str, size: int) -> tuple[Dataset, bool]:
    """The folder as torchvision's ImageFolder of (image tensor, label) with the training
    transforms, and whether torchvision's C++ operators loaded (they are not used here)."""
    torchvision, has_ops = import_torchvision()
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
        root, transform=transform, is_valid_file=is_image_name
    )
    return images, has_ops


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
        images, self.torchvision_ops = folder_dataset(settings.path, cell.model.image_size)
        self.classes = len(images.classes)
        self.settings = settings
        loader = make_loader(cell, Skipping(images), batch, rank, size)
        self.batches = Batches(loader, images.samples)

    def record(self) -> dict[str, Any]:
        """This rank's ``system.image_folder`` (runner.rank.Rank.folder_record)."""
        s = self.settings
        record = {
            "pipeline": PIPELINE,
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
        if not self.torchvision_ops:
            record["torchvision_ops"] = False
        return record
