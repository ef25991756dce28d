"""Reading the framework-neutral datasets of the real-data training mode.

Every dataset is prepared once (launch.setup.dataprep) into one uncompressed ``<name>.npz``
(``x_train``/``x_val`` uint8 NHWC, ``y_train``/``y_val`` int64) plus a sidecar
``<name>.json`` with its metadata and the sha256 of the ``.npz``, so every framework trains
on the same bytes. This module is what the framework environments import: loading with the
checksum verified, shards, augmentation and normalisation; numpy and the standard library
only.

``mean``/``std`` in the metadata are per channel, in units of pixel/255, computed on the
training split: ``normalise`` maps a uint8 batch to ``(x / 255 - mean) / std``.

Shuffling uses a counter-based permutation (SplitMix64 keys, stable argsort) instead of
``numpy.random``, so the shards and the digits split are identical in every framework's
environment whatever its numpy version (these range from 1.23 to 2.x).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FORMAT_VERSION = 1
ARRAY_KEYS = ("x_train", "y_train", "x_val", "y_val")
CHUNK = 1 << 20  # bytes read at a time when a file is hashed or downloaded


class DatasetError(ValueError):
    """A dataset source or prepared file is missing, corrupt or not what was expected."""


@dataclass(frozen=True, eq=False)
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    meta: dict[str, Any]

    @property
    def mean(self) -> np.ndarray:
        return np.asarray(self.meta["mean"], dtype=np.float32)

    @property
    def std(self) -> np.ndarray:
        return np.asarray(self.meta["std"], dtype=np.float32)

    @property
    def classes(self) -> int:
        return int(self.meta["classes"])

    @property
    def image_size(self) -> int:
        return int(self.meta["image_size"])

    @property
    def channels(self) -> int:
        return int(self.meta["channels"])


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def sidecar_path(npz_path: str | os.PathLike[str]) -> Path:
    return Path(npz_path).with_suffix(".json")


def load_dataset(npz_path: str | os.PathLike[str]) -> Dataset:
    """Load a prepared dataset after checking its sha256 against the sidecar."""
    npz_path = Path(npz_path)
    meta_path = sidecar_path(npz_path)
    if not npz_path.is_file():
        raise DatasetError(f"dataset file {npz_path} does not exist; prepare it first")
    if not meta_path.is_file():
        raise DatasetError(f"dataset metadata {meta_path} is missing beside {npz_path}")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        expected = meta["npz_sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"dataset metadata {meta_path} is unreadable ({exc!r})") from None
    actual = file_digest(npz_path)
    if actual != expected:
        raise DatasetError(
            f"dataset file {npz_path} is corrupt: sha256 {actual} does not match "
            f"{expected} recorded in {meta_path.name}; prepare it again"
        )
    with np.load(npz_path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in ARRAY_KEYS}
    _check_arrays(npz_path, arrays, meta)
    return Dataset(name=meta["name"], meta=meta, **arrays)


def _check_arrays(path: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
    shape = (meta["image_size"], meta["image_size"], meta["channels"])
    for split in ("train", "val"):
        x, y, n = arrays[f"x_{split}"], arrays[f"y_{split}"], meta[f"n_{split}"]
        if x.dtype != np.uint8 or x.shape != (n, *shape) or y.dtype != np.int64 or y.shape != (n,):
            raise DatasetError(
                f"dataset file {path}: {split} arrays {x.dtype}{x.shape}/{y.dtype}{y.shape} "
                f"do not match the metadata (uint8 {(n, *shape)}, int64 ({n},))"
            )


def _splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, vectorised; a bijection of uint64 (wrapping arithmetic)."""
    x = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def stable_permutation(n: int, *keys: int) -> np.ndarray:
    """A permutation of ``range(n)`` determined by ``keys`` alone, the same in every numpy."""
    base = np.zeros(1, dtype=np.uint64)
    for key in keys:
        if key < 0:
            raise ValueError(f"permutation keys must be non-negative, got {key}")
        base = _splitmix64(base ^ np.array([key], dtype=np.uint64))
    # distinct inputs give distinct keys (bijection), so the order has no ties
    return np.argsort(_splitmix64(base + np.arange(n, dtype=np.uint64)), kind="stable")


def shard_indices(
    n: int,
    rank: int,
    world_size: int,
    epoch: int,
    seed: int,
    shuffle: bool = True,
    drop_last: bool = True,
) -> np.ndarray:
    """The sample indices ``rank`` reads in ``epoch``, like torch's DistributedSampler.

    Every rank computes the same permutation (seeded by ``(seed, epoch)``), trims it to a
    multiple of ``world_size`` (``drop_last``) or pads it by wrapping around, and takes every
    ``world_size``-th index starting at ``rank``.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
    if n < 0 or (drop_last and n < world_size) or (not drop_last and n == 0):
        raise ValueError(f"cannot shard {n} samples over {world_size} ranks")
    order = stable_permutation(n, seed, epoch) if shuffle else np.arange(n)
    if drop_last:
        total = n - n % world_size
        order = order[:total]
    else:
        total = -(-n // world_size) * world_size
        order = np.resize(order, total)  # repeats from the start, like the sampler's padding
    return order[rank:total:world_size].astype(np.int64)


def augment_batch(
    images: np.ndarray, rng: np.random.Generator, pad: int = 4, flip: bool = True
) -> np.ndarray:
    """Random crop of the zero-padded images back to their size, then random horizontal flip.

    Draws, in order: row offsets, column offsets (each in ``0..2*pad``), then one coin per
    image when ``flip``.
    """
    n, height, width, _ = images.shape
    rows = rng.integers(0, 2 * pad + 1, size=n)[:, None] + np.arange(height)
    cols = rng.integers(0, 2 * pad + 1, size=n)[:, None] + np.arange(width)
    if flip:
        flipped = rng.random(n) < 0.5
        cols = np.where(flipped[:, None], cols[:, ::-1], cols)
    padded = np.pad(images, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    return padded[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]


def normalise(batch: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """uint8 NHWC -> float32 NHWC ``(x / 255 - mean) / std`` (mean/std in pixel/255 units)."""
    mean_arr = np.asarray(mean, dtype=np.float32)
    scale = np.float32(1.0) / (np.asarray(std, dtype=np.float32) * np.float32(255.0))
    return (batch.astype(np.float32) - mean_arr * np.float32(255.0)) * scale
