"""plan.remedies: the remedies' declarations, their keys and the bytes their collectives send."""

from __future__ import annotations

import os

import pytest

from dpscale.plan.remedies import (
    BY_FIDELITY,
    BY_NAME,
    DECLARED,
    KEYS,
    NO_REMEDY,
    NONE,
    REMEDIES,
    SHAPES,
    Comm,
    CommError,
    Remedy,
    comm_description,
    name_of,
    parse,
    powersgd_matrix,
    powersgd_start,
    powersgd_start_iter,
    remedy_of,
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
        (parse("push-pull"), 1700, 1700),  # 2-bit's path, nothing compressed
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
        ("push-pull", "push-pull"),
        ("push-pull-bucket1", "push-pull"),
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


def test_powersgd_start_is_a_training_remedy_of_its_own_and_absent_params_stay_as_before():
    early = parse({"name": "powersgd", "rank": 2, "start": 2}, training=True)
    assert early.key == "powersgd-r2-s2" and name_of(early.key) == "powersgd"
    assert early.to_dict()["start"] == 2
    assert "start" not in parse("powersgd").to_dict()  # stored cells' params are unchanged
    assert powersgd_start(early, 150, 50) == (2, "the study's train.comm start, of 150 steps")
    advised = powersgd_start(parse("powersgd"), 150, 0)
    assert advised[0] == 15 and advised[1].startswith("the framework's advice")
    with pytest.raises(ValueError, match=r"comm\[0\]\.start: only train\.comm takes a start"):
        parse({"name": "powersgd", "start": 2})
    with pytest.raises(
        ValueError, match=r"comm\[0\]\.start: 1 is not allowed; allowed: an integer >= 2"
    ):
        parse({"name": "powersgd", "start": 1}, training=True)
    with pytest.raises(ValueError, match=r"comm\[0\]\.start: only powersgd takes a start"):
        parse({"name": "fp16", "start": 2}, training=True)


def test_a_fusion_cycle_time_is_a_remedy_of_its_own_that_only_horovod_applies():
    from dpscale.registry import STRATEGIES

    cycle = parse({"name": "none", "cycle_ms": 5})
    assert cycle.key == "none-cycle5" and not cycle.is_default
    assert name_of(cycle.key) == "none"
    assert parse({"name": "fp16", "bucket_mb": 32, "cycle_ms": 0.5}).key == "fp16-bucket32-cycle0.5"
    with pytest.raises(
        ValueError, match=r"comm\[0\]\.cycle_ms: 0 is not allowed; allowed: a number > 0"
    ):
        parse({"name": "none", "cycle_ms": 0})
    horovod = STRATEGIES["horovod-tf"].comm
    torch = STRATEGIES["torch-ddp"].comm
    assert horovod.skip_reason("horovod-tf", cycle, "cpu", "synthetic") is None
    reason = torch.skip_reason("torch-ddp", cycle, "cpu", "synthetic")
    assert reason == "torch-ddp has no fusion cycle time to set (comm cycle_ms)"


def test_horovod_reads_the_cells_fusion_settings_and_records_its_defaults(monkeypatch):
    from dpscale.strategies import horovod_tf

    monkeypatch.delenv("HOROVOD_FUSION_THRESHOLD", raising=False)
    monkeypatch.delenv("HOROVOD_CYCLE_TIME", raising=False)

    class Plain:  # only what set_fusion reads
        comm = NONE

    assert horovod_tf.set_fusion(Plain()) == (128.0, 1.0)  # Horovod's own defaults

    class Tuned:
        comm = parse({"name": "none", "bucket_mb": 32, "cycle_ms": 3.5})

    assert horovod_tf.set_fusion(Tuned()) == (32.0, 3.5)
    assert os.environ["HOROVOD_CYCLE_TIME"] == "3.5"
    assert os.environ["HOROVOD_FUSION_THRESHOLD"] == str(32 * 1024 * 1024)


def test_every_planned_cell_path_fits_the_workflows_wildcards(default_config):
    """A remedy's decimal parameter (2-bit's default threshold 0.5, a cycle of 0.5 ms) must
    still name a cell the workflow can build: its mode wildcard allows the dot."""
    import re
    from pathlib import Path

    from dpscale.plan.study import plan_study
    from dpscale.registry import STRATEGIES

    rules = (Path(__file__).parents[2] / "workflow" / "rules" / "common.smk").read_text()
    mode = re.search(r'^\s+mode="([^"]+)"', rules, re.MULTILINE).group(1)
    default_config["comm"] = [
        "none",
        "2bit",
        "push-pull",
        {"name": "none", "cycle_ms": 0.5},
        {"name": "fp16", "bucket_mb": 2.5},
    ]
    _, cells = plan_study(default_config, STRATEGIES)
    keys = {cell.mode_key for cell in cells}
    assert {"synthetic-comm-2bit-t0.5", "synthetic-comm-none-cycle0.5"} <= keys
    assert "synthetic-comm-push-pull" in keys
    assert all(re.fullmatch(mode, key) for key in keys), sorted(keys)


def test_every_declared_remedy_has_every_field():
    assert [remedy.name for remedy in DECLARED] == list(REMEDIES) == list(BY_NAME)
    for remedy in DECLARED:
        assert isinstance(remedy, Remedy)
        assert remedy.name and remedy.words.strip(), remedy
        assert remedy.wire_ratio is None or remedy.wire_ratio >= 1.0, remedy
        assert remedy.collectives_per_bucket >= 1, remedy
        assert isinstance(remedy.hidden, bool) and isinstance(remedy.fidelity, int)
        assert all(param.name and param.words.strip() for param in remedy.params), remedy
        assert REMEDIES[remedy.name] == remedy.wire_ratio
        assert remedy.name in comm_description("")
    assert BY_NAME[NO_REMEDY].fidelity == 0 and BY_NAME[NO_REMEDY].wire_ratio == 1.0


def test_fidelity_ranks_are_distinct_and_keep_the_order_the_ranking_had():
    ranks = [remedy.fidelity for remedy in DECLARED]
    assert len(set(ranks)) == len(ranks)
    assert [remedy.name for remedy in BY_FIDELITY] == [
        "none",
        "push-pull",
        "fp16",
        "bf16",
        "delayed",
        "delayed-fp16",
        "powersgd",
        "2bit",
    ]


def test_what_the_analysis_read_from_its_own_tables_is_declared_here():
    """remedy_fit's HIDDEN and COLLECTIVES_PER_BUCKET as they were, now the declaration's."""
    assert [r.name for r in DECLARED if r.hidden] == ["delayed", "delayed-fp16"]
    assert {
        r.name: r.collectives_per_bucket for r in DECLARED if r.collectives_per_bucket != 1
    } == {"powersgd": 3}
    assert {r.name: r.param_names for r in DECLARED if r.params} == {
        "powersgd": ("rank", "start"),
        "2bit": ("threshold",),
    }


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("powersgd-r2", "powersgd"),
        ("powersgd-r2-s2", "powersgd"),
        ("delayed-fp16-bucket1", "delayed-fp16"),
        ("none-cycle5", "none"),
        ("2bit-t0.5", "2bit"),
    ],
)
def test_a_key_reads_its_remedys_declaration(key, name):
    assert remedy_of(key) is BY_NAME[name]


@pytest.mark.parametrize("key", ["someone-elses", "fp32", "", "powersgdx"])
def test_a_key_no_remedy_declares_is_an_error(key):
    with pytest.raises(CommError, match="names no declared remedy"):
        remedy_of(key)


def test_each_declared_key_has_its_parser_and_its_field_on_a_comm():
    from dataclasses import fields

    from dpscale.plan.remedies import _PARAM_PARSERS

    declared = [name for remedy in DECLARED for name in remedy.param_names]
    assert list(_PARAM_PARSERS) == declared == list(KEYS[1 : 1 + len(declared)])
    assert set(declared) <= {field.name for field in fields(Comm)}


def test_the_shapes_and_keys_the_errors_name_come_from_the_declaration():
    assert SHAPES == (
        "a name (none, fp16, bf16, powersgd, 2bit, delayed, delayed-fp16, push-pull) or "
        "{name[, rank (powersgd)][, start (powersgd, train.comm)][, threshold (2bit)]"
        "[, bucket_mb][, cycle_ms][, networks]}"
    )
    assert KEYS == ("name", "rank", "start", "threshold", "bucket_mb", "cycle_ms", "networks")
    with pytest.raises(CommError, match=r"comm\[0\]\.threshold: only 2bit takes a threshold"):
        parse({"name": "powersgd", "threshold": 0.5})
