"""Files a person hands dpscale by path are read within a bound and only as UTF-8: a 100 MB
log is refused before a byte of it is read, a Latin-1 or UTF-16 one in one line, and the same
holds for Horovod timelines and the tables `dpscale predict` reads."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from conftest import REPO
from dpscale import cli
from dpscale.analysis.results import horovod_timeline as hvt
from dpscale.analysis.results.import_logs import LogError, check_imports, read_lines
from dpscale.plan import user_files
from dpscale.plan.errors import ConfigError
from dpscale.plan.user_files import LOG, TABLE, TIMELINE, Unreadable, read_text

SLINGSHOT = REPO / "tests" / "data" / "imports" / "nccl_all_reduce_gh200_2x4_slingshot.log"
EVIDENCE = REPO / "evidence" / "2026-11-26-nvidia-h100" / "gpu_resnet50_bucket_timeline"


def sparse(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk (a hole): only its length is real."""
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def one_line(message: str) -> bool:
    return "\n" not in message and "\r" not in message and message.isprintable()


def test_every_kind_has_one_bound_and_a_log_is_16_mib():
    assert LOG.bound == 16 * 2**20
    assert TIMELINE.bound > LOG.bound and TABLE.bound > LOG.bound


def test_a_100_mb_log_is_refused_before_it_is_read(tmp_path):
    big = sparse(tmp_path / "big.log", 100 * 10**6)
    start = time.perf_counter()
    with pytest.raises(LogError) as error:
        read_lines(big)
    assert time.perf_counter() - start < 0.5
    assert str(error.value).startswith(
        "is 100,000,000 bytes, over the 16 MiB bound for a benchmark log (fixed: "
        "dpscale.plan.user_files, no setting); allowed: the output of one run"
    )


def test_a_log_just_over_the_bound_is_refused_and_one_at_it_is_read(tmp_path):
    at = tmp_path / "at.log"
    text = SLINGSHOT.read_text()
    at.write_text(text + " " * (LOG.bound - len(text.encode())))
    assert read_text(at, LOG).startswith("$ srun")
    with open(at, "a") as handle:
        handle.write(" ")
    with pytest.raises(Unreadable, match="^is 16,777,217 bytes, over the 16 MiB bound"):
        read_text(at, LOG)


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [
        ("latin-1", "is not UTF-8 (byte 0xe9 at line 6); allowed: UTF-8 text (iconv -f LATIN1"),
        ("utf-16", "is not UTF-8 (UTF-16: it starts with a UTF-16 byte-order mark)"),
        ("utf-16-be", "is not UTF-8 text (a NUL byte at line 1: UTF-16 without a byte-order"),
    ],
)
def test_a_log_in_another_encoding_is_one_line(tmp_path, encoding, expected):
    log = tmp_path / "other.log"
    log.write_bytes(SLINGSHOT.read_text().replace("GH200", "GH200 café").encode(encoding))
    with pytest.raises(LogError) as error:
        read_lines(log)
    assert str(error.value).startswith(expected), error.value
    assert one_line(str(error.value))


def test_a_utf8_byte_order_mark_is_dropped(tmp_path):
    log = tmp_path / "bom.log"
    log.write_bytes(b"\xef\xbb\xbf" + SLINGSHOT.read_bytes())
    assert read_lines(log)[0].startswith("$ srun")


def test_a_folder_or_a_missing_file_cannot_be_read(tmp_path):
    for path, why in ((tmp_path, "Is a directory"), (tmp_path / "no.log", "No such file")):
        with pytest.raises(LogError, match=f"^cannot be read: {why}"):
            read_lines(path)


def test_a_file_that_grows_past_the_bound_while_read_is_refused(tmp_path, monkeypatch):
    """The size is checked before reading and what is read is bounded too (a device such as
    /dev/zero reports no size and never ends)."""
    monkeypatch.setattr(user_files, "LOG", user_files.FileKind("a benchmark log", 10, "less"))
    with pytest.raises(Unreadable, match="^is more than 10 bytes, over the"):
        read_text("/dev/zero", user_files.LOG)


def test_the_config_check_names_the_entry_and_the_file(tmp_path):
    big = sparse(tmp_path / "big.log", 100 * 10**6)
    entry = {"kind": "nccl-tests", "path": str(big), "network": "ib", "nodes": 2}
    with pytest.raises(ConfigError) as error:
        check_imports([{**entry, "devices_per_node": 4}])
    assert str(error.value).startswith(f"imports[0].path: '{big}' is 100,000,000 bytes, over")


# -- Horovod timelines ------------------------------------------------------------------------


def test_a_timeline_over_its_bound_or_not_utf8_is_one_line(tmp_path):
    big = sparse(tmp_path / "timeline.json", TIMELINE.bound + 1)
    with pytest.raises(LogError, match="^is 268,435,457 bytes, over the 256 MiB bound for a Hor"):
        hvt.read_events(big)
    latin = tmp_path / "latin.json"
    latin.write_bytes('[{"name": "café"}]'.encode("latin-1"))
    with pytest.raises(LogError, match=r"^is not UTF-8 \(byte 0xe9 at line 1\)"):
        hvt.read_events(latin)


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        ([{"ph": "B", "pid": 1, "name": "A", "ts": -5}],
         "has event 0 (ph 'B') with ts -5; allowed: microseconds since Horovod started"),
        ([{"ph": "B", "pid": 1, "name": "A", "ts": None}], "has event 0 (ph 'B') with ts None"),
        ([{"ph": "B", "pid": 1, "name": "A", "ts": float("nan")}], "with ts nan"),
        ([{"ph": "B", "pid": 1, "name": "A", "ts": "12"}], "with ts '12'"),
        ([{"ph": "B", "pid": [1], "name": "A", "ts": 1}], "with pid [1]; allowed: a number"),
        ([{"ph": "B", "pid": 1, "name": {"x": 1}, "ts": 1}], "with name {'x': 1}"),
        ([{"ph": "B", "pid": 1, "name": "A", "ts": 9}, {"ph": "E", "pid": 1, "ts": 3}],
         "has event 1 (ph 'E') with ts 3, before its begin at 9; allowed: an end after"),
    ],
    ids=["negative", "null", "nan", "string", "list-pid", "dict-name", "end-before-begin"],
)  # fmt: skip
def test_a_timeline_event_no_horovod_writes_is_one_line(events, expected):
    with pytest.raises(LogError) as error:
        hvt.activities(events)
    assert str(error.value).startswith("has event ") and expected in str(error.value)
    assert one_line(str(error.value))


# -- the tables `dpscale predict` reads -------------------------------------------------------


def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results" / "h100"
    (folder / "tables").mkdir(parents=True)
    for name in ("bucket_timeline.csv", "cells.csv"):
        shutil.copy(EVIDENCE / "tables" / name, folder / "tables" / name)
    return folder


def cluster(tmp_path: Path) -> str:
    shutil.copy(SLINGSHOT, tmp_path / "slingshot.log")
    path = tmp_path / "cluster.yaml"
    entry = {
        "name": "gh200",
        "inter_node": {"nccl_tests_log": "slingshot.log", "ranks": 8},
        "devices_per_node": 4,
        "nodes": [2],
        "model": "resnet50-imagenet224-c1000",
        "batch_per_device": 256,
    }
    path.write_text(json.dumps(entry))
    return str(path)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda t: sparse(t / "cells.csv", TABLE.bound + 1), "cells.csv is 268,435,457 bytes"),
        (lambda t: (t / "cells.csv").write_bytes("model\ncafé\n".encode("latin-1")),
         "cells.csv is not UTF-8 (byte 0xe9 at line 2)"),
        (lambda t: (t / "cells.csv").write_text("model\nresnet\n"),
         "cells.csv lacks column 'strategy' (and 6 more)"),
        (lambda t: (t / "bucket_timeline.csv").write_text('a,b\n"x\n'),
         "bucket_timeline.csv is not a CSV table"),
    ],
    ids=["cells-over-bound", "cells-latin1", "cells-columns", "timeline-not-csv"],
)  # fmt: skip
def test_predict_reads_the_results_tables_within_their_bound(tmp_path, change, expected):
    folder = results(tmp_path)
    change(folder / "tables")
    with pytest.raises(SystemExit) as stop:
        cli.main(["predict", "--results", str(folder), "--cluster", cluster(tmp_path)])
    message = str(stop.value.code)
    assert message.startswith(f"dpscale: predict: {folder / 'tables'}/"), message
    assert expected in message and one_line(message)


def test_predict_refuses_a_100_mb_log_in_well_under_two_seconds(tmp_path):
    path = cluster(tmp_path)
    sparse(tmp_path / "slingshot.log", 100 * 10**6)
    start = time.perf_counter()
    with pytest.raises(SystemExit) as stop:
        cli.main(["predict", "--results", str(results(tmp_path)), "--cluster", path])
    assert time.perf_counter() - start < 2.0
    assert str(stop.value.code).startswith(
        f"dpscale: {path}: inter_node.nccl_tests_log: slingshot.log is 100,000,000 bytes, over "
        "the 16 MiB bound"
    )


def test_a_profile_the_config_names_is_read_within_the_bound_for_a_table(tmp_path):
    from dpscale.plan.published import check_published

    big = sparse(tmp_path / "profile.csv", TABLE.bound + 1)
    with pytest.raises(ConfigError) as error:
        check_published({"published_cases": {"profile": str(big)}})
    # the path is quoted cut at 80 characters: CI's temporary folders are longer
    assert str(error.value).startswith("published_cases.profile: '")
    assert "' is 268,435,457 bytes, over the 256 MiB bound for a table" in str(error.value)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("model\ncafé\n".encode("latin-1"))
    refused = r"^published_cases.profile: '.*' is not UTF-8 \(byte 0xe9"
    with pytest.raises(ConfigError, match=refused):
        check_published({"published_cases": {"profile": str(latin)}})
