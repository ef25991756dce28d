"""Collectives mode: message sizes, skip rules, the alpha-beta fit, the tables, and a real
all-reduce cell (torch-ddp, 2 processes; one over an emulated link when root)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import MULTI_PROCESS, ONE_PROCESS, make_cell
from dpscale.analysis.laws import alpha_beta
from dpscale.analysis.laws.comm_fits import (
    COMM_FITS_COLUMNS,
    RANKS_COLUMNS,
    comm_fits_table,
    rank_count_table,
)
from dpscale.analysis.results.collectives import (
    REPLAY_COLUMNS,
    collectives_table,
    gradient_replay_table,
    link_rate_GB_s,
)
from dpscale.plan import ring
from dpscale.plan.cell import Collectives, ModelConfig
from dpscale.plan.errors import ConfigError
from dpscale.plan.matrix import expand
from dpscale.plan.result import make_result, validate_result
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES
from dpscale.runner.records import collectives_record, replay_record

SIZES = np.array([4 * 4**k for k in range(12)] + [44_726_568], dtype=float)


def ring_times(alpha, beta, ranks, rng, noise=0.05, repeats=3):
    sizes = np.repeat(SIZES, repeats)
    exact = np.array([ring.ring_allreduce_seconds(s, ranks, beta, alpha) for s in sizes])
    return sizes, exact * (1 + noise * rng.standard_normal(sizes.size))


@pytest.mark.parametrize(
    ("alpha", "beta", "ranks"),
    [(50e-6, 0.12e9, 2), (20e-6, 1.2e9, 4), (1e-3, 10e9, 2), (5e-6, 100e9, 8)],
)
def test_alpha_and_beta_are_recovered_from_noisy_ring_times(alpha, beta, ranks):
    sizes, seconds = ring_times(alpha, beta, ranks, np.random.default_rng(ranks))
    fit = alpha_beta.fit_alpha_beta(sizes, seconds, ranks)
    assert fit.alpha_s == pytest.approx(alpha, rel=0.1)
    assert fit.beta_bytes_s == pytest.approx(beta, rel=0.1)
    assert fit.alpha_lo <= alpha <= fit.alpha_hi
    assert fit.beta_lo_bytes_s <= beta <= fit.beta_hi_bytes_s
    assert fit.points == sizes.size


def test_latency_is_not_swamped_by_large_messages():
    """Only the smallest messages tell alpha; an unweighted fit would lose it in the noise
    of the largest (absolute errors of milliseconds against a latency of microseconds)."""
    rng = np.random.default_rng(0)
    sizes, seconds = ring_times(10e-6, 1e9, 2, rng, noise=0.1)
    fit = alpha_beta.fit_alpha_beta(sizes, seconds, 2)
    assert fit.alpha_s == pytest.approx(10e-6, rel=0.15)


def test_fit_keeps_alpha_and_beta_non_negative_and_needs_three_sizes():
    sizes = np.array([4.0, 4e3, 4e6])
    fit = alpha_beta.fit_alpha_beta(sizes, [1e-3, 1e-3, 1e-3], 2)  # flat: no bandwidth term seen
    assert fit.alpha_s >= 0 and fit.beta_bytes_s > 0
    with pytest.raises(ValueError, match="3 distinct message sizes"):
        alpha_beta.fit_alpha_beta([4, 8, 8], [1e-5, 1e-5, 1e-5], 2)
    with pytest.raises(ValueError, match="2 ranks"):
        alpha_beta.fit_alpha_beta(sizes, [1e-5, 1e-5, 1e-5], 1)


def test_bus_bandwidth_follows_nccl_tests():
    assert ring.algorithm_bandwidth(1e9, 2.0) == 0.5e9
    assert ring.bus_bandwidth(1.0, 2) == pytest.approx(1.0)
    assert ring.bus_bandwidth(1.0, 4) == pytest.approx(1.5)
    assert ring.bus_bandwidth(1.0, 8) == pytest.approx(1.75)
    assert ring.bus_bandwidth(1.0, 1) == 0.0
    # the ring model's time at bandwidth beta gives busbw = beta (latency left out)
    seconds = ring.ring_allreduce_seconds(1e8, 4, 2e9)
    assert ring.bus_bandwidth(ring.algorithm_bandwidth(1e8, seconds), 4) == pytest.approx(2e9)


def test_message_sizes_grow_by_the_factor_up_to_and_including_the_maximum():
    assert Collectives(4, 100, 4).message_sizes() == [4, 16, 64, 100]
    assert Collectives(4, 64, 4).message_sizes() == [4, 16, 64]
    assert Collectives(8, 8, 2).message_sizes() == [8]


def check(config):
    return plan_study(config, STRATEGIES)[0]


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"min_bytes": 6}, "collectives.min_bytes: 6 is not a multiple of 4"),
        ({"min_bytes": 0}, "collectives.min_bytes: 0 is less than the minimum of 4"),
        ({"factor": 1}, "collectives.factor: 1 is less than the minimum of 2"),
        ({"max_bytes": 10}, "collectives.max_bytes: 10 is not a multiple of 4"),
        ({"min_bytes": 64, "max_bytes": 16}, "collectives.max_bytes: min_bytes (64) must not"),
        ({"min_bytes": 4 * 10**9}, "collectives.min_bytes: min_bytes (4000000000) must not"),
        ({"sizes": [4]}, "collectives.sizes: unknown key; allowed keys: ['factor', "),
    ],
)
def test_bad_collectives_settings_are_one_line_naming_the_field(default_config, section, expected):
    default_config.update(modes=["collectives"], collectives=section)
    with pytest.raises(ConfigError) as error:
        check(default_config)
    assert str(error.value).startswith(expected)
    assert "\n" not in str(error.value)


def collective_cells(config):
    return [c for c in expand(check(config), STRATEGIES) if c.mode == "collectives"]


def test_one_cell_per_strategy_layout_and_network_with_the_gradient_as_largest_message(
    default_config,
):
    default_config.update(
        modes=["synthetic", "collectives"],
        nodes=[1, 2],
        networks=[{"name": "lan", "rate": "1gbit"}],
    )
    cells = collective_cells(default_config)
    layouts = {(c.strategy, c.nodes, c.devices_per_node, c.network.name) for c in cells}
    assert len(layouts) == len(cells) == 5 * 2 * 2
    ids = {c.cell_id for c in cells}
    assert len(ids) == len(cells)
    assert "torch-ddp/resnet18-imagenet64-c10/collectives-net-lan/n2-d1-b0-r0" in ids
    spec = ModelConfig(**default_config["models"][0]).spec()
    assert {c.collectives for c in cells} == {
        Collectives(4, ring.gradient_bytes(spec.trainable_params()), 4)
    }
    assert {c.measure.windows for c in cells} == {default_config["measure"]["windows"]}
    default_config["collectives"] = {"windows": 3}
    assert {c.measure.windows for c in collective_cells(default_config)} == {3}
    # the throughput cells are unchanged and distinct from the collectives cells
    synthetic = [c for c in expand(check(default_config), STRATEGIES) if c.mode == "synthetic"]
    assert not ids & {c.cell_id for c in synthetic}


def test_one_process_strategies_and_one_process_cells_are_skipped(default_config):
    default_config.update(modes=["collectives"], devices_per_node=[1, 2])
    reasons = {(c.strategy, c.world_size): c.skip_reason for c in collective_cells(default_config)}
    for name in ONE_PROCESS:
        assert "no inter-process all-reduce" in reasons[(name, 2)]
    for name in MULTI_PROCESS:
        assert reasons[(name, 1)] == "an all-reduce needs at least 2 processes; this cell has 1"
        assert reasons[(name, 2)] is None


def fake_result(cell, per_call_seconds, quality="ok"):
    """An ok collectives result whose ranks took ``per_call_seconds[size]`` per call."""
    calls = cell.measure.steps_per_window
    windows = {
        str(size): [seconds * calls * (1 + 0.01 * w) for w in range(3)]
        for size, seconds in per_call_seconds.items()
    }
    per_rank = [windows] * cell.world_size
    result = make_result(cell, "ok", started_at="2026-01-01T00:00:00+00:00", system={})
    result["system"] = {"host": "h", "cpu_model": "c", "python": "3.11"}
    result["framework"] = "torch"
    description = {"op": "all_reduce", "backend": "gloo"}
    result["collectives"] = collectives_record(cell, per_rank, description, [0.0, 1.0])
    result["quality"] = quality
    validate_result(result)
    return result


def test_tables_give_bandwidths_and_the_fit_per_layout():
    cell = make_cell(
        "torch-ddp", devices=2, batch=0, mode="collectives", collectives=Collectives(4, 4**10, 4)
    )
    alpha, beta = 40e-6, 0.5e9
    sizes = cell.collectives.message_sizes()
    seconds = {s: ring.ring_allreduce_seconds(s, 2, beta, alpha) for s in sizes}
    table = collectives_table([fake_result(cell, seconds)])
    assert list(table["message_bytes"]) == cell.collectives.message_sizes()
    largest = table.iloc[-1]
    assert largest["time_lo"] <= largest["time_s"] <= largest["time_hi"]
    assert largest["algbw_GB_s"] == pytest.approx(4**10 / largest["time_s"] / 1e9)
    assert largest["busbw_GB_s"] == pytest.approx(largest["algbw_GB_s"])  # 2 ranks: x 1
    fit = comm_fits_table(table)
    assert list(fit.columns) == COMM_FITS_COLUMNS
    row = fit.iloc[0]
    assert row["status"] == "ok"
    assert row["alpha_s"] == pytest.approx(alpha, rel=0.05)
    assert row["beta_GB_s"] == pytest.approx(beta / 1e9, rel=0.05)


def test_contaminated_cells_are_left_out_of_the_fit_with_the_reason():
    cell = make_cell(
        "torch-ddp", devices=2, batch=0, mode="collectives", collectives=Collectives(4, 4**6, 4)
    )
    seconds = {4**k: 1e-4 * k for k in range(1, 7)}  # 4 .. 4096 bytes
    table = collectives_table([fake_result(cell, seconds, quality="contaminated")])
    assert len(table) == 6
    row = comm_fits_table(table).iloc[0]
    assert row["status"] == "not fitted"
    assert "contaminated" in row["reason"]


def test_a_study_without_collectives_gets_empty_tables_with_headers(tmp_path):
    from dpscale.steps.tables import collectives

    files = ("c.csv", "f.csv", "f.html", "r.csv", "r.html", "g.csv", "g.html", "b.png")
    outputs = {n: tmp_path / n for n in files}
    names = ("table", "fits", "fits_html", "ranks", "ranks_html", "replay", "replay_html", "figure")
    named = dict(zip(names, outputs.values(), strict=True))
    collectives({"results": []}, named, {})
    assert list(pd.read_csv(outputs["f.csv"]).columns) == COMM_FITS_COLUMNS
    assert list(pd.read_csv(outputs["r.csv"]).columns) == RANKS_COLUMNS
    assert pd.read_csv(outputs["c.csv"]).empty
    assert "no collective cells" in outputs["f.html"].read_text()
    assert "two rank counts" in outputs["r.html"].read_text()
    assert list(pd.read_csv(outputs["g.csv"]).columns) == REPLAY_COLUMNS
    assert outputs["b.png"].stat().st_size > 0


def test_an_emulated_links_line_rate_is_in_gb_per_second_and_a_real_ones_unknown():
    assert link_rate_GB_s({"network": {"name": "10gbe", "rate": "10gbit"}}) == pytest.approx(1.25)
    assert link_rate_GB_s({"network": {"name": "slow", "rate": "100mbit"}}) == pytest.approx(0.0125)
    assert np.isnan(link_rate_GB_s({"network": {"name": "ib", "interface": "ib0"}}))
    assert np.isnan(link_rate_GB_s({}))


def _ring_rows(ranks: int, nodes: int, seconds_scale: float = 1.0) -> list[dict]:
    """Collectives rows of an exact ring (alpha 50 us, beta 1 GB/s) at ``ranks``, their
    times scaled by ``seconds_scale`` (a link slower than the law says)."""
    rows = []
    for size in [2**k for k in range(10, 27, 2)]:
        t = ring.ring_allreduce_seconds(size, ranks, 1e9, 50e-6) * seconds_scale
        rows.append(
            {
                "study": "s",
                "strategy": "torch-ddp",
                "framework": "torch",
                "network": "1gbit" if nodes > 1 else "host",
                "comm": "none",
                "nodes": nodes,
                "devices_per_node": ranks // nodes,
                "world_size": ranks,
                "source": "measured",
                "message_bytes": size,
                "time_s": t,
                "time_lo": t * 0.98,
                "time_hi": t * 1.02,
                "quality": "ok",
            }
        )
    return rows


def test_the_law_fitted_on_the_fewest_ranks_predicts_more_ranks_it_never_saw():
    table = pd.DataFrame(
        _ring_rows(2, 2)
        + _ring_rows(4, 4)
        + _ring_rows(8, 8, seconds_scale=1.25)
        + _ring_rows(2, 1)
        + _ring_rows(4, 1)
    )
    ranks = rank_count_table(table, comm_fits_table(table))
    assert list(ranks.columns) == RANKS_COLUMNS
    by = ranks.set_index(["placement", "predicted_ranks"])
    assert set(by.index) == {("one rank per node", 4), ("one rank per node", 8), ("one node", 4)}
    assert (ranks["fitted_on_ranks"] == 2).all() and (
        ranks["kind"] == "extrapolates in ranks"
    ).all()
    exact = by.loc[("one rank per node", 4)]
    assert exact["median_abs_relative_error"] < 1e-6
    assert exact["verdict"] == "within the measured interval"
    slow = by.loc[("one rank per node", 8)]  # measured 25% slower than the law: predicted -20%
    assert slow["median_abs_relative_error"] == pytest.approx(0.2, abs=1e-6)
    assert slow["worst_relative_error"] == pytest.approx(-0.2, abs=1e-6)
    assert slow["verdict"] == "under by 20%"


def test_contaminated_cells_are_neither_basis_nor_checked():
    rows = _ring_rows(2, 2) + _ring_rows(4, 4)
    for row in rows[-3:]:
        row["quality"] = "contaminated"
    table = pd.DataFrame(rows)
    checked = rank_count_table(table, comm_fits_table(table)).iloc[0]
    assert checked["sizes"] == len(rows) // 2 - 3


def replay_result(comm: dict, model: str, replay: dict) -> dict:
    """An ok torch-ddp collectives result, one node x 2, that replayed a step."""
    cell = {
        "study": "s",
        "strategy": "torch-ddp",
        "mode": "collectives",
        "nodes": 1,
        "devices_per_node": 2,
        "world_size": 2,
        "cell_id": "c",
        "comm": comm,
        "model": {"key": model},
    }
    return {
        "cell": cell,
        "status": "ok",
        "framework": "torch",
        "quality": "ok",
        "collectives": {"gradient_replay": replay},
    }


def test_a_replayed_step_is_one_row_with_its_bytes_and_time():
    replay = {
        "buckets": 2,
        "collectives_per_step": 6,
        "logical_bytes_per_step": 44_695_848,
        "wire_bytes_per_step": 329_040,
        "summary": {"mean": 0.0138, "ci95": 0.0067},
    }
    ok = replay_result({"name": "powersgd", "rank": 2}, "resnet18-imagenet64-c10", replay)
    failed = {**ok, "status": "failed"}
    before = {**ok, "collectives": {}}  # a result from before the replay
    table = gradient_replay_table([ok, failed, before])
    assert len(table) == 1
    row = table.iloc[0]
    assert row["comm"] == "powersgd-r2" and row["collectives_per_step"] == 3 * row["buckets"]
    assert row["wire_ratio"] == pytest.approx(135.84, abs=0.01)
    assert (row["step_s"], row["step_ci95"]) == (0.0138, 0.0067)
    assert row["model"] == "resnet18-imagenet64-c10"
    assert pd.isna(row["work_s"])  # no work timed: a result from before it was


def test_a_replay_carries_the_remedys_own_work_where_it_was_timed():
    replay = {
        "buckets": 2,
        "collectives_per_step": 2,
        "logical_bytes_per_step": 8,
        "wire_bytes_per_step": 4,
        "summary": {"mean": 0.01, "ci95": 0.001},
        "work_summary": {"mean": 0.004, "ci95": 0.0005},
    }
    row = gradient_replay_table([replay_result({"name": "fp16"}, "m", replay)]).iloc[0]
    assert (row["work_s"], row["work_ci95"]) == (0.004, 0.0005)


def test_the_remedys_own_work_is_the_slowest_ranks_per_step_and_absent_where_not_timed():
    cell = make_cell(
        "torch-ddp", devices=2, batch=0, mode="collectives", collectives=Collectives(4, 4**6, 4)
    )
    per_step = cell.measure.steps_per_window
    sends = {"buckets": 2, "collectives_per_step": 6}
    ranks = [
        {**sends, "windows": [1.0, 1.0], "work_windows": [0.2, 0.4]},
        {**sends, "windows": [1.0, 1.0], "work_windows": [0.3, 0.1]},
    ]
    record = replay_record(cell, ranks)
    assert record["work_step_seconds"] == pytest.approx([0.3 / per_step, 0.4 / per_step])
    assert record["work_summary"]["mean"] == pytest.approx(0.35 / per_step)
    assert "work_windows" not in record and record["buckets"] == 2
    plain = replay_record(
        cell, [{k: v for k, v in r.items() if k != "work_windows"} for r in ranks]
    )
    assert "work_step_seconds" not in plain and "work_summary" not in plain
