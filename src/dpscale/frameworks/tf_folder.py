"""A user's image folder through tf.data (mode folder, config ``image_folder``), one shard
per Horovod rank.

The files are listed as torchvision's ImageFolder lists them (one sub-folder per class,
sorted names giving the labels, .jpg/.jpeg/.png files at any depth, links followed), and
rank r of n keeps every n-th file from the r-th (``Dataset.shard``'s rule). Each epoch
shuffles the shard (``tf.random.experimental.index_shuffle``, seeded by the cell's seed, the
rank and the epoch), and ``Dataset.range -> map(read, decode, augment) -> ignore_errors() ->
batch(drop_remainder) -> prefetch`` runs over the epochs in turn, as ``repeat()`` does in a
plain tf.data loop, one iterator per chunk of epochs (CHUNK_IMAGES). The augmentation is
torchvision's ImageNet training one in tf.image, seeded per image (stateless ops): a crop
of 8-100% of the area at an aspect ratio of 3/4-4/3
(``stateless_sample_distorted_bounding_box``, 10 tries, else the whole image), resized
bilinearly with antialiasing to the model's image size, a left-right flip with probability
1/2, then ImageNet's mean and standard deviation.

The config's loader settings, in tf.data's terms: ``workers`` >= 1 is the map's
``num_parallel_calls`` and ``prefetch(workers x prefetch)`` keeps as many batches ready as
that many DataLoader workers would; ``workers`` 0 leaves both to tf.data (AUTOTUNE).
``pin_memory`` and ``persistent_workers`` have no tf.data equivalent and are recorded as
unused (None).

A file that does not decode is skipped: ``ignore_errors()`` drops it and the next image of
the epoch's order takes its place in the batch. Every image carries its position in the
stream, so a position missing between two delivered ones names the file skipped there; it
is counted and named in the result, never a failed cell. Only files before the last
delivered image are counted (the files a run read). A cell fails when MAX_SKIPS files in a
row do not decode or a chunk of epochs gives a rank no full batch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from dpscale.frameworks.folder_batches import EpochBatches
from dpscale.plan.cell import Cell, FolderInput
from dpscale.plan.image_folder import MAX_SKIPS, is_image_name, too_many_skips

# the channel means and deviations of torchvision's ImageNet reference training
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# RandomResizedCrop's defaults: the crop's share of the area, its aspect ratio, its tries
CROP_SCALE, CROP_RATIO, CROP_TRIES = (0.08, 1.0), (3 / 4, 4 / 3), 10
PIPELINE = "tf.data (Dataset.range, map, ignore_errors, batch, prefetch), a shard per rank"


@dataclass(frozen=True)
class FolderFiles:
    """The folder as ImageFolder reads it: the sorted class names and every image file
    with its label, in the folder's order."""

    classes: list[str]
    paths: list[str]
    labels: list[int]


def list_folder(root: str) -> FolderFiles:
    """Classes are the sorted sub-folders; each one's image files in sorted order per
    folder, at any depth, links followed (ImageFolder's make_dataset)."""
    with os.scandir(root) as entries:
        classes = sorted(entry.name for entry in entries if entry.is_dir())
    paths: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        for folder, _, files in sorted(os.walk(os.path.join(root, name), followlinks=True)):
            found = [os.path.join(folder, file) for file in sorted(files) if is_image_name(file)]
            paths += found
            labels += [label] * len(found)
    return FolderFiles(classes, paths, labels)


def loader_settings(settings: FolderInput) -> tuple[int, int]:
    """(the map's num_parallel_calls, the batches prefetched): workers and workers x
    prefetch, or AUTOTUNE for both without workers."""
    if settings.workers:
        return settings.workers, settings.workers * settings.prefetch
    return tf.data.AUTOTUNE, tf.data.AUTOTUNE


def random_resized_crop(image: tf.Tensor, size: int, seed: tf.Tensor) -> tf.Tensor:
    """RandomResizedCrop's rule in tf.image: a crop of CROP_SCALE of the area at CROP_RATIO,
    resized (bilinear, antialiased, as Pillow resizes) to size x size, float in [0, 255]."""
    whole = tf.constant([[[0.0, 0.0, 1.0, 1.0]]])
    begin, extent, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=whole,
        seed=seed,
        min_object_covered=0.0,
        aspect_ratio_range=CROP_RATIO,
        area_range=CROP_SCALE,
        max_attempts=CROP_TRIES,
        use_image_if_no_bounding_boxes=True,
    )
    crop = tf.slice(image, begin, extent)
    return tf.image.resize(crop, (size, size), method="bilinear", antialias=True)


def decode_and_augment(contents: tf.Tensor, size: int, seed: tf.Tensor) -> tf.Tensor:
    """A file's bytes (JPEG or PNG, by their content) to a normalised size x size x 3
    float32 image; raises (in the pipeline) where they do not decode."""
    image = tf.io.decode_image(contents, channels=3, expand_animations=False)
    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    image = random_resized_crop(image, size, crop_seed)
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    image = (image / 255.0 - tf.constant(MEAN)) / tf.constant(STD)
    return tf.ensure_shape(image, (size, size, 3))


# positions per tf.data iterator: whole epochs of at least this many images, so the
# prefetched batches drain and refill once per chunk, not once per epoch
CHUNK_IMAGES = 4096


class ShardPipeline:
    """One rank's shard as tf.data batches of (images NHWC, labels, positions): position p
    is image p % n of epoch p // n of the shard's n files, in that epoch's order. Epochs
    follow one another in one stream, as ``repeat()`` before ``batch`` does in a plain
    tf.data loop (a batch may hold the end of one epoch and the start of the next); each
    iterator covers a chunk of whole epochs, so a shard none of whose files decodes ends
    its chunk instead of reading forever."""

    def __init__(self, cell: Cell, files: FolderFiles, batch: int, rank: int, size: int):
        self.paths = files.paths[rank::size]  # Dataset.shard(size, rank)
        self.labels = files.labels[rank::size]
        self.batch, self.rank, self.cell = batch, rank, cell
        # the epochs' orders and the augmentation draw from this stream (seed and rank)
        self.stream = cell.seed * 2**16 + rank
        n = len(self.paths)
        self.chunk = n * -(-CHUNK_IMAGES // n)

    def file_at(self, position: int | tf.Tensor) -> tf.Tensor:
        """The shard index of the file at ``position``: its epoch's permutation of the
        shard (stateless, seeded by the stream and the epoch), at its place in the epoch."""
        n = len(self.paths)
        position = tf.cast(position, tf.int64)
        seed = tf.stack([tf.constant(self.stream, tf.int64), position // n])
        last = tf.constant(n - 1, tf.int64)
        return tf.random.experimental.index_shuffle(position % n, seed, last)

    def batches_from(self, start: int) -> Any:
        """An iterator over the chunk of positions from ``start``."""
        parallel, prefetched = loader_settings(self.cell.image_folder)
        size = self.cell.model.image_size
        paths, labels = tf.constant(self.paths), tf.constant(self.labels)

        def load(position: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
            index = self.file_at(position)
            seed = tf.stack([tf.constant(-1 - self.stream, tf.int64), position])
            image = decode_and_augment(tf.io.read_file(paths[index]), size, seed)
            return image, tf.cast(labels[index], tf.int64), position

        options = tf.data.Options()
        options.deterministic = True  # positions come out in order: gaps are the skips
        dataset = (
            tf.data.Dataset.range(start, start + self.chunk)
            .map(load, num_parallel_calls=parallel)
            .ignore_errors()
            .batch(self.batch, drop_remainder=True)
            .prefetch(prefetched)
            .with_options(options)
        )
        return iter(dataset)


class Batches(EpochBatches):
    """The shard's batches, chunk after chunk of epochs (EpochBatches' epochs are the
    chunks here), with the files skipped so far (the positions missing between delivered
    ones) and the images delivered."""

    def __init__(self, pipeline: ShardPipeline) -> None:
        super().__init__()
        self.pipeline = pipeline
        self.skipped: set[str] = set()
        self._expected = 0  # the position the next delivered image should have

    def next_epoch(self) -> Any:
        # a chunk's last images that fill no batch are dropped: the next chunk starts on
        return self.pipeline.batches_from(self.epoch * self.pipeline.chunk)

    def _note_skips(self, positions: np.ndarray) -> None:
        """The positions passed over before each delivered one: skipped files (those a
        chunk dropped at its end, short of a batch, are not: they were not read)."""
        start = self.epoch * self.pipeline.chunk
        self._expected = max(self._expected, start)
        for position in positions.tolist():
            if position - self._expected >= MAX_SKIPS:
                raise RuntimeError(too_many_skips(f"of rank {self.pipeline.rank}'s shard"))
            for missed in range(self._expected, position):
                index = int(self.pipeline.file_at(missed))
                self.skipped.add(self.pipeline.paths[index])
            self._expected = position + 1

    def taken(self, found: Any) -> tuple[tf.Tensor, tf.Tensor, int]:
        images, labels, positions = found
        self._note_skips(positions.numpy())
        return images, labels, int(labels.shape[0])

    def no_full_batch(self) -> str:
        return (
            f"image_folder: {self.pipeline.chunk} images of rank {self.pipeline.rank}'s shard "
            f"give no full batch of {self.pipeline.batch} decodable images "
            f"({len(self.pipeline.paths)} files in it); allowed: a folder with at least one "
            "global batch of readable images"
        )

    def skipped_names(self) -> list[str]:
        return sorted(self.skipped)


class FolderPipeline:
    """A rank's view of the folder: its files, its shard's batches, and what it read."""

    def __init__(self, cell: Cell, batch: int, rank: int, size: int) -> None:
        self.settings: FolderInput = cell.image_folder
        files = list_folder(self.settings.path)
        self.classes, self.images = len(files.classes), len(files.paths)
        self.batches = Batches(ShardPipeline(cell, files, batch, rank, size))

    def record(self) -> dict[str, Any]:
        """This rank's ``system.image_folder`` (runner.rank.Rank.folder_record); the
        settings tf.data has no use for are None."""
        s = self.settings
        parallel, prefetched = loader_settings(s)
        autotune = "AUTOTUNE"
        return {
            "pipeline": PIPELINE,
            "path": s.path,
            "workers": s.workers,
            "prefetch": s.prefetch if s.workers else None,
            "pin_memory": None,
            "persistent_workers": None,
            "num_parallel_calls": parallel if s.workers else autotune,
            "prefetch_batches": prefetched if s.workers else autotune,
            "classes": self.classes,
            "images": self.images,
            "images_read": self.batches.images_read,
            "skipped_files": self.batches.skipped_names(),
        }
