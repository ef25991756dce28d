"""A user's cluster predicted from one device and the cluster's nccl-tests log (issue 50):
a synthetic timeline and ring logs written from a known law, so each answer is known; the
command end to end on the H100 evidence tables and the published GH200 Slingshot log."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from test_cluster_link import SLINGSHOT, logged_seconds, nccl_log

from conftest import REPO
from dpscale import cli
from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.laws.cluster_link import MEASURED, CollectiveCurve
from dpscale.analysis.laws.commmodel.buckets import BucketTimeline
from dpscale.analysis.results.import_logs import parse_all_reduce
from dpscale.plan import ring
from dpscale.plan.cluster_file import read_cluster
from dpscale.plan.errors import ConfigError
from dpscale.plan.layout import Layout
from helpers.timelines import FOUR

EVIDENCE = REPO / "evidence" / "2026-11-26-nvidia-h100" / "gpu_resnet50_bucket_timeline"
MODEL = "resnet50-imagenet224-c1000"
GRADIENT = 100e6  # bytes
DEVICE = cp.OneDevice(batch=64, step_s=0.1, lo=0.099, hi=0.101)


def curve_of(alpha: float, beta: float) -> CollectiveCurve:
    """The curve of a log at 8 ranks (2 nodes x 4) that followed the ring law."""

    def law(size: float, ranks: int) -> float:
        return ring.ring_allreduce_seconds(size, ranks, beta, alpha)

    return CollectiveCurve.from_log(parse_all_reduce(nccl_log(law, 8), 8), 8)


FAST = curve_of(1e-7, 1e13)
SLOW = curve_of(5e-6, 2e9)


def cluster(curve: CollectiveCurve, nodes=(2, 4, 16)) -> cp.Cluster:
    return cp.Cluster("test", curve, 4, tuple(nodes))


def test_a_last_bucket_ready_at_the_end_adds_its_whole_logged_time():
    """One bucket, ready when the backward pass ends: step = compute + its all-reduce, and
    at a logged size and the log's own ranks that is the logged time itself."""
    one = BucketTimeline(1 / 3, 0.002, 0.1 / 64, 0.0, np.array([1.0]), np.array([1.0]), (64,))
    size = 8 * 2**20
    logged = logged_seconds(nccl_log(lambda s, n: ring.ring_allreduce_seconds(s, n, 2e9, 5e-6), 8))[
        size
    ]
    table = cp.predict(one, DEVICE, cluster(SLOW, (2,)), size, "test")
    row = table.iloc[0]
    assert row["world_size"] == 8
    assert row["step_time_s"] == pytest.approx(0.1 + logged, rel=1e-12)
    assert row["efficiency"] == pytest.approx(0.1 / (0.1 + logged), rel=1e-12)
    assert row["collective_basis"] == MEASURED
    assert row["kind"] == "extrapolated"


def test_a_very_fast_link_scales_perfectly():
    table = cp.predict(FOUR, DEVICE, cluster(FAST), GRADIENT, "test")
    assert table["efficiency"].to_numpy() == pytest.approx(1.0, abs=2e-3)
    assert table["speedup"].to_numpy() == pytest.approx(table["world_size"], rel=2e-3)
    assert (table["compression_for_90pct"] == 1.0).all()


def test_a_slow_link_loses_efficiency_as_nodes_grow():
    table = cp.predict(FOUR, DEVICE, cluster(SLOW), GRADIENT, "test")
    efficiency = table["efficiency"].to_numpy()
    assert efficiency[0] < 0.8
    assert np.all(np.diff(efficiency) < 0)
    assert "ring law at 64 ranks" in table["collective_basis"].iloc[-1]


@pytest.mark.parametrize("curve", [FAST, SLOW], ids=["fast", "slow"])
def test_ranges_hold_the_point_value(curve):
    table = cp.predict(FOUR, DEVICE, cluster(curve), GRADIENT, "test")
    for name, lo, hi in (
        ("step_time_s", "step_time_lo_s", "step_time_hi_s"),
        ("img_s", "img_s_lo", "img_s_hi"),
        ("speedup", "speedup_lo", "speedup_hi"),
        ("efficiency", "efficiency_lo", "efficiency_hi"),
    ):
        assert (table[lo] <= table[name]).all() and (table[name] <= table[hi]).all(), name
    assert (table["step_time_hi_s"] > table["step_time_lo_s"]).all()


def test_the_compression_found_gives_ninety_percent():
    world = Layout(4, 4)
    c, reason = cp.compression_for(FOUR, DEVICE, SLOW, GRADIENT, world)
    assert c > 1 and "bisection" in reason
    assert cp.efficiency(FOUR, DEVICE, SLOW, GRADIENT, world) < 0.9
    assert cp.efficiency(FOUR, DEVICE, SLOW, GRADIENT, world, c) == pytest.approx(0.9, abs=2e-3)
    assert cp.efficiency(FOUR, DEVICE, SLOW, GRADIENT, world, c) >= 0.9


def test_compression_is_one_where_ninety_percent_is_met():
    assert cp.compression_for(FOUR, DEVICE, FAST, GRADIENT, Layout(4, 4)) == (
        1.0,
        "already met uncompressed",
    )


def test_latency_alone_too_slow_is_not_reachable():
    latency_bound = curve_of(5e-3, 2e9)  # 5 ms per ring step
    c, reason = cp.compression_for(FOUR, DEVICE, latency_bound, GRADIENT, Layout(16, 4))
    assert math.isnan(c) and "not reachable" in reason


def test_one_device_comes_from_the_ok_one_rank_cell():
    cells = pd.read_csv(EVIDENCE / "tables" / "cells.csv")
    device = cp.one_device(cells, "torch-ddp", MODEL, 256)
    img_s, half = cells["img_s_mean"].iloc[0], cells["img_s_ci95"].iloc[0]
    assert device.step_s == pytest.approx(256 / img_s)
    assert (device.lo, device.hi) == pytest.approx((256 / (img_s + half), 256 / (img_s - half)))
    with pytest.raises(ValueError, match="batch_per_device"):
        cp.one_device(cells, "torch-ddp", MODEL, 128)


# -- the cluster file and the command ------------------------------------------------------

GOOD = {
    "name": "gh200-slingshot",
    "inter_node": {"nccl_tests_log": "slingshot.log", "ranks": 8, "rate": "200gbit"},
    "devices_per_node": 4,
    "nodes": [2, 8],
    "model": MODEL,
    "batch_per_device": 256,
}


def cluster_file(tmp_path, **changes) -> str:
    shutil.copy(SLINGSHOT, tmp_path / "slingshot.log")
    entry = {**GOOD, **changes}
    for key in [k for k, v in entry.items() if v is None]:
        del entry[key]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(entry), encoding="utf-8")
    return str(path)


def results(tmp_path):
    folder = tmp_path / "results" / "h100"
    (folder / "tables").mkdir(parents=True)
    for name in ("bucket_timeline.csv", "cells.csv"):
        shutil.copy(EVIDENCE / "tables" / name, folder / "tables" / name)
    return folder


def test_a_good_cluster_file_reads(tmp_path):
    read = read_cluster(cluster_file(tmp_path))
    assert (read.ranks, read.nodes, read.strategy) == (8, (2, 8), None)
    assert read.rate.bytes_per_s == 25e9
    assert read.log == (tmp_path / "slingshot.log").resolve()


def assert_one_line_naming(field: str, path: str, tmp_path) -> None:
    """Reading the file and `dpscale predict` each fail with one line naming ``field``."""
    with pytest.raises(ConfigError) as error:
        read_cluster(path)
    assert field in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["predict", "--results", str(results(tmp_path)), "--cluster", path])
    message = str(exit_.value.code)
    assert message.startswith(f"dpscale: {path}: ") and field in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"devices_per_node": None}, "devices_per_node: missing"),
        ({"nodes": [0]}, "nodes[0]: 0 is not an integer >= 1"),
        ({"gpus": 4}, "gpus: unknown key"),
        ({"inter_node": {"nccl_tests_log": "nowhere.log", "ranks": 8}}, "nccl_tests_log: nowh"),
        ({"inter_node": {"nccl_tests_log": "slingshot.log", "ranks": 8, "rate": "9us"}}, "rate"),
        ({"intra_node": {"rate": "2400gbit"}}, "intra_node.latency: missing"),
        ({"intra_node": {"rate": "2400gbit", "latency": "1 fortnight"}}, "intra_node.latency"),
        ({"intra_node": {"rate": "2400gbit", "latency": "1us", "ranks": 4}}, "intra_node.ranks"),
        ({"intra_node": {"nccl_tests_log": "slingshot.log"}}, "intra_node.ranks: missing"),
        ({"intra_node": "nvlink"}, "intra_node: not a mapping"),
        ({"device": ""}, "device: '' is not a non-empty string"),
    ],
)
def test_a_bad_cluster_file_is_one_line_naming_the_field(tmp_path, changes, field):
    path = cluster_file(tmp_path, **changes)
    assert_one_line_naming(field, path, tmp_path)


def test_predict_end_to_end_on_the_h100_tables_and_the_slingshot_log(tmp_path, capsys):
    out = tmp_path / "predicted.csv"
    cli.main(
        ["predict", "--results", str(results(tmp_path)), "--cluster", cluster_file(tmp_path)]
        + ["--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert "On gh200-slingshot, 32 devices at per-device batch 256 are predicted" in printed
    assert "extrapolated from one device and the cluster's nccl-tests log" in printed
    assert "not a plain ring over this link" in printed  # busbw 123 GB/s over 25 GB/s
    table = pd.read_csv(out)
    assert list(table["world_size"]) == [8, 32]
    assert (table["kind"] == "extrapolated").all()
    assert table["collective_basis"].iloc[0] == MEASURED  # 8 ranks: the log's own
    assert ((table["efficiency"] > 0.5) & (table["efficiency"] <= 1.0)).all()
    step = 256 / pd.read_csv(EVIDENCE / "tables" / "cells.csv")["img_s_mean"].iloc[0]
    assert (table["step_time_s"] > step).all()


def test_a_batch_the_results_lack_is_one_line(tmp_path):
    path = cluster_file(tmp_path, batch_per_device=32)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["predict", "--results", str(results(tmp_path)), "--cluster", path])
    assert str(exit_.value.code).startswith(f"dpscale: {path}: batch_per_device: ")


def test_a_strategy_that_declares_parameter_servers_is_refused_not_priced_as_a_ring(tmp_path):
    """torch-dp sums on device 0 (plan.traffic.ParameterServers): the log measured an
    all-reduce, so the command refuses it in one line rather than price a ring."""
    folder = results(tmp_path)
    for name in ("bucket_timeline.csv", "cells.csv"):
        table = pd.read_csv(folder / "tables" / name)
        table.assign(strategy="torch-dp").to_csv(folder / "tables" / name, index=False)
    path = cluster_file(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["predict", "--results", str(folder), "--cluster", path])
    message = str(exit_.value.code)
    assert message.startswith(f"dpscale: {path}: traffic: a measured all-reduce curve cannot ")
    assert "parameter servers" in message and "\n" not in message


def test_a_log_of_other_ranks_names_inter_node_ranks(tmp_path):
    inter = {"nccl_tests_log": "slingshot.log", "ranks": 16}
    path = cluster_file(tmp_path, inter_node=inter)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["predict", "--results", str(results(tmp_path)), "--cluster", path])
    message = str(exit_.value.code)
    assert message.startswith(f"dpscale: {path}: inter_node.ranks: ") and "lists 8 ranks" in message


def test_one_node_says_the_inter_node_log_stands_in():
    table = cp.predict(FOUR, DEVICE, cluster(SLOW, (1, 2)), GRADIENT, "test")
    assert table["collective_basis"].iloc[0].endswith(cp.ONE_NODE)
    assert cp.ONE_NODE not in table["collective_basis"].iloc[1]


def test_gradient_bytes_are_the_buckets_and_checked_against_the_parameters():
    tables = EVIDENCE / "tables"
    buckets, cells = pd.read_csv(tables / "bucket_timeline.csv"), pd.read_csv(tables / "cells.csv")
    total, words = cp.gradient_bytes(buckets, "torch-ddp", MODEL, cells)
    assert total == 4 * cells["trainable_params"].iloc[0] == 102_228_128
    assert words.endswith("(= trainable parameters x 4)")
    other = cells.assign(trainable_params=1000)
    assert "would be 4,000" in cp.gradient_bytes(buckets, "torch-ddp", MODEL, other)[1]


# -- the intra-node log (one node's own fabric) ------------------------------------------------

NVLINK_ALPHA, NVLINK_BETA = 1e-6, 200e9  # a fast fabric: 1 us a step, 200 GB/s


def nvlink_law(size: float, ranks: int) -> float:
    return ring.ring_allreduce_seconds(size, ranks, NVLINK_BETA, NVLINK_ALPHA)


def intra_curve(ranks: int = 4) -> CollectiveCurve:
    """The curve of a log inside one node of 4 devices that followed the fast law."""
    return CollectiveCurve.from_log(parse_all_reduce(nccl_log(nvlink_law, ranks), ranks), ranks)


def test_one_node_with_a_fast_intra_node_log_is_faster_and_names_it():
    """One bucket ready when the backward pass ends, at a size both logs list: the one-node
    step is compute + the intra-node log's own time, faster than with the inter-node log."""
    one = BucketTimeline(1 / 3, 0.002, 0.1 / 64, 0.0, np.array([1.0]), np.array([1.0]), (64,))
    size = 8 * 2**20
    rows = parse_all_reduce(nccl_log(nvlink_law, 4), 4).rows
    logged = {r.message_bytes: r.time_us * 1e-6 for r in rows}[size]
    alone = cp.predict(one, DEVICE, cluster(SLOW, (1, 2)), size, "test")
    shape = cp.Cluster("test", SLOW, 4, (1, 2), intra_curve(), "nvlink_1x4.log")
    given = cp.predict(one, DEVICE, shape, size, "test")
    row = given.iloc[0]
    assert row["nodes"] == 1 and row["step_time_s"] == pytest.approx(0.1 + logged, rel=1e-12)
    assert row["step_time_s"] < alone["step_time_s"].iloc[0]
    assert row["efficiency"] > alone["efficiency"].iloc[0]
    assert row["collective_basis"] == f"{MEASURED}; one node: intra-node log (nvlink_1x4.log)"
    assert cp.ONE_NODE not in row["collective_basis"] and row["kind"] == cp.KIND
    # two nodes: the inter-node log, as without the intra-node one
    pd.testing.assert_series_equal(given.iloc[1], alone.iloc[1])


def test_an_intra_node_log_at_fewer_ranks_is_extended_to_the_node_by_its_ring_law():
    shape = cp.Cluster("test", SLOW, 4, (1,), intra_curve(2), "nvlink_1x2.log")
    basis = cp.predict(FOUR, DEVICE, shape, GRADIENT, "test")["collective_basis"].iloc[0]
    assert "ring law at 4 ranks (log measured 2)" in basis
    assert basis.endswith("one node: intra-node log (nvlink_1x2.log)")


INTRA = {"nccl_tests_log": "nvlink.log", "ranks": 4}


def intra_file(tmp_path, **changes) -> str:
    """The GH200 cluster file with nodes 1 and 2 and a fast 4-rank intra-node log."""
    (tmp_path / "nvlink.log").write_text("\n".join(nccl_log(nvlink_law, 4)), encoding="utf-8")
    return cluster_file(tmp_path, **{"nodes": [1, 2], "intra_node": INTRA, **changes})


def test_an_intra_node_entry_reads(tmp_path):
    read = read_cluster(intra_file(tmp_path))
    assert read.intra.log == (tmp_path / "nvlink.log").resolve() and read.intra.ranks == 4
    assert read_cluster(cluster_file(tmp_path)).intra is None


@pytest.mark.parametrize(
    ("intra", "field"),
    [
        ({"nccl_tests_log": "nvlink.log"}, "intra_node.ranks: missing"),
        ({"nccl_tests_log": "nowhere.log", "ranks": 4}, "intra_node.nccl_tests_log: nowhere"),
        ({**INTRA, "rate": "fast"}, "intra_node.rate: 'fast' is not a rate"),
        ({**INTRA, "delay": "1us"}, "intra_node.delay: unknown key"),
        ({"nccl_tests_log": "nvlink.log", "ranks": 8}, "intra_node.ranks: 8 is more than"),
        ({"nccl_tests_log": "nvlink.log", "ranks": 1}, "intra_node.ranks: 1 is not an integer"),
        ("nvlink.log", "intra_node: not a mapping"),
    ],
)
def test_a_bad_intra_node_entry_is_one_line_naming_the_field(tmp_path, intra, field):
    path = intra_file(tmp_path, intra_node=intra)
    assert_one_line_naming(field, path, tmp_path)


def test_an_intra_node_log_on_nodes_of_one_device_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"intra_node: devices_per_node is 1; .*allowed"):
        read_cluster(intra_file(tmp_path, devices_per_node=1))


def test_an_intra_node_log_of_other_ranks_names_intra_node_ranks(tmp_path):
    path = intra_file(tmp_path, intra_node={"nccl_tests_log": "nvlink.log", "ranks": 2})
    with pytest.raises(SystemExit) as exit_:
        cli.main(["predict", "--results", str(results(tmp_path)), "--cluster", path])
    message = str(exit_.value.code)
    assert message.startswith(f"dpscale: {path}: intra_node.ranks: ") and "lists 4" in message


def test_a_speedup_and_its_range_are_shown_to_the_same_decimals():
    assert [cp.times(v) for v in (32.0, 31.94, 9.876, 1.0)] == ["32.0", "31.9", "9.88", "1.00"]


def test_an_intra_node_rate_checks_the_one_node_rows_algorithm(tmp_path):
    """With the fabric's nominal rate, the one-node row's algorithm is checked against it
    (the fast law's 200 GB/s is a ring at 1600 Gbit/s); without it, it is not checked."""
    from dpscale.steps.predict import answer

    tables = results(tmp_path) / "tables"
    cells = pd.read_csv(tables / "cells.csv")
    buckets = pd.read_csv(tables / "bucket_timeline.csv")

    def one_node_algorithm(intra: dict) -> str:
        cluster = read_cluster(intra_file(tmp_path, intra_node=intra))
        table = answer(cells, buckets, cluster, "results").table
        return table.loc[table["nodes"] == 1, "algorithm"].iloc[0]

    read = read_cluster(intra_file(tmp_path, intra_node={**INTRA, "rate": "1600gbit"}))
    assert read.intra.rate is not None
    assert one_node_algorithm({**INTRA, "rate": "1600gbit"}).endswith(
        "consistent with a ring over this link"
    )
    assert one_node_algorithm(INTRA).startswith("not checked")
