"""Imported measurements (config imports): published nccl-tests, Horovod synthetic and
tf_cnn_benchmarks logs parse (tests/data/imports, sources in its README), their rows keep
their source through the tables and the fits, and a bad log or entry stops the study with
one line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO
from dpscale.analysis.laws.comm_fits import COMM_FITS_COLUMNS, comm_fits_table
from dpscale.analysis.results import import_logs
from dpscale.analysis.results.collectives import COLLECTIVES_COLUMNS, MEASURED, with_imported
from dpscale.analysis.results.import_logs import (
    LogError,
    parse_all_reduce,
    parse_throughput,
    read_lines,
)
from dpscale.analysis.results.imports import (
    THROUGHPUT_COLUMNS,
    imported_collectives,
    imported_throughput,
)
from dpscale.cli import main as cli
from dpscale.plan.errors import ConfigError
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES

DATA = REPO / "tests" / "data" / "imports"
SLINGSHOT = DATA / "nccl_all_reduce_gh200_2x4_slingshot.log"
NO_CXI = DATA / "nccl_all_reduce_gh200_2x4_nocxi.log"
HOROVOD_4 = DATA / "horovod_pytorch_resnet50_4gpu.log"
HOROVOD_2X4 = DATA / "horovod_pytorch_resnet50_2x4.log"
TF_CNN = DATA / "tf_cnn_benchmarks_resnet101_2gpu.log"


def entry(path: Path, kind: str = "nccl-tests", nodes: int = 2, devices: int = 4, **more):
    return {
        "kind": kind,
        "path": str(path),
        "network": "slingshot",
        "nodes": nodes,
        "devices_per_node": devices,
        **more,
    }


def lines(path: Path) -> list[str]:
    return read_lines(path)


# -- nccl-tests -----------------------------------------------------------------------------


def test_a_published_all_reduce_perf_log_gives_every_size_in_place_by_default():
    log = parse_all_reduce(lines(SLINGSHOT), ranks=8)
    assert log.test == "all_reduce_perf" and log.ranks_listed == 8 and log.validated
    assert log.placement == "in-place"
    assert len(log.rows) == 25
    assert [r.message_bytes for r in log.rows[:3]] == [8, 16, 32]
    largest = log.rows[-1]
    assert (largest.message_bytes, largest.dtype, largest.redop) == (134217728, "float", "sum")
    assert (largest.time_us, largest.algbw_GB_s, largest.busbw_GB_s) == (1907.8, 70.35, 123.11)


def test_out_of_place_reads_the_first_column_group():
    log = parse_all_reduce(lines(SLINGSHOT), ranks=8, placement="out-of-place")
    assert (log.rows[-1].time_us, log.rows[-1].busbw_GB_s) == (1916.4, 122.57)
    assert log.rows[16].time_us == 170.3  # 524288 B: out-of-place 170.3, in-place 349.6


def test_imported_rows_have_the_collectives_columns_and_their_source():
    table = imported_collectives([entry(SLINGSHOT), entry(NO_CXI, network="nocxi")], "demo")
    assert list(table.columns) == COLLECTIVES_COLUMNS
    assert len(table) == 50
    assert set(table["source"]) == {
        "imported:nccl-tests:nccl_all_reduce_gh200_2x4_slingshot.log",
        "imported:nccl-tests:nccl_all_reduce_gh200_2x4_nocxi.log",
    }
    row = table[table["network"] == "slingshot"].iloc[-1]
    assert row["time_s"] == pytest.approx(1907.8e-6)
    assert row["world_size"] == 8 and row["strategy"] == "nccl-tests"
    # recomputed from the time as the log computes them: equal to its columns to their rounding
    assert row["algbw_GB_s"] == pytest.approx(70.35, abs=0.01)
    assert row["busbw_GB_s"] == pytest.approx(123.11, abs=0.02)
    assert row["op"] == "all_reduce_perf, in-place, float sum"
    assert pd.isna(row["time_lo"]) and pd.isna(row["windows"])


def test_a_label_names_the_source():
    table = imported_collectives([entry(SLINGSHOT, label="alps")], "demo")
    assert set(table["source"]) == {"imported:nccl-tests:alps"}


def test_imported_rows_are_fitted_on_their_own_with_sensible_alpha_and_beta():
    """GH200 over Slingshot (CSCS) against the same nodes without the CXI hook: latency of
    about a microsecond per ring step (14 steps for 8 ranks, the log's smallest time is
    17.5 us), and a bandwidth near the largest message's busbw (123 GB/s), 10x and more
    above the run without the optimised network path (5.4 GB/s)."""
    imported = imported_collectives([entry(SLINGSHOT), entry(NO_CXI, network="nocxi")], "demo")
    measured = pd.DataFrame(
        {
            **{c: [None] * 4 for c in COLLECTIVES_COLUMNS},
            "study": "demo",
            "strategy": "torch-ddp",
            "framework": "torch",
            "network": "slingshot",  # the same network name: still fitted apart
            "comm": "none",
            "nodes": 2,
            "devices_per_node": 4,
            "world_size": 8,
            "source": MEASURED,
            "message_bytes": [4.0, 4e3, 4e5, 4e7],
            "time_s": [1e-4, 2e-4, 4e-3, 0.4],
            "quality": "ok",
        }
    )
    fits = comm_fits_table(with_imported(measured, imported))
    assert list(fits.columns) == COMM_FITS_COLUMNS
    assert len(fits) == 3 and (fits["status"] == "ok").all()
    by_network = fits[fits["source"] != MEASURED].set_index("network")
    fast, slow = by_network.loc["slingshot"], by_network.loc["nocxi"]
    assert 0.5e-6 < fast["alpha_s"] < 3e-6 and fast["points"] == 25
    assert 40 < fast["beta_GB_s"] < 200
    assert fast["beta_lo_GB_s"] < 123.11 < fast["beta_hi_GB_s"]
    assert 1 < slow["beta_GB_s"] < 10
    assert fast["beta_GB_s"] > 10 * slow["beta_GB_s"]
    assert fits[fits["source"] == MEASURED].iloc[0]["points"] == 4


def cut(path: Path, stop: str) -> list[str]:
    """The log up to and including the first line holding ``stop``, that line cut in half."""
    text = path.read_text()
    end = text.index(stop) + len(stop) // 2
    return text[:end].splitlines()


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (lambda: cut(SLINGSHOT, "   1048576        262144"), "is truncated at line 35: '1048576'"),
        (
            lambda: cut(SLINGSHOT, "# Out of bounds values")[:-1],
            "is truncated: no '# Avg bus bandwidth' line after the table",
        ),
        (
            lambda: [
                line.replace("all_reduce_perf", "all_gather_perf").replace(" sum ", " none ")
                for line in lines(SLINGSHOT)
            ],
            "is an all_gather_perf log (line 1); allowed: all_reduce_perf",
        ),
        (
            lambda: [line.replace(" sum ", " none ") for line in lines(SLINGSHOT)[1:]],
            "has rows with redop 'none' (no reduction); allowed: all_reduce_perf",
        ),
        (
            lambda: [
                line.replace("      0    17.72", "      3    17.72") for line in lines(SLINGSHOT)
            ],
            "has 1 result(s) with #wrong > 0 (first: line 18, size 8, #wrong 3)",
        ),
        (
            lambda: [line for line in lines(SLINGSHOT) if line.startswith("#")],
            "has no data rows between the table's header and its footer",
        ),
        (lambda: ["# nThread 1 nGpus 1 minBytes 8"], "has no nccl-tests table"),
        (lambda: lines(HOROVOD_4), "has no nccl-tests table"),
    ],
    ids=["cut-mid-row", "cut-before-footer", "all-gather", "no-reduction", "wrong", "no-rows",
         "banner-only", "horovod-log"],
)  # fmt: skip
def test_a_bad_all_reduce_log_is_refused_with_one_line(log, expected):
    with pytest.raises(LogError) as error:
        parse_all_reduce(log(), ranks=8)
    assert str(error.value).startswith(expected), error.value
    assert "\n" not in str(error.value)


def edited(old: str, new: str, path: Path = SLINGSHOT) -> list[str]:
    """The published log with ``old`` (once, on a row) replaced by ``new``."""
    text = path.read_text()
    assert text.count(old) == 1, old
    return text.replace(old, new).splitlines()


def every_time_negated() -> list[str]:
    """Every row's in-place time negated (the table row of the issue: busbw -41.5 GB/s)."""
    out = []
    for line in lines(SLINGSHOT):
        words = line.split()
        if words and words[0].isdigit():
            line = line.replace(f" {words[9]} ", f" -{words[9]} ", 1)
        out.append(line)
    return out


ROW_8192 = "        8192          2048     float     sum      -1    37.21    0.22    0.39      0"
LARGEST = "  1907.8   70.35  123.11      0"


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (lambda: edited("    35.84    0.23", "   -35.84    0.23"),
         "has time '-35.84' us at line 28 (in-place); allowed: a time above 0"),
        (every_time_negated, "has time '-17.72' us at line 18 (in-place)"),
        (lambda: edited("    37.21    0.22", "     0.00    0.22"),
         "has time '0.00' us at line 28 (out-of-place); allowed: a time above 0"),
        (lambda: edited(LARGEST, "  1907.8   70.35     nan      0"),
         "has busbw 'nan' at line 42 (in-place): not a number"),
        (lambda: edited(LARGEST, "  1907.8     inf  123.11      0"),
         "has algbw 'inf' at line 42 (in-place): not a number"),
        (lambda: edited(LARGEST, "  1e999   70.35  123.11      0"),
         "has time '1e999' at line 42 (in-place): not a finite number"),
        (lambda: edited(LARGEST, "  1.91e3   70.35  123.11      0"),
         "has time '1.91e3' at line 42 (in-place): not as all_reduce_perf prints it"),
        (lambda: edited(LARGEST, "  1907.8   70.35 -123.11      0"),
         "has busbw '-123.11' GB/s at line 42 (in-place); allowed: a bandwidth of 0 or more"),
        (lambda: edited(LARGEST, "  1_907.8  70.35  123.11      0"),
         "has time '1_907.8' at line 42 (in-place): not a number"),
        (lambda: edited(LARGEST, "  1907.8   72.35  126.61      0"),
         "has algbw 72.35 GB/s at line 42 (in-place) where size 134,217,728 B over time "
         "1907.8 us gives 70.35; allowed: nccl-tests' algbw = size / time"),
        (lambda: edited(LARGEST, "  1907.8   70.35  125.11      0"),
         "has busbw 125.11 GB/s at line 42 (in-place) where algbw 70.35 x 2(N-1)/N at N = 8 "
         "ranks gives 123.11"),
        (lambda: edited("           8             2", "           0             0"),
         "has size '0' at line 18; allowed: a whole number of bytes from 1 to"),
        (lambda: edited("           8             2", "          -8             2"),
         "has size '-8' at line 18"),
        (lambda: edited("           8             2", "         ٨           2"),
         "has size '٨' at line 18"),
        (lambda: edited("        4096          1024", "        1024          1024"),
         "has size 1,024 at line 27 after 2,048 at line 26; allowed: sizes that grow"),
        (lambda: edited(ROW_8192, ROW_8192 + "   5"),
         "has 14 columns at line 28 where its header has 13: '8192"),
        (lambda: edited(ROW_8192, ROW_8192.replace("   37.21", "")),
         "has 12 columns at line 28 where its header has 13"),
        (lambda: edited(LARGEST, "  1907.8   70.35  123.11     -1"),
         "has #wrong '-1' at line 42 (in-place); allowed: a count of wrong elements or N/A"),
        (lambda: edited(LARGEST, "  1907.8   70.35  123.11   1e+06"),
         "has 1 result(s) with #wrong > 0 (first: line 42, size 134217728, #wrong 1e+06)"),
        (lambda: edited("# Out of bounds values : 0 OK", "# Out of bounds values : 00003 OK"),
         "says '# Out of bounds values : 00003 OK': nccl-tests found wrong results"),
    ],
    ids=["one-negative-time", "all-negative", "zero-time", "nan-busbw", "inf-algbw",
         "huge-time", "exponent", "negative-busbw", "underscore", "algbw-edited", "busbw-edited",
         "zero-size", "negative-size", "arabic-digit-size", "shrinking-sizes", "extra-column",
         "missing-column", "negative-wrong", "wrong-in-g-format", "out-of-bounds"],
)  # fmt: skip
def test_a_row_no_run_prints_is_refused_naming_its_line(log, expected):
    with pytest.raises(LogError) as error:
        parse_all_reduce(log(), ranks=8)
    assert str(error.value).startswith(expected), error.value
    assert "\n" not in str(error.value) and str(error.value).isprintable()


def test_no_negative_bandwidth_reaches_the_collectives_table(tmp_path):
    """The issue's all-negative log gave busbw -41.5 GB/s in the table; now the import stops
    with one line naming the file and the row."""
    log = tmp_path / "negative.log"
    log.write_text("\n".join(every_time_negated()) + "\n")
    with pytest.raises(LogError) as error:
        imported_collectives([entry(log)], "demo")
    assert str(error.value).startswith(f"imports: '{log}' has time '-17.72' us at line 18")


def test_a_log_timed_on_the_cpu_checks_busbw_against_algbw_only():
    """all_reduce_perf -C 1 prints CPU time beside the GPU's bandwidths: they need not agree."""
    cpu = [line.replace("     time   algbw", "  cputime   algbw") for line in lines(SLINGSHOT)]
    cpu = [line.replace("  1907.8   70.35", "  1000.0   70.35") for line in cpu]
    assert parse_all_reduce(cpu, ranks=8).rows[-1].time_us == 1000.0
    wrong = [line.replace("70.35  123.11", "70.35  125.11") for line in cpu]
    with pytest.raises(LogError, match="^has busbw 125.11 GB/s at line 42"):
        parse_all_reduce(wrong, ranks=8)


def test_a_log_of_another_layout_is_refused():
    with pytest.raises(LogError, match=r"^lists 8 ranks \('#  Rank' lines\) but nodes x devi"):
        parse_all_reduce(lines(SLINGSHOT), ranks=4)
    unlisted = [line for line in lines(SLINGSHOT) if "Rank" not in line]
    with pytest.raises(LogError, match=r"^has busbw/algbw 1.750 where an all-reduce over nodes"):
        parse_all_reduce(unlisted, ranks=16)


def test_not_validated_rows_are_imported_and_say_so(tmp_path):
    log = tmp_path / "unvalidated.log"
    log.write_text(
        "\n".join(line.replace("      0", "    N/A") for line in lines(SLINGSHOT)) + "\n"
    )
    table = imported_collectives([entry(log)], "demo")
    assert len(table) == 25
    assert set(table["quality"]) == {"imported, not validated (#wrong N/A)"}


def test_rank_prefixes_and_nccl_info_lines_are_read_through(tmp_path):
    log = tmp_path / "tagged.log"
    body = [f"[1,0]<stdout>:{line}" for line in lines(SLINGSHOT)]
    body.insert(20, "nid005471:204199:204199 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1]")
    log.write_text("\n".join(body) + "\n")
    assert len(parse_all_reduce(read_lines(log), ranks=8).rows) == 25


# -- throughput logs ------------------------------------------------------------------------


def test_horovod_synthetic_logs_give_global_img_s_with_the_printed_interval():
    (run,) = parse_throughput(lines(HOROVOD_4), "horovod-synthetic", ranks=4)
    assert (run.model, run.batch_per_device, run.world_size) == ("resnet50", 32, 4)
    assert (run.img_s, run.img_s_pm) == (432.8, 4.9)
    assert (run.img_s_per_device, run.img_s_per_device_pm) == (108.2, 1.2)
    assert run.iterations == 10
    (run,) = parse_throughput(lines(HOROVOD_2X4), "horovod-synthetic", ranks=8)
    assert (run.batch_per_device, run.img_s, run.line) == (96, 14281.2, 2)


def test_a_tf_cnn_benchmarks_log_gives_its_total_without_an_interval():
    (run,) = parse_throughput(lines(TF_CNN), "tf-cnn-benchmarks", ranks=2)
    assert (run.model, run.batch_per_device, run.world_size) == ("resnet101", 64, 2)
    assert run.img_s == 308.27 and run.img_s_per_device == pytest.approx(154.135)
    assert pd.isna(run.img_s_pm) and run.iterations == 100 and run.mode == "training"


def test_several_runs_in_one_log_are_rows_of_their_own(tmp_path):
    log = tmp_path / "two.log"
    text = HOROVOD_4.read_text()
    log.write_text(text + text.replace("Batch size: 32", "Batch size: 64"))
    table = imported_throughput([entry(log, "horovod-synthetic", 1, 4)], "demo")
    assert list(table.columns) == THROUGHPUT_COLUMNS
    assert list(table["batch_per_device"]) == [32, 64]
    assert list(table["global_batch"]) == [128, 256]
    assert list(table["log_line"]) == [1, 18]
    assert set(table["source"]) == {"imported:horovod-synthetic:two.log"}


@pytest.mark.parametrize(
    ("kind", "log", "ranks", "expected"),
    [
        ("horovod-synthetic", lambda: lines(HOROVOD_4)[:-2], 4,
         "is truncated: the run from line 1 has no 'Total img/sec on N GPU(s)' line"),
        ("horovod-synthetic", lambda: lines(HOROVOD_4), 8,
         "ran on 4 devices (the run from line 1) but nodes x devices_per_node is 8"),
        ("horovod-synthetic", lambda: lines(TF_CNN), 2,
         "is a tf-cnn-benchmarks log, not horovod-synthetic"),
        ("tf-cnn-benchmarks", lambda: lines(TF_CNN)[:-1], 2,
         "is truncated: the run from line 2 has no 'total images/sec:' line"),
        ("tf-cnn-benchmarks", lambda: lines(SLINGSHOT), 2, "has no tf-cnn-benchmarks run"),
        ("tf-cnn-benchmarks",
         lambda: [line.replace("Batch size:  128 global", "Batch size:  32 global")
                  for line in lines(TF_CNN)], 2,
         "has 'Batch size: 32 global' and '64 per device' in the run from line 2; allowed: a "
         "global batch that is a whole number of devices' batches"),
        ("horovod-synthetic",
         lambda: [line.replace("432.8 +-4.9", "0.0 +-4.9") for line in lines(HOROVOD_4)], 4,
         "has img_s 0.0 in the run from line 1; allowed: above 0"),
        ("horovod-synthetic",
         lambda: [line.replace("Batch size: 32", "Batch size: " + "9" * 5000)
                  for line in lines(HOROVOD_4)], 4,
         "has no 'Batch size:' line in the run from line 1"),
    ],
    ids=["truncated", "other-layout", "other-kind", "tf-truncated", "not-a-tf-log",
         "tf-global-below-per-device", "zero-img-s", "batch-of-5000-digits"],
)  # fmt: skip
def test_a_bad_throughput_log_is_refused_with_one_line(kind, log, ranks, expected):
    with pytest.raises(LogError) as error:
        parse_throughput(log(), kind, ranks)
    assert str(error.value).startswith(expected), error.value


def test_an_empty_log_is_refused(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("\n \n")
    with pytest.raises(LogError, match="^is empty$"):
        read_lines(empty)


# -- config -----------------------------------------------------------------------------------


def check(config):
    return plan_study(config, STRATEGIES)[0]


@pytest.mark.parametrize(
    ("imports", "expected"),
    [
        ([{**entry(SLINGSHOT), "kind": "nccl"}],
         "imports[0].kind: 'nccl' is not allowed; allowed: ['nccl-tests', 'horovod-synthetic', "
         "'tf-cnn-benchmarks']"),
        ([entry(DATA / "missing.log")],
         f"imports[0].path: {str(DATA / 'missing.log')[:80]!r} is not a file; allowed: a log"),
        ([{**entry(SLINGSHOT), "network": "Slingshot 11"}],
         "imports[0].network: 'Slingshot 11' does not match"),
        ([entry(HOROVOD_4, "horovod-synthetic", 1, 4, placement="in-place")],
         "imports[0].placement: only for kind 'nccl-tests'"),
        ([entry(SLINGSHOT, nodes=1, devices=1)], "imports[0]: an all-reduce needs at least 2"),
        ([entry(SLINGSHOT), entry(SLINGSHOT, network="other")],
         "imports[1]: imports[0] has the same source "
         "'imported:nccl-tests:nccl_all_reduce_gh200_2x4_slingshot.log'"),
        ([{k: v for k, v in entry(SLINGSHOT).items() if k != "nodes"}],
         "imports[0]: 'nodes' is a required property"),
    ],
    ids=["kind", "missing-file", "network", "placement", "one-rank", "same-source", "no-nodes"],
)  # fmt: skip
def test_bad_import_entries_are_config_errors_of_one_line(default_config, imports, expected):
    default_config["imports"] = imports
    with pytest.raises(ConfigError) as error:
        check(default_config)
    assert str(error.value).startswith(expected), error.value
    assert "\n" not in str(error.value)


def test_imports_default_to_none(default_config):
    assert check(default_config)["imports"] == []


def test_a_bad_log_is_a_config_error_naming_the_entry_and_file(default_config, tmp_path):
    truncated = tmp_path / "cut.log"
    truncated.write_text("\n".join(lines(SLINGSHOT)[:30]) + "\n")
    default_config["imports"] = [entry(HOROVOD_4, "horovod-synthetic", 1, 4), entry(truncated)]
    config = check(default_config)  # the schema and the files: fine
    with pytest.raises(ConfigError) as error:
        import_logs.check_imports(config["imports"])
    assert str(error.value) == (
        f"imports[1].path: '{truncated}' is truncated: no '# Avg bus bandwidth' line after the "
        "table (the run stopped or the file was cut)"
    )


def test_check_config_reads_the_logs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    cli(["check-config", str(DATA / "demo_study.yaml")])
    assert capsys.readouterr().out.startswith("dpscale: config ok")
    study = tmp_path / "study.yaml"
    study.write_text(
        json.dumps({"imports": [entry(HOROVOD_4, "horovod-synthetic", nodes=2, devices=4)]})
    )
    with pytest.raises(SystemExit) as stop:
        cli(["check-config", str(study)])
    assert stop.value.code == (
        f"dpscale: config error: imports[0].path: '{HOROVOD_4}' ran on 4 devices (the run from "
        "line 1) but nodes x devices_per_node is 8; allowed: the layout the log ran on"
    )


# -- the step ---------------------------------------------------------------------------------


def test_the_imports_step_writes_both_tables_and_the_page(tmp_path, monkeypatch):
    from dpscale.steps.imports import imports

    monkeypatch.chdir(REPO)
    demo = yaml.safe_load((DATA / "demo_study.yaml").read_text())["imports"]
    outputs = {
        "collectives": tmp_path / "c.csv",
        "throughput": tmp_path / "t.csv",
        "throughput_html": tmp_path / "t.html",
    }
    line = imports({}, outputs, {"imports": json.dumps(demo), "study": "default"})
    assert line == "[dpscale] 5 imported logs: 50 all-reduce sizes, 3 throughput runs"
    collectives = pd.read_csv(outputs["collectives"])
    assert set(collectives["op"].str.split(", ").str[1]) == {"in-place", "out-of-place"}
    throughput = pd.read_csv(outputs["throughput"])
    assert list(throughput["img_s"]) == [432.8, 14281.2, 308.27]
    page = outputs["throughput_html"].read_text()
    assert "imported:horovod-synthetic:hpc-ai-envs" in page and "Imported throughput" in page
