"""Preparing the training datasets (digits, CIFAR-10) once into the framework-neutral
format that runner.datasets reads; downloading, checksums and the command line.

    python -m dpscale.launch.setup.dataprep prepare digits --out data --image-size 16
    python -m dpscale.launch.setup.dataprep prepare cifar10 --out data [--source PATH]

The ``.npz`` is written with fixed zip timestamps: preparing the same source twice gives
the same sha256. numpy and the standard library (scikit-learn only inside
``prepare_digits``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import pickle
import sys
import tarfile
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpscale.launch.setup.dataset_files import write_dataset
from dpscale.plan.result import atomic_file
from dpscale.runner.datasets import CHUNK, DatasetError, file_digest, stable_permutation

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
# md5 of each member of the official archive (the same values torchvision checks).
CIFAR10_MEMBER_MD5S: Mapping[str, str] = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
    "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
}
CIFAR10_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
DOWNLOAD_TIMEOUT_S = 60.0


def verify_md5(path: str | os.PathLike[str], expected: str, what: str) -> str:
    """Return the md5 of ``path``; raise DatasetError (one line) when it is not ``expected``."""
    actual = file_digest(path, "md5")
    if actual != expected.lower():
        raise DatasetError(
            f"{what} {path} has md5 {actual}, expected {expected}: "
            "the file is corrupt or not the official one"
        )
    return actual


def _bilinear_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Rows of interpolation weights, half-pixel centres and clamped edges."""
    src = np.clip((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0, n_in - 1)
    low = np.floor(src).astype(np.int64)
    high = np.minimum(low + 1, n_in - 1)
    frac = src - low
    weights = np.zeros((n_out, n_in))
    np.add.at(weights, (np.arange(n_out), low), 1 - frac)
    np.add.at(weights, (np.arange(n_out), high), frac)
    return weights


def resize_bilinear(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of float (N, H, W) images to (N, size, size)."""
    rows = _bilinear_matrix(images.shape[1], size)
    cols = _bilinear_matrix(images.shape[2], size)
    return np.einsum("oh,nhw,pw->nop", rows, images.astype(np.float64), cols)


def stratified_split(
    labels: np.ndarray, val_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (train, val) indices holding out ``round(val_fraction * n_c)`` of each class."""
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    val: list[np.ndarray] = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        take = int(round(val_fraction * len(members)))
        val.append(members[stable_permutation(len(members), seed, int(label))[:take]])
    val_idx = np.sort(np.concatenate(val))
    return np.setdiff1d(np.arange(len(labels)), val_idx), val_idx


def prepare_digits(
    out_dir: str | os.PathLike[str], image_size: int, val_fraction: float = 0.2, seed: int = 0
) -> Path:
    """scikit-learn's 8x8 digits, resized, scaled to 0..255 and repeated to 3 channels."""
    import sklearn
    from sklearn.datasets import load_digits

    if image_size < 1:
        raise ValueError(f"image_size must be positive, got {image_size}")
    digits = load_digits()
    raw = np.asarray(digits.images, dtype=np.float64)  # values 0..16
    labels = np.asarray(digits.target, dtype=np.int64)
    resized = resize_bilinear(raw, image_size) * (255.0 / 16.0)
    grey = np.clip(np.rint(resized), 0, 255).astype(np.uint8)
    images = np.repeat(grey[..., None], 3, axis=3)
    train, val = stratified_split(labels, val_fraction, seed)
    source_hash = hashlib.sha256(raw.astype(np.uint8).tobytes() + labels.tobytes()).hexdigest()
    meta = {
        "classes": 10,
        "class_names": [str(i) for i in range(10)],
        "source": (
            f"scikit-learn {sklearn.__version__} load_digits (UCI optical handwritten digits, "
            f"{len(labels)} 8x8 images, 0..16), bilinear resize to {image_size}x{image_size}, "
            "x255/16, grey repeated to 3 channels"
        ),
        "source_checksum": {"load_digits images(uint8)+target(int64)": f"sha256:{source_hash}"},
        "split": f"stratified {val_fraction:g} of each class held out for validation, seed {seed}",
    }
    arrays = {
        "x_train": images[train],
        "y_train": labels[train],
        "x_val": images[val],
        "y_val": labels[val],
    }
    return write_dataset(out_dir, "digits", arrays, meta, file_stem=f"digits-{image_size}")


class _ArrayUnpickler(pickle.Unpickler):
    """Refuses every global but numpy's array reconstruction (the batches are pickles)."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # how Python 3 writes bytes in protocol 2
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"unexpected global {module}.{name}")
        return super().find_class(module, name)


def _unpickle(raw: bytes, what: str) -> dict[str, Any]:
    try:
        entry = _ArrayUnpickler(io.BytesIO(raw), encoding="latin1").load()
    except Exception as exc:  # any unpickling failure means a corrupt or foreign file
        raise DatasetError(f"CIFAR-10 member {what} is not a CIFAR-10 batch ({exc})") from None
    if not isinstance(entry, dict):
        raise DatasetError(f"CIFAR-10 member {what} is not a CIFAR-10 batch (not a dict)")
    return entry


def _batch_arrays(entry: Mapping[str, Any], what: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        data = np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(entry["labels"], dtype=np.int64)
    except (KeyError, ValueError) as exc:
        raise DatasetError(f"CIFAR-10 member {what} lacks 3x32x32 data or labels ({exc})") from None
    if len(labels) != len(data) or labels.min(initial=0) < 0 or labels.max(initial=0) > 9:
        raise DatasetError(f"CIFAR-10 member {what} has labels that do not fit its data")
    return data.transpose(0, 2, 3, 1), labels


def _expected_source(path: Path | str) -> str:
    return (
        f"expected the official {CIFAR10_ARCHIVE} (md5 {CIFAR10_MD5}) or its extracted "
        f"{CIFAR10_FOLDER} folder at {path}"
    )


def _read_archive(archive: Path) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for name in CIFAR10_MEMBER_MD5S:
                handle = tar.extractfile(f"{CIFAR10_FOLDER}/{name}")
                if handle is None:
                    raise KeyError(name)
                members[name] = handle.read()
    except (tarfile.TarError, KeyError, OSError, EOFError) as exc:
        raise DatasetError(
            f"CIFAR-10 archive {archive} is unreadable or incomplete ({exc!r})"
        ) from None
    return members


def _read_folder(folder: Path, member_md5s: Mapping[str, str] | None) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    for name in CIFAR10_MEMBER_MD5S:
        path = folder / name
        if not path.is_file():
            raise DatasetError(f"CIFAR-10 folder {folder} lacks {name}: {_expected_source(folder)}")
        members[name] = path.read_bytes()
        expected = None if member_md5s is None else member_md5s.get(name)
        actual = hashlib.md5(members[name]).hexdigest()
        if expected is not None and actual != expected:
            raise DatasetError(
                f"CIFAR-10 file {path} has md5 {actual}, expected {expected}: "
                "the file is corrupt or not from the official archive"
            )
    return members


def download(url: str, dest: Path, timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, atomic_file(dest) as out:
            for block in iter(lambda: response.read(CHUNK), b""):
                out.write(block)
    except (urllib.error.URLError, OSError) as exc:
        raise DatasetError(
            f"cannot download {url} ({exc}); pass --source with the official "
            f"{CIFAR10_ARCHIVE} (md5 {CIFAR10_MD5}) or its extracted {CIFAR10_FOLDER} folder"
        ) from None
    return dest


def _locate_cifar(out_dir: Path, source: str | os.PathLike[str] | None, archive_md5: str) -> Path:
    """The archive or batches folder to read; downloads into ``out_dir`` when no source."""
    if source is None:
        cached = out_dir / CIFAR10_ARCHIVE
        if not cached.is_file() or file_digest(cached, "md5") != archive_md5:
            download(CIFAR10_URL, cached)
        return cached
    path = Path(source).expanduser()
    for candidate in (path, path / CIFAR10_FOLDER, path / CIFAR10_ARCHIVE):
        if candidate.is_file() or (candidate / "data_batch_1").is_file():
            return candidate
    if path.is_dir() and (path / "batches.meta").is_file():
        return path  # a batches folder with missing batches: reported by _read_folder
    raise DatasetError(f"CIFAR-10 source not found: {_expected_source(path)}")


def prepare_cifar10(
    out_dir: str | os.PathLike[str],
    source: str | os.PathLike[str] | None = None,
    *,
    archive_md5: str = CIFAR10_MD5,
    member_md5s: Mapping[str, str] | None = CIFAR10_MEMBER_MD5S,
) -> Path:
    """The official 50k/10k split (the test batch is the validation set) as ``cifar10.npz``.

    ``source``: the official archive, its extracted ``cifar-10-batches-py`` folder, a folder
    holding either, or None to download the archive into ``out_dir``.  The archive's md5
    (``archive_md5``) or each extracted file's md5 (``member_md5s``, None to skip) is checked.
    """
    out = Path(out_dir)
    located = _locate_cifar(out, source, archive_md5)
    if located.is_file():
        checksum = {located.name: f"md5:{verify_md5(located, archive_md5, 'CIFAR-10 archive')}"}
        members = _read_archive(located)
    else:
        members = _read_folder(located, member_md5s)
        checksum = {name: f"md5:{hashlib.md5(raw).hexdigest()}" for name, raw in members.items()}
    train = [_batch_arrays(_unpickle(members[name], name), name) for name in CIFAR10_TRAIN_BATCHES]
    x_val, y_val = _batch_arrays(_unpickle(members["test_batch"], "test_batch"), "test_batch")
    class_names = _unpickle(members["batches.meta"], "batches.meta").get("label_names")
    meta = {
        "classes": 10,
        "class_names": list(class_names) if class_names else [str(i) for i in range(10)],
        "source": f"CIFAR-10 python version ({CIFAR10_URL}), read from {located}",
        "source_checksum": checksum,
        "split": "official: data_batch_1..5 for training, test_batch as validation",
    }
    arrays = {
        "x_train": np.concatenate([x for x, _ in train]),
        "y_train": np.concatenate([y for _, y in train]),
        "x_val": x_val,
        "y_val": y_val,
    }
    return write_dataset(out, "cifar10", arrays, meta)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dpscale.launch.setup.dataprep", description=__doc__
    )
    commands = parser.add_subparsers(dest="command", required=True)
    prepare = commands.add_parser("prepare", help="prepare a dataset; prints the .npz path")
    prepare.add_argument("dataset", choices=("digits", "cifar10"))
    prepare.add_argument("--out", required=True, type=Path, help="output folder")
    prepare.add_argument("--image-size", type=int, help="digits only (default 32)")
    prepare.add_argument("--val-fraction", type=float, default=0.2, help="digits only")
    prepare.add_argument("--seed", type=int, default=0, help="digits split seed")
    prepare.add_argument(
        "--source", help=f"cifar10: {CIFAR10_ARCHIVE} or {CIFAR10_FOLDER}; omit to download"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.dataset == "digits":
            size = 32 if args.image_size is None else args.image_size
            path = prepare_digits(args.out, size, args.val_fraction, args.seed)
        else:
            if args.image_size not in (None, 32):
                parser.error("cifar10 images are 32x32; --image-size applies to digits only")
            path = prepare_cifar10(args.out, args.source)
    except (DatasetError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
