"""The loss breakdown (analysis.results.loss_breakdown): terms from control cells that add up
to the points lost, their intervals, what a missing control leaves unsplit, the largest term
and its ties, and the sentences and the landing line that say so."""

import math

import numpy as np
import pandas as pd
import pytest

from dpscale.analysis.answers.loss_words import breakdown_sentence, chosen_line
from dpscale.analysis.results.loss_breakdown import TERMS, delta_ci95, loss_breakdown

LAYOUT = {"strategy": "torch-ddp", "model": "resnet18-imagenet64-c10", "network": "host"}


def cell(mode, world, step, half=0.002, fastest=None, network="host", nodes=1, **extra):
    return {
        **LAYOUT,
        "network": network,
        "mode": mode,
        "nodes": nodes,
        "devices_per_node": world // nodes,
        "world_size": world,
        "batch_per_device": 16,
        "comm": "none",
        "status": "ok",
        "quality": "ok",
        "time_shared": False,
        "disturbed": False,
        "step_time_s_mean": step,
        "step_time_s_ci95": half,
        "fastest_rank_step_s_mean": step if fastest is None else fastest,
        "fastest_rank_step_s_ci95": half,
        **extra,
    }


def cells(*rows):
    return pd.DataFrame(list(rows))


ONE, LOCAL, BARRIER, FULL = 0.100, 0.110, 0.115, 0.140


ONE_LOCAL = 0.098


def full_set():
    return cells(
        cell("synthetic", 1, ONE),
        cell("control-local", 1, ONE_LOCAL),
        cell("control-local", 2, 0.130, fastest=LOCAL),  # its slowest rank: not the term
        cell("control-barrier", 2, BARRIER),
        cell("synthetic", 2, FULL),
    )


def test_terms_are_differences_of_the_controls_and_add_up_to_the_points_lost():
    row = loss_breakdown(full_set()).iloc[0]
    assert row["contention_s"] == pytest.approx(LOCAL - ONE_LOCAL)
    assert row["waiting_s"] == pytest.approx(BARRIER - LOCAL)
    assert row["exposed_comm_s"] == pytest.approx(FULL - BARRIER - (ONE - ONE_LOCAL))
    assert row["left_s"] == 0 and math.isnan(row["input_pipeline_s"])
    assert row["efficiency"] == pytest.approx(ONE / FULL)
    points = sum(row[f"{t}_points"] for t in TERMS if not math.isnan(row[f"{t}_points"]))
    assert points == pytest.approx(row["lost_points"])
    assert row["largest_term"] == "exposed_comm"


def test_without_one_devices_local_contention_and_exchange_stay_together():
    """One device's own exchange unknown: it would sit in contention (one sign) and in the
    exposed exchange (the other), so neither is split; waiting still is."""
    row = loss_breakdown(full_set().query("not (mode == 'control-local' and world_size == 1)"))
    row = row.iloc[0]
    assert math.isnan(row["contention_s"]) and math.isnan(row["exposed_comm_s"])
    assert row["waiting_s"] == pytest.approx(BARRIER - LOCAL)
    assert row["left_s"] == pytest.approx((LOCAL - ONE) + (FULL - BARRIER))
    assert row["controls_run"] == "local,barrier"


def test_every_control_ran_is_named():
    assert loss_breakdown(full_set()).iloc[0]["controls_run"] == "one_local,local,barrier"


def test_a_missing_control_leaves_its_neighbours_unsplit():
    no_barrier = full_set().query("mode != 'control-barrier'")
    row = loss_breakdown(no_barrier).iloc[0]
    assert math.isnan(row["waiting_s"]) and math.isnan(row["exposed_comm_s"])
    assert row["left_s"] == pytest.approx(FULL - LOCAL - (ONE - ONE_LOCAL))
    assert row["controls_run"] == "one_local,local"
    assert "not split by the controls that ran" in breakdown_sentence(row)
    local_only = full_set().query("mode != 'control-barrier' and mode != 'control-local'")
    assert loss_breakdown(local_only).empty  # nothing splits it: the scaling table's alone


def test_folder_cells_add_the_input_pipeline_beyond_one_devices():
    table = pd.concat(
        [full_set(), cells(cell("folder", 1, ONE + 0.010), cell("folder", 2, FULL + 0.030))]
    )
    rows = loss_breakdown(table).set_index("mode")
    assert rows.loc["folder", "input_pipeline_s"] == pytest.approx(0.030 - 0.010)
    assert rows.loc["folder", "efficiency"] == pytest.approx((ONE + 0.010) / (FULL + 0.030))
    total = (
        sum(rows.loc["folder", f"{t}_points"] for t in TERMS if t != "left")
        + rows.loc["folder", "left_points"]
    )
    assert total == pytest.approx(rows.loc["folder", "lost_points"])
    assert math.isnan(rows.loc["synthetic", "input_pipeline_points"])


def test_intervals_cover_the_truth_about_95_percent_of_the_time():
    """Steps drawn around known means with their half-widths: the exposed term's interval
    holds its true value in 90-99% of 400 draws."""
    rng = np.random.default_rng(1)
    true = 100 * ((FULL - BARRIER) - (ONE - ONE_LOCAL)) / FULL
    half, hits = 0.003, 0
    for _ in range(400):
        draw = {
            k: v + rng.normal(0, half / 1.96)
            for k, v in {
                "one": ONE,
                "one_local": ONE_LOCAL,
                "local": LOCAL,
                "barrier": BARRIER,
                "full": FULL,
            }.items()
        }
        row = loss_breakdown(
            cells(
                cell("synthetic", 1, draw["one"], half),
                cell("control-local", 1, draw["one_local"], half),
                cell("control-local", 2, draw["local"], half, fastest=draw["local"]),
                cell("control-barrier", 2, draw["barrier"], half),
                cell("synthetic", 2, draw["full"], half),
            )
        ).iloc[0]
        low = row["exposed_comm_points"] - row["exposed_comm_points_ci95"]
        high = row["exposed_comm_points"] + row["exposed_comm_points_ci95"]
        hits += low <= true <= high
    assert 0.90 <= hits / 400 <= 0.99


def test_delta_method_of_a_difference_is_the_root_sum_of_squares():
    half = delta_ci95(lambda v: v["a"] - v["b"], {"a": 2.0, "b": 1.0}, {"a": 0.3, "b": 0.4})
    assert half == pytest.approx(0.5)


def test_overlapping_terms_are_named_a_tie_and_a_term_reaching_zero_is_unresolved():
    table = cells(
        cell("synthetic", 1, ONE, 0.01),
        cell("control-local", 1, ONE, 0.01),
        cell("control-local", 2, 0.14, 0.01, fastest=0.12),
        cell("control-barrier", 2, 0.121, 0.01),
        cell("synthetic", 2, 0.143, 0.01),
    )
    row = loss_breakdown(table).iloc[0]
    assert row["largest_term"] == "exposed_comm" and "contention" in row["largest_tied_with"]
    sentence = breakdown_sentence(row)
    assert "a tie" in sentence and "not resolved from zero" in sentence


def test_disturbed_cells_stay_out_but_time_shared_ones_count_as_contention():
    table = full_set()
    local = (table["mode"] == "control-local") & (table["world_size"] == 2)
    table.loc[local, ["quality", "disturbed"]] = ["contaminated", True]
    assert math.isnan(loss_breakdown(table).iloc[0]["waiting_s"])  # local out: not split
    table = full_set()
    local = (table["mode"] == "control-local") & (table["world_size"] == 2)
    table.loc[local, ["quality", "time_shared"]] = ["contaminated", True]
    row = loss_breakdown(table).iloc[0]
    assert row["contention_s"] == pytest.approx(LOCAL - ONE_LOCAL) and row["time_shared"]


def test_the_landing_line_names_the_chosen_layouts_largest_term():
    breakdown = loss_breakdown(full_set())
    chosen = {**LAYOUT, "nodes": 1, "devices_per_node": 2, "world_size": 2}
    line = chosen_line(breakdown, chosen)
    assert "the largest is exchange not hidden by compute" in line
    assert chosen_line(breakdown, {**chosen, "strategy": "horovod-tf"}) is None


def test_the_sentences_read_the_table_as_written_to_csv(tmp_path):
    path = tmp_path / "loss_breakdown.csv"
    loss_breakdown(full_set()).to_csv(path, index=False)
    row = pd.read_csv(path).iloc[0]
    assert "the largest is exchange not hidden by compute" in breakdown_sentence(row)
