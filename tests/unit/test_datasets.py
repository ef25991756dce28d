from __future__ import annotations

import hashlib
import io
import json
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from dpscale.launch.setup import dataprep
from dpscale.launch.setup.dataprep import prepare_cifar10, prepare_digits, verify_md5
from dpscale.runner.datasets import (
    DatasetError,
    augment_batch,
    load_dataset,
    normalise,
    shard_indices,
    stable_permutation,
)

N_PER_BATCH = 4


@pytest.fixture(scope="module")
def digits_npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare_digits(tmp_path_factory.mktemp("digits"), image_size=16)


def _fake_batch(seed: int, n: int = N_PER_BATCH) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    return {
        "batch_label": f"batch {seed}",
        "labels": [int(v) for v in rng.integers(0, 10, size=n)],
        "data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
        "filenames": [f"img{i}.png" for i in range(n)],
    }


def _fake_members() -> dict[str, bytes]:
    """The official pickle layout, tiny: 5 train batches, a test batch and the metadata."""
    names = [*dataprep.CIFAR10_TRAIN_BATCHES, "test_batch"]
    members = {name: pickle.dumps(_fake_batch(i), protocol=2) for i, name in enumerate(names)}
    meta = {"label_names": [f"class{i}" for i in range(10)], "num_cases_per_batch": N_PER_BATCH}
    members["batches.meta"] = pickle.dumps(meta, protocol=2)
    return members


def _fake_archive(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, raw in _fake_members().items():
            info = tarfile.TarInfo(f"{dataprep.CIFAR10_FOLDER}/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return path


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- digits


def test_digits_round_trip_and_metadata(digits_npz: Path) -> None:
    ds = load_dataset(digits_npz)
    meta = json.loads(digits_npz.with_suffix(".json").read_text())
    assert ds.name == meta["name"] == "digits"
    assert ds.x_train.dtype == np.uint8 and ds.x_train.shape[1:] == (16, 16, 3)
    assert ds.y_train.dtype == np.int64 and ds.y_val.dtype == np.int64
    assert len(ds.x_train) + len(ds.x_val) == 1797
    assert meta["n_train"] == len(ds.x_train) and meta["n_val"] == len(ds.x_val)
    assert abs(meta["n_val"] / 1797 - 0.2) < 0.01
    assert sorted(np.unique(ds.y_val)) == list(range(10))  # stratified
    assert ds.classes == 10 and ds.image_size == 16 and ds.channels == 3
    assert ds.x_train.max() == 255 and ds.x_train.min() == 0
    assert np.array_equal(ds.x_train[..., 0], ds.x_train[..., 2])  # grey in 3 channels
    expected_mean = ds.x_train.reshape(-1, 3).mean(axis=0) / 255
    np.testing.assert_allclose(ds.mean, expected_mean, rtol=1e-5)
    np.testing.assert_allclose(ds.std, ds.x_train.reshape(-1, 3).std(axis=0) / 255, rtol=1e-5)
    assert meta["npz_sha256"] == hashlib.sha256(digits_npz.read_bytes()).hexdigest()
    assert meta["source_checksum"] and meta["source"]


def test_digits_preparation_is_byte_identical(digits_npz: Path, tmp_path: Path) -> None:
    again = prepare_digits(tmp_path, image_size=16)
    assert again.read_bytes() == digits_npz.read_bytes()


def test_resize_keeps_a_constant_image_constant() -> None:
    image = np.full((1, 8, 8), 7.0)
    np.testing.assert_allclose(dataprep.resize_bilinear(image, 32), 7.0)


def test_corrupt_npz_is_detected(digits_npz: Path, tmp_path: Path) -> None:
    copy = tmp_path / digits_npz.name
    raw = bytearray(digits_npz.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    copy.write_bytes(bytes(raw))
    copy.with_suffix(".json").write_bytes(digits_npz.with_suffix(".json").read_bytes())
    with pytest.raises(DatasetError, match="corrupt") as info:
        load_dataset(copy)
    assert "\n" not in str(info.value) and str(copy) in str(info.value)


def test_missing_sidecar_is_reported(digits_npz: Path, tmp_path: Path) -> None:
    copy = tmp_path / digits_npz.name
    copy.write_bytes(digits_npz.read_bytes())
    with pytest.raises(DatasetError, match="metadata"):
        load_dataset(copy)


# --------------------------------------------------------------------------- CIFAR-10


def test_missing_cifar_source_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DatasetError) as info:
        prepare_cifar10(tmp_path / "out", missing)
    message = str(info.value)
    assert "\n" not in message
    assert str(missing) in message and dataprep.CIFAR10_ARCHIVE in message
    assert dataprep.CIFAR10_MD5 in message


def test_cifar_archive_with_wrong_md5_is_rejected(tmp_path: Path) -> None:
    archive = _fake_archive(tmp_path / dataprep.CIFAR10_ARCHIVE)
    with pytest.raises(DatasetError) as info:
        prepare_cifar10(tmp_path / "out", archive)
    message = str(info.value)
    assert "\n" not in message and "md5" in message and dataprep.CIFAR10_MD5 in message
    assert not (tmp_path / "out" / "cifar10.npz").exists()


def test_verify_md5(tmp_path: Path) -> None:
    archive = _fake_archive(tmp_path / "a.tar.gz")
    assert verify_md5(archive, _md5(archive), "archive") == _md5(archive)
    with pytest.raises(DatasetError, match="expected 0{32}"):
        verify_md5(archive, "0" * 32, "archive")


def test_cifar_archive_layout_is_converted_to_nhwc(tmp_path: Path) -> None:
    archive = _fake_archive(tmp_path / dataprep.CIFAR10_ARCHIVE)
    npz = prepare_cifar10(tmp_path / "out", archive, archive_md5=_md5(archive))
    ds = load_dataset(npz)
    assert ds.x_train.shape == (5 * N_PER_BATCH, 32, 32, 3)
    assert ds.x_val.shape == (N_PER_BATCH, 32, 32, 3)
    first = _fake_batch(0)
    expected = np.asarray(first["data"]).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    assert np.array_equal(ds.x_train[:N_PER_BATCH], expected)
    assert ds.y_train[:N_PER_BATCH].tolist() == first["labels"]
    assert ds.meta["class_names"][3] == "class3"
    assert ds.meta["source_checksum"] == {archive.name: f"md5:{_md5(archive)}"}


def test_cifar_folder_checks_member_md5s(tmp_path: Path) -> None:
    folder = tmp_path / dataprep.CIFAR10_FOLDER
    folder.mkdir()
    for name, raw in _fake_members().items():
        (folder / name).write_bytes(raw)
    with pytest.raises(DatasetError, match="data_batch_1 has md5"):
        prepare_cifar10(tmp_path / "out", tmp_path)  # finds the folder inside
    md5s = {name: _md5(folder / name) for name in dataprep.CIFAR10_MEMBER_MD5S}
    ds = load_dataset(prepare_cifar10(tmp_path / "out", folder, member_md5s=md5s))
    assert len(ds.x_train) == 5 * N_PER_BATCH
    (folder / "data_batch_3").unlink()
    with pytest.raises(DatasetError, match="lacks data_batch_3"):
        prepare_cifar10(tmp_path / "out", folder, member_md5s=md5s)


def test_cifar_pickles_may_not_name_other_globals(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not a CIFAR-10 batch"):
        dataprep._unpickle(pickle.dumps({"data": Path("x")}), "data_batch_1")


# --------------------------------------------------------------------------- sharding


@pytest.mark.parametrize("n", [10, 97, 1000])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 8])
def test_shards_are_disjoint_and_cover(n: int, world_size: int) -> None:
    for epoch in range(3):
        shards = [shard_indices(n, r, world_size, epoch, seed=7) for r in range(world_size)]
        assert len({len(s) for s in shards}) == 1
        union = np.concatenate(shards)
        assert len(union) == len(np.unique(union)) == n - n % world_size
        assert union.min() >= 0 and union.max() < n


@pytest.mark.parametrize("world_size", [2, 3, 4, 8])
def test_shards_without_drop_last_pad_by_wrapping(world_size: int) -> None:
    n = 97
    shards = [
        shard_indices(n, r, world_size, epoch=1, seed=0, drop_last=False) for r in range(world_size)
    ]
    per_rank = -(-n // world_size)
    assert all(len(s) == per_rank for s in shards)
    union = np.concatenate(shards)
    assert set(union.tolist()) == set(range(n))
    order = stable_permutation(n, 0, 1)
    padded = np.concatenate([order, order[: per_rank * world_size - n]])
    assert np.array_equal(shards[1], padded[1::world_size])


def test_epochs_reshuffle_and_ranks_agree() -> None:
    a = shard_indices(1000, 0, 2, epoch=0, seed=1)
    b = shard_indices(1000, 0, 2, epoch=1, seed=1)
    assert not np.array_equal(a, b)
    assert np.array_equal(a, shard_indices(1000, 0, 2, epoch=0, seed=1))
    assert not np.array_equal(a, shard_indices(1000, 0, 2, epoch=0, seed=2))
    assert not np.array_equal(
        shard_indices(1000, 0, 2, epoch=1, seed=0), shard_indices(1000, 0, 2, epoch=0, seed=1)
    )


def test_no_shuffle_is_strided_in_order() -> None:
    assert shard_indices(10, 1, 3, epoch=5, seed=0, shuffle=False).tolist() == [1, 4, 7]


def test_stable_permutation_is_pinned() -> None:
    # the same indices in every numpy version: a change here changes every framework's data order
    assert stable_permutation(10, 0, 0).tolist() == PINNED_PERMUTATION
    assert sorted(stable_permutation(1000, 3, 4).tolist()) == list(range(1000))


PINNED_PERMUTATION = [4, 8, 0, 1, 7, 6, 2, 5, 3, 9]


def test_bad_rank_is_rejected() -> None:
    with pytest.raises(ValueError, match="rank"):
        shard_indices(10, 2, 2, epoch=0, seed=0)


# --------------------------------------------------------------------------- batches


def test_augment_keeps_shape_dtype_and_flips() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(64, 8, 8, 3), dtype=np.uint8)
    out = augment_batch(images, np.random.default_rng(1), pad=0, flip=True)
    assert out.shape == images.shape and out.dtype == np.uint8
    flipped = [np.array_equal(o, i[:, ::-1]) for o, i in zip(out, images, strict=True)]
    kept = [np.array_equal(o, i) for o, i in zip(out, images, strict=True)]
    assert any(flipped) and any(kept) and all(f or k for f, k in zip(flipped, kept, strict=True))


def test_augment_crop_shifts_with_zero_padding() -> None:
    images = np.full((256, 6, 6, 3), 200, dtype=np.uint8)
    out = augment_batch(images, np.random.default_rng(2), pad=2, flip=False)
    assert out.shape == images.shape and out.dtype == np.uint8
    assert set(np.unique(out).tolist()) == {0, 200}  # some crops reach into the padding
    assert any(np.array_equal(o, i) for o, i in zip(out, images, strict=True))


def test_normalise() -> None:
    batch = np.array([[[[0, 255, 51]]]], dtype=np.uint8)
    out = normalise(batch, mean=[0.0, 0.5, 0.2], std=[1.0, 0.5, 0.1])
    assert out.dtype == np.float32 and out.shape == batch.shape
    np.testing.assert_allclose(out.ravel(), [0.0, 1.0, 0.0], atol=1e-6)


def test_cli_prepares_digits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dataprep.main(["prepare", "digits", "--out", str(tmp_path), "--image-size", "8"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert load_dataset(path).image_size == 8


def test_cli_reports_missing_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = dataprep.main(["prepare", "cifar10", "--out", str(tmp_path), "--source", "/nope"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "/nope" in err
