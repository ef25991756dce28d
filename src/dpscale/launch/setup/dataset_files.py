"""Writing a prepared dataset: the ``.npz`` that runner.datasets reads and its JSON sidecar
(shape, per-channel mean and std, source and checksums), each replaced atomically.

The ``.npz`` is written with fixed zip timestamps, so equal arrays give equal bytes and the
same source prepared twice gives the same sha256. The format lives here; the sources (digits,
CIFAR-10) and the command line in dpscale.launch.setup.dataprep. numpy and the standard library.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpscale.plan.result import atomic_file
from dpscale.runner.datasets import ARRAY_KEYS, FORMAT_VERSION, file_digest, sidecar_path

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Like ``np.savez`` but with fixed zip timestamps, so equal arrays give equal bytes."""
    with atomic_file(path) as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED) as zf:
        for key, array in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_EPOCH)
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    with atomic_file(path) as handle:
        handle.write((json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def channel_stats(images: np.ndarray, chunk: int = 4096) -> tuple[list[float], list[float]]:
    """Per-channel mean and population std of uint8 NHWC images, in units of pixel/255."""
    channels = images.shape[-1]
    total = np.zeros(channels, dtype=np.float64)
    squares = np.zeros(channels, dtype=np.float64)
    for start in range(0, len(images), chunk):
        block = images[start : start + chunk].reshape(-1, channels).astype(np.int64)
        total += block.sum(axis=0)
        squares += (block * block).sum(axis=0)
    count = images.size // channels
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean * mean, 0.0))
    return [round(float(m) / 255, 8) for m in mean], [round(float(s) / 255, 8) for s in std]


def write_dataset(
    out_dir: str | os.PathLike[str],
    name: str,
    arrays: Mapping[str, np.ndarray],
    meta: Mapping[str, Any],
    *,
    file_stem: str | None = None,
) -> Path:
    """Write ``<file_stem>.npz`` and its sidecar atomically; return the ``.npz`` path."""
    x_train, y_train, x_val, y_val = (arrays[key] for key in ARRAY_KEYS)
    for key in ("x_train", "x_val"):
        if arrays[key].dtype != np.uint8 or arrays[key].ndim != 4:
            raise ValueError(
                f"{key} must be uint8 NHWC, got {arrays[key].dtype} {arrays[key].shape}"
            )
    npz_path = Path(out_dir) / f"{file_stem or name}.npz"
    ordered = {key: arrays[key] for key in ARRAY_KEYS}
    ordered["y_train"] = y_train.astype(np.int64)
    ordered["y_val"] = y_val.astype(np.int64)
    _write_npz(npz_path, ordered)
    mean, std = channel_stats(x_train)
    sidecar = {
        "format": "dpscale-dataset",
        "format_version": FORMAT_VERSION,
        "name": name,
        "layout": "NHWC",
        "image_size": int(x_train.shape[1]),
        "channels": int(x_train.shape[3]),
        "n_train": len(x_train),
        "n_val": len(x_val),
        "mean": mean,
        "std": std,
        "normalisation": "(x / 255 - mean) / std per channel; mean and std from x_train",
        **meta,
        "npz": npz_path.name,
        "npz_sha256": file_digest(npz_path),
    }
    _write_json(sidecar_path(npz_path), sidecar)
    return npz_path
