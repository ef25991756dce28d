"""A user's image folder through MXNet Gluon's input pipeline (mode folder, config
``image_folder``).

Gluon's ``ImageFolderDataset`` reads the folder (one sub-folder per class, sorted names
giving the labels) and decodes with MXNet's own OpenCV; the transforms are
``gluon.data.vision.transforms``' RandomResizedCrop to the model's image size,
RandomFlipLeftRight, ToTensor and Normalize, with the crop's range and the mean and
deviation of torchvision's ImageNet reference (as dpscale.frameworks.torch_folder uses). A
Gluon ``DataLoader`` batches it with worker processes (Gluon's default, not its thread
pool).

Where Gluon differs from torch's pipeline, the result says what ran:

- ImageFolderDataset lists the files directly inside each class folder; images in deeper
  sub-folders are left out and counted (``system.image_folder.nested_images_left_out``).
- ``prefetch`` is per worker, as in torch: Gluon is given workers x prefetch batches ahead.
- Gluon's worker pool lives as long as its loader, so its workers persist across epochs
  whatever ``persistent_workers`` says; the result records that they did.
- MXNet 1.9 has no sampler that splits a dataset over workers: :class:`ShardSampler` deals
  each epoch's seeded shuffle as torch's DistributedSampler does (every ``size``-th sample
  from ``rank``, the tail cut so every rank gets as many).

A file that does not decode is skipped as in torch: the next file in the folder's order
stands in for it, and the skipped file is counted and named in the result.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon.data.vision import ImageFolderDataset
from mxnet.gluon.data.vision import transforms as T

from dpscale.frameworks.folder_batches import EpochBatches
from dpscale.plan.cell import Cell, FolderInput
from dpscale.plan.image_folder import MAX_SKIPS, is_image_name, too_many_skips

# torchvision's ImageNet reference: channel means and deviations, RandomResizedCrop's range
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
CROP_SCALE, CROP_RATIO = (0.08, 1.0), (3 / 4, 4 / 3)
# what MXNet's imread raises on a file OpenCV cannot decode (or cannot open)
UNREADABLE = (mx.base.MXNetError,)
PIPELINE = "gluon.data.vision.ImageFolderDataset"


def training_transform(size: int) -> T.Compose:
    """The training transforms on an HWC uint8 image: a float CHW tensor, normalised."""
    return T.Compose(
        [
            T.RandomResizedCrop(size, scale=CROP_SCALE, ratio=CROP_RATIO),
            T.RandomFlipLeftRight(),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ]
    )


def nested_images(root: str, classes: list[str]) -> int:
    """Image files below a class folder's own files (which ImageFolderDataset leaves out)."""
    count = 0
    for name in classes:
        top = os.path.join(root, name)
        for folder, _, files in os.walk(top, followlinks=True):
            if folder != top:
                count += sum(is_image_name(file) for file in files)
    return count


class Skipping(gluon.data.Dataset):
    """The folder's transformed samples, undecodable files passed over: each sample is
    (image, label, the indices it skipped padded with -1), so the loader's batches carry the
    skips from its worker processes to the rank, which counts them."""

    def __init__(self, images: ImageFolderDataset, transform: Callable) -> None:
        self.images, self.transform = images, transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[mx.nd.NDArray, int, np.ndarray]:
        skipped = np.full(MAX_SKIPS, -1, dtype=np.int64)
        for offset in range(MAX_SKIPS):
            at = (index + offset) % len(self.images)
            try:
                image, label = self.images[at]
                image = self.transform(image)
                image.wait_to_read()  # a decode failure raised by the engine surfaces here
            except UNREADABLE:
                skipped[offset] = at
                continue
            return image, label, skipped
        raise RuntimeError(too_many_skips(f"from sample {index}"))


class ShardSampler(gluon.data.Sampler):
    """This rank's share of each epoch: the indices shuffled by (seed, epoch), cut to a
    multiple of ``size``, every ``size``-th from ``rank`` (torch's DistributedSampler with
    drop_last). The epoch is set before each pass (:meth:`set_epoch`)."""

    def __init__(self, length: int, rank: int, size: int, seed: int) -> None:
        self.length, self.rank, self.size, self.seed = length, rank, size, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        order = np.random.RandomState(self.seed + self.epoch).permutation(self.length)
        usable = self.length - self.length % self.size
        return iter(order[:usable][self.rank :: self.size].tolist())

    def __len__(self) -> int:
        return self.length // self.size


def make_loader(cell: Cell, dataset: Skipping, batch: int, rank: int, size: int):
    """The cell's DataLoader: every batch full (last_batch discard), this rank's share of
    each shuffled epoch, ``workers`` processes holding workers x prefetch batches ahead."""
    settings: FolderInput = cell.image_folder
    sampler = ShardSampler(len(dataset), rank, size, cell.seed)
    loader = gluon.data.DataLoader(
        dataset,
        batch_size=batch,
        sampler=sampler,
        last_batch="discard",
        num_workers=settings.workers,
        prefetch=settings.workers * settings.prefetch,
        pin_memory=settings.pin_memory,
        thread_pool=False,
    )
    return loader, sampler


class Batches(EpochBatches):
    """The loader's batches, epoch after epoch (the sampler told each new epoch), with the
    files skipped so far and the images delivered."""

    def __init__(self, loader: Any, sampler: ShardSampler, samples: list, batch: int) -> None:
        super().__init__()
        self.loader, self.sampler, self.samples = loader, sampler, samples
        self.batch_size = batch
        self.skipped: set[int] = set()

    def next_epoch(self) -> Iterator:
        self.sampler.set_epoch(self.epoch)
        return iter(self.loader)

    def taken(self, found: Any) -> tuple[mx.nd.NDArray, mx.nd.NDArray, int]:
        images, labels, skipped = found
        skipped = skipped.asnumpy()
        self.skipped.update(skipped[skipped >= 0].tolist())
        return images, labels, labels.shape[0]

    def no_full_batch(self) -> str:
        return (
            f"image_folder: an epoch gives this rank no full batch of {self.batch_size}; "
            f"allowed: a folder with at least one global batch of images ({len(self.samples)} "
            "here, in Gluon's listing)"
        )

    def skipped_names(self) -> list[str]:
        return sorted(self.samples[index][0] for index in self.skipped)


def train_step(
    net: gluon.HybridBlock,
    trainer: gluon.Trainer,
    batches: Batches,
    ctxs: list[mx.Context],
    global_batch: int,
) -> Callable[[], None]:
    """One synchronous step on the loader's next batch, split over the contexts; the
    gradients are averaged over the global batch, as in the synthetic step."""
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def step() -> None:
        images, labels = batches.next()  # waits for the loader when it is behind
        xs = gluon.utils.split_and_load(images, ctxs, even_split=True)
        ys = gluon.utils.split_and_load(labels.astype("float32"), ctxs, even_split=True)
        with autograd.record():
            losses = [loss_fn(net(x), y) for x, y in zip(xs, ys, strict=True)]
        autograd.backward(losses)
        trainer.step(global_batch)

    return step


class FolderPipeline:
    """A rank's view of the folder: the dataset, the loader, and what it read."""

    def __init__(self, cell: Cell, batch: int, rank: int, size: int) -> None:
        settings: FolderInput = cell.image_folder
        images = ImageFolderDataset(settings.path)
        self.settings, self.classes = settings, len(images.synsets)
        self.nested = nested_images(settings.path, images.synsets)
        dataset = Skipping(images, training_transform(cell.model.image_size))
        loader, sampler = make_loader(cell, dataset, batch, rank, size)
        self.batches = Batches(loader, sampler, images.items, batch)

    def record(self) -> dict[str, Any]:
        """This rank's ``system.image_folder`` (runner.rank.Rank.folder_record)."""
        s = self.settings
        return {
            "pipeline": PIPELINE,
            "path": s.path,
            "workers": s.workers,
            "prefetch": s.prefetch if s.workers else None,
            "pin_memory": s.pin_memory,
            # Gluon keeps its worker pool for the loader's life: its workers always persist
            "persistent_workers": True if s.workers else None,
            "thread_pool": False,
            "classes": self.classes,
            "images": len(self.batches.samples),
            "nested_images_left_out": self.nested,
            "images_read": self.batches.images_read,
            "skipped_files": self.batches.skipped_names(),
        }
