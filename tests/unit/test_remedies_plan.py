"""plan.remedies: the remedies' keys and the bytes their collectives send."""

from __future__ import annotations

import pytest

from dpscale.plan.remedies import (
    NONE,
    Comm,
    name_of,
    parse,
    powersgd_matrix,
    powersgd_start_iter,
    wire_bytes,
)


def test_keys_name_the_remedy_and_its_parameters():
    assert NONE.key == "none" and NONE.is_default
    assert parse("powersgd").key == "powersgd-r2"
    assert parse({"name": "2bit", "threshold": 0.25}).key == "2bit-t0.25"
    assert parse({"name": "fp16", "bucket_mb": 4}).key == "fp16-bucket4"
    assert not Comm(bucket_mb=25.0).is_default  # a bucket size is a remedy of its own


@pytest.mark.parametrize(
    ("comm", "message", "sent"),
    [
        (NONE, 4096, 4096),
        (parse("fp16"), 4096, 2048),
        (parse("delayed"), 4096, 4096),  # the same bytes, later
        (parse("delayed-fp16"), 4096, 2048),  # half the bytes, later
        (parse("2bit"), 1700, 903),  # 2-bit pushes, float32 pulls: 1700 (1 + 1/16) / 2
        (parse({"name": "powersgd", "rank": 2}), 4096, 2 * 32 * 2 * 4),  # 1024 = 32 x 32
        (parse({"name": "powersgd", "rank": 2}), 4, 2 * 1 * 1 * 4),  # a 1 x 1 matrix, rank 1
    ],
)
def test_wire_bytes(comm, message, sent):
    assert wire_bytes(comm, message) == sent


def test_powersgd_pads_to_a_square_and_caps_its_rank():
    assert powersgd_matrix(4 * 1000, 4) == (32, 4)  # 1000 elements in 32 x 32
    assert powersgd_matrix(4 * 3, 4) == (2, 2)


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("powersgd-r2", "powersgd"),
        ("delayed", "delayed"),
        ("delayed-bucket2", "delayed"),
        ("delayed-fp16", "delayed-fp16"),  # the combination, not delayed
        ("delayed-fp16-bucket1", "delayed-fp16"),
        ("2bit-t0.5", "2bit"),
        ("someone-elses", "someone-elses"),
    ],
)
def test_a_key_names_its_remedy(key, name):
    assert name_of(key) == name


@pytest.mark.parametrize(
    ("total", "warmup", "start"),
    [
        (150, 0, 15),  # 10% of the steps
        (150, 50, 50),  # no fewer than the warm-up
        (5, 0, 2),  # never below torch's minimum
        (151, 0, 16),  # rounded up
    ],
)
def test_powersgd_starts_where_torch_advises_for_a_training(total, warmup, start):
    assert powersgd_start_iter(total, warmup) == start
