"""Remedies in the communication model (analysis.laws.commmodel.remedy_fit): the encode time and
the overlap recovered from synthetic remedy cells, held-out predictions that hold out, and
predictions in which fewer bytes make distribution pay sooner."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_commmodel import PARAMS, TRUE, analyse, synthetic_windows

from dpscale.analysis.laws import commmodel
from dpscale.analysis.laws.commmodel import remedy_fit
from dpscale.plan.link import predicted_links
from helpers.window_rows import window_row

ENCODE = 0.05  # s per step
REMEDY_LAYOUTS = [(2, 1, "slow"), (2, 1, "fast"), (4, 1, "slow")]


def true_remedy_step(nodes, network, batch, ratio, encode, g) -> float:
    world = nodes
    rate = {"slow": 1e9 / 8 * TRUE["eta"], "fast": 1e10 / 8 * TRUE["eta"]}[network]
    compute = (1 + TRUE["sigma"] * (world - 1)) * batch / TRUE["v0"] + TRUE["t_c1"] + encode
    hops = 2 * (world - 1)
    net = hops / world * 4 * PARAMS / ratio / rate + hops * TRUE["alpha0"]
    return float(commmodel.combine(np.array([compute]), np.array([net]), g)[0])


def remedy_windows(comm: str, ratio: float, g: float) -> pd.DataFrame:
    rows = []
    for nodes, devices, network in REMEDY_LAYOUTS:
        for batch in (2, 8, 32):
            step = true_remedy_step(nodes, network, batch, ratio, ENCODE, g)
            rows.append(window_row(nodes, devices, network, batch, step, comm=comm))
    return pd.DataFrame(rows)


def cells_with(comm: str, ratio: float) -> pd.DataFrame:
    return pd.DataFrame(
        [{"strategy": "torch-ddp", "comm": comm, "status": "ok", "wire_ratio": ratio}]
    )


@pytest.mark.parametrize(("comm", "ratio", "g"), [("fp16", 2.0, 1.0), ("delayed", 1.0, math.inf)])
def test_the_encode_time_and_overlap_are_recovered(comm, ratio, g):
    groups, *_ = analyse(synthetic_windows(1.0))
    windows = remedy_windows(comm, ratio, g)
    fitted, table, validation = remedy_fit.fit_remedies(
        groups, windows, cells_with(comm, ratio), {"m": PARAMS}
    )
    row = table.iloc[0]
    assert row["status"] == "ok" and row["wire_ratio"] == ratio
    assert row["encode_s"] == pytest.approx(ENCODE, rel=1e-3)
    assert row["loo_median_abs_relative_error"] < 1e-3  # the truth is in the model
    # left out with no work measured, the remedy is predicted from its bytes alone: off by
    # the encode time
    assert row["left_out_median_abs_relative_error"] > 1e-3
    assert set(validation["scheme"]) == {"leave one cell out", "remedy left out"}


@pytest.mark.parametrize(("comm", "ratio", "g"), [("fp16", 2.0, 1.0), ("delayed", 1.0, math.inf)])
def test_left_out_the_remedy_is_predicted_from_its_work_measured_alone(comm, ratio, g):
    groups, *_ = analyse(synthetic_windows(1.0))
    replay = pd.DataFrame(
        [
            {"strategy": "torch-ddp", "model": "m", "comm": comm, "work_s": work}
            for work in (ENCODE * 0.9, ENCODE, ENCODE * 1.1)  # three cells: the median is taken
        ]
    )
    _, table, validation = remedy_fit.fit_remedies(
        groups, remedy_windows(comm, ratio, g), cells_with(comm, ratio), {"m": PARAMS}, replay
    )
    row = table.iloc[0]
    assert row["work_s"] == pytest.approx(ENCODE)
    # nothing fitted on the remedy's cells, and yet the truth: bytes and measured work
    assert row["left_out_median_abs_relative_error"] < 1e-3
    other = replay.assign(comm="bf16")  # another remedy's work is not this one's
    _, table, _ = remedy_fit.fit_remedies(
        groups, remedy_windows(comm, ratio, g), cells_with(comm, ratio), {"m": PARAMS}, other
    )
    assert math.isnan(table.iloc[0]["work_s"])
    assert table.iloc[0]["left_out_median_abs_relative_error"] > 1e-3


def test_a_held_out_remedy_cell_does_not_inform_its_own_prediction():
    groups, *_ = analyse(synthetic_windows(1.0))
    windows = remedy_windows("fp16", 2.0, 1.0)
    windows.loc[0, "step_time_s"] *= 3  # one wild cell
    _, _, validation = remedy_fit.fit_remedies(
        groups, windows, cells_with("fp16", 2.0), {"m": PARAMS}
    )
    held = validation[validation["scheme"] == "leave one cell out"].set_index(
        ["nodes", "network", "batch_per_device"]
    )
    # fitted on the eight clean cells, the prediction is the truth: a third of the wild one
    assert held.loc[(2, "slow", 2), "relative_error"] == pytest.approx(1 / 3 - 1, rel=1e-3)


def test_fewer_bytes_make_distribution_pay_from_a_smaller_batch():
    groups, *_ = analyse(synthetic_windows(1.0))
    fitted, table, _ = remedy_fit.fit_remedies(
        groups, remedy_windows("fp16", 2.0, 1.0), cells_with("fp16", 2.0), {"m": PARAMS}
    )
    predict = {"networks": [{"name": "eth", "bandwidth": "1gbit"}], "nodes": [2]}
    predict["networks"] = predicted_links(predict)
    table_ = remedy_fit.remedy_predictions(fitted, predict, [1], [8, 64])
    eth = table_[table_["network"] == "eth"]
    assert not eth.empty
    assert (eth["break_even_global_batch"] < eth["break_even_none"]).all()
    assert (eth["speedup"] > eth["speedup_none"]).all()
    lines = remedy_fit.remedy_lines(table_, table)
    assert any("with fp16 from" in line and "over eth" in line for line in lines)


def test_a_remedy_without_a_recorded_ratio_is_not_fitted_and_says_why():
    groups, *_ = analyse(synthetic_windows(1.0))
    _, table, _ = remedy_fit.fit_remedies(
        groups, remedy_windows("fp16", 2.0, 1.0), pd.DataFrame(), {"m": PARAMS}
    )
    assert table.iloc[0]["status"] == "not fitted"
    assert "wire_ratio" in table.iloc[0]["reason"]


def test_what_the_model_reads_of_a_remedy_is_its_declaration():
    """Hidden and collectives per bucket come from plan.remedies (delayed and delayed-fp16
    hide; PowerSGD sends three collectives per bucket); an undeclared key is an error."""
    groups, *_ = analyse(synthetic_windows(1.0))
    for comm, hidden in (("delayed-fp16", True), ("fp16", False)):
        fitted, table, _ = remedy_fit.fit_remedies(
            groups, remedy_windows(comm, 2.0, 1.0), cells_with(comm, 2.0), {"m": PARAMS}
        )
        assert [terms.hidden for _, terms in fitted] == [hidden], comm
        assert (table["overlap"] == "hidden (max)").all() == hidden
    with pytest.raises(ValueError, match="names no declared remedy"):
        remedy_fit.fit_remedies(
            groups, remedy_windows("zip", 2.0, 1.0), cells_with("zip", 2.0), {"m": PARAMS}
        )
    with pytest.raises(ValueError, match="names no declared remedy"):
        remedy_fit.RemedyTerms("zip-r2", 2.0, False)
