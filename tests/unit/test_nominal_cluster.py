"""A cluster without an nccl-tests log: its inter-node link given as a nominal rate and
latency, predicted through the strategy's declared traffic, every row saying it stands on a
nominal link; exactly one of the log or the nominal link, one line naming the field else."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from test_cluster_prediction import GOOD, MODEL, assert_one_line_naming, cluster_file, results
from test_cluster_workflow import BUCKET, TINY, run_step, synthetic_tables

from dpscale import cli
from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.plan import cluster_file as cf
from dpscale.plan import ring

NOMINAL = {"rate": "200gbit", "latency": "5us"}


def nominal_file(tmp_path, inter_node=None, **changes) -> str:
    """GOOD with its inter-node log replaced by a nominal link."""
    return cluster_file(tmp_path, inter_node=inter_node or NOMINAL, **changes)


@pytest.mark.parametrize("rate", ["200Gbit", "200GBIT"])
def test_a_nominal_rate_s_unit_is_read_in_any_case(tmp_path, rate):
    read = cf.read_cluster(nominal_file(tmp_path, {"rate": rate, "latency": "5us"}))
    assert read.rate.bytes_per_s == 25e9


def test_a_nominal_link_reads_as_its_rate_and_latency(tmp_path):
    read = cf.read_cluster(nominal_file(tmp_path))
    assert read.nominal and (read.log, read.ranks) == (None, None)
    assert read.rate.bytes_per_s == 25e9 and read.rate.latency_s == pytest.approx(5e-6)
    assert "nominal" in read.rate.source and "not a measured log" in read.rate.source


def test_the_workflow_reads_only_the_file_of_a_nominal_cluster(tmp_path):
    path = nominal_file(tmp_path)
    assert cf.cluster_inputs({"clusters": [path]}) == [path]


def test_a_nominal_link_prices_the_step_by_the_ring_law(tmp_path):
    """One 8 MiB bucket ready when the backward pass ends, 0.1 s of compute: each row's step
    is the compute plus a ring all-reduce of that bucket over its ranks at 200 Gbit/s and
    5 us a hop; more nodes, a longer step; every row says it is nominal."""
    tables = synthetic_tables(tmp_path / "study")
    path = nominal_file(tmp_path, model=TINY, batch_per_device=64, nodes=[2, 4, 8])
    table, top, page = run_step(tables, [path], tmp_path)
    for _, row in table.iterrows():
        ranks = row["world_size"]
        expected = 0.1 + ring.ring_allreduce_seconds(BUCKET, ranks, 25e9, 5e-6)
        assert row["step_time_s"] == pytest.approx(expected, rel=1e-9)
        assert (
            "nominal" in row["collective_basis"] and "not a measured log" in row["collective_basis"]
        )
        assert row["algorithm"] == cp.NOMINAL and row["kind"] == cp.KIND
    assert table["step_time_s"].is_monotonic_increasing
    assert "from one device and the cluster's nominal link (no nccl-tests log)" in top[0]
    assert "nccl-tests log (" not in top[0]


def test_the_command_labels_a_nominal_prediction(tmp_path, capsys):
    out = tmp_path / "predicted.csv"
    path = nominal_file(tmp_path, nodes=[1, 2])
    cli.main(["predict", "--results", str(results(tmp_path)), "--cluster", path, "--out", str(out)])
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].endswith(f"inter-node link 200 Gbit/s, 5 us latency ({cp.NOMINAL})")
    assert all(line.endswith("[extrapolated; nominal link]") for line in printed[2:4])
    table = pd.read_csv(out)
    assert table["collective_basis"].iloc[0].endswith(cp.ONE_NODE_NOMINAL)
    assert (table["status"] == cp.OK).all()


def test_a_nominal_link_prices_parameter_servers_a_log_would_refuse(tmp_path):
    """torch-dp declares parameter servers: a log measured an all-reduce and is refused for
    it, a nominal link prices the declared traffic itself."""
    folder = results(tmp_path)
    for name in ("bucket_timeline.csv", "cells.csv"):
        table = pd.read_csv(folder / "tables" / name)
        table.assign(strategy="torch-dp").to_csv(folder / "tables" / name, index=False)
    out = tmp_path / "predicted.csv"
    cli.main(
        ["predict", "--results", str(folder), "--cluster", nominal_file(tmp_path)]
        + ["--out", str(out)]
    )
    basis = pd.read_csv(out)["collective_basis"]
    assert basis.str.contains("parameter server").all() and basis.str.contains("nominal").all()


@pytest.mark.parametrize(
    ("inter_node", "field"),
    [
        ({}, "inter_node.nccl_tests_log: missing"),
        (
            {"nccl_tests_log": "slingshot.log", "ranks": 8, "latency": "5us"},
            "inter_node.latency: given",
        ),
        ({"nccl_tests_log": "slingshot.log"}, "inter_node.ranks: missing"),
        ({"rate": "200gbit"}, "inter_node.latency: missing"),
        ({"latency": "5us"}, "inter_node.rate: missing"),
        ({**NOMINAL, "ranks": 8}, "inter_node.ranks: the ranks a log ran at"),
        ({**NOMINAL, "latency": "5gbit"}, "inter_node.latency: '5gbit' is not a latency"),
        ({**NOMINAL, "latency": "500ms"}, "inter_node.latency: '500ms' is out of range"),
        ({**NOMINAL, "rate": "5us"}, "inter_node.rate: '5us' is not a rate"),
        ({**NOMINAL, "bandwidth": "1gbit"}, "inter_node.bandwidth: unknown key"),
    ],
)
def test_exactly_one_of_a_log_or_a_nominal_link_else_one_line(tmp_path, inter_node, field):
    path = cluster_file(tmp_path, inter_node=inter_node)
    assert_one_line_naming(field, path, tmp_path)


def test_the_study_config_names_the_entry_of_a_bad_nominal_link(tmp_path):
    path = nominal_file(tmp_path, inter_node={"rate": "200gbit"})
    with pytest.raises(cf.ConfigError, match=r"^clusters\[0\]: .*inter_node\.latency: missing"):
        cf.check_clusters({"clusters": [path]})


def test_the_documented_example_reads(tmp_path):
    """The module's example with its log swapped for a nominal link, as written there."""
    entry = {**GOOD, "model": MODEL, "inter_node": {"rate": "200gbit", "latency": "5us"}}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(entry), encoding="utf-8")
    assert cf.read_cluster(path).rate.words() == "200 Gbit/s, 5 us latency"
