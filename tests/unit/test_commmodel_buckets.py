"""The bucket form (dpscale.analysis.laws.commmodel.buckets): a known truth simulated bucket by
bucket is recovered from 1- and 2-rank cells, and predicts rank counts and a remedy the fit
never saw."""

from __future__ import annotations

import copy
import functools
import math

import numpy as np
import pandas as pd
import pytest

from dpscale.analysis.laws import commmodel
from dpscale.analysis.laws.commmodel import buckets
from dpscale.analysis.laws.commmodel.fitting import choose_parameters
from dpscale.analysis.laws.commmodel.inputs import observations
from dpscale.analysis.laws.commmodel.remedy_fit import RemedyTerms, remedy_step_seconds
from dpscale.plan.model_inputs import configured_links
from dpscale.plan.traffic import RingAllReduce
from dpscale.render import commmodel_plots
from helpers.window_rows import window_row

PARAMS = 11_000_000
MESSAGE = 4 * PARAMS
NETWORKS = configured_links([{"name": "slow", "rate": "1gbit"}, {"name": "fast", "rate": "10gbit"}])
HOST_BETA = 5e8  # the one-node collectives' bandwidth: the fast link's ceiling
TRUE = {"v0": 40.0, "t_c1": 0.02, "sigma": 0.15, "alpha0": 0.002, "kappa": 2.0}  # s per GB
OPTIMIZER_S = 0.015  # of t_c1: forward + backward = b / v0 + 0.005
FORWARD_SHARE = 1 / 3
READY = [0.3, 0.7, 1.0]
SHARE = [0.2, 0.5, 0.3]
BATCHES = [2, 4, 8, 16, 32]
FITTED = [(1, 1, "host"), (1, 2, "host"), (2, 1, "slow"), (2, 1, "fast")]
MORE_RANKS = [(4, 1, "slow"), (8, 1, "slow"), (4, 1, "fast"), (8, 1, "fast")]


def true_step(
    nodes: int, devices: int, network: str, batch: float, ratio: float = 1.0, collectives: int = 1
) -> float:
    """The mechanism written out bucket by bucket, independently of the module."""
    world = nodes * devices
    colocated = world if network != "host" else devices
    compute = (1 + TRUE["sigma"] * (colocated - 1)) * batch / TRUE["v0"] + TRUE["t_c1"]
    if world == 1:
        return compute
    rate = {"slow": 1e9 / 8, "fast": 1e10 / 8, "host": HOST_BETA}[network]
    beta = min(rate, HOST_BETA)
    fb = batch / TRUE["v0"] + 0.005
    optimizer = compute * OPTIMIZER_S / (OPTIMIZER_S + fb)
    forward = (compute - optimizer) * FORWARD_SHARE
    costs = [
        collectives * 2 * (world - 1) * TRUE["alpha0"]
        + 2 * (world - 1) / world * share * MESSAGE / ratio / beta
        for share in SHARE
    ]
    sent_gb = 2 * (world - 1) / world * MESSAGE / ratio / 1e9
    backward = compute - optimizer - forward + TRUE["kappa"] * sent_gb * (colocated > 1)
    end = forward
    for ready, cost in zip(READY, costs, strict=True):
        end = max(forward + ready * backward, end) + cost
    return max(forward + backward, end) + optimizer


def windows(layouts: list[tuple[int, int, str]]) -> pd.DataFrame:
    rows = [
        window_row(nodes, devices, network, batch, true_step(nodes, devices, network, batch))
        for nodes, devices, network in layouts
        for batch in BATCHES
    ]
    return pd.DataFrame(rows)


def timeline_table() -> pd.DataFrame:
    """What one rank records at two batch sizes (bucket_timeline.csv's columns)."""
    rows = []
    for batch in (8, 32):
        fb = batch / TRUE["v0"] + 0.005
        forward, backward = fb * FORWARD_SHARE, fb * (1 - FORWARD_SHARE)
        for index, (ready, share) in enumerate(zip(READY, SHARE, strict=True)):
            rows.append(
                {
                    "cell_id": f"one-b{batch}",
                    "strategy": "torch-ddp",
                    "model": "m",
                    "world_size": 1,
                    "comm": "none",
                    "batch_per_device": batch,
                    "forward_s": forward,
                    "backward_s": backward,
                    "optimizer_s": OPTIMIZER_S,
                    "bucket": index,
                    "bucket_bytes": share * MESSAGE,
                    "ready_s": ready * backward,
                }
            )
    return pd.DataFrame(rows)


def comm_fits() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "strategy": "torch-ddp",
                "network": "host",
                "nodes": 1,
                "world_size": 2,
                "status": "ok",
                "beta_GB_s": HOST_BETA / 1e9,
                "alpha_s": 0.0,
            }
        ]
    )


def test_a_timeline_is_read_as_shares_of_the_step():
    timeline = buckets.timelines(timeline_table())[("torch-ddp", "m")]
    assert timeline.forward_share == pytest.approx(FORWARD_SHARE)
    assert timeline.optimizer_s == pytest.approx(OPTIMIZER_S)
    assert timeline.fb_slope == pytest.approx(1 / TRUE["v0"])
    assert timeline.fb_intercept == pytest.approx(0.005)
    assert timeline.ready == pytest.approx(READY)
    assert timeline.share == pytest.approx(SHARE)


def test_without_a_timeline_the_bucket_form_is_not_fitted_and_says_why():
    groups, *_ = commmodel.analyse(
        windows(FITTED),
        {"m": PARAMS},
        NETWORKS,
        {"torch-ddp": RingAllReduce()},
        comm_fits(),
        forms=("additive", "buckets"),
    )
    assert "buckets" not in groups[0].fits and "additive" in groups[0].fits


@functools.cache
def fitted_group():
    """The one fit every test below reads (about 10 s of optimising): callers must not
    change what it returns."""
    groups, parameters, validation, _ = commmodel.analyse(
        windows(FITTED + MORE_RANKS),
        {"m": PARAMS},
        NETWORKS,
        {"torch-ddp": RingAllReduce()},
        comm_fits(),
        timeline_table=timeline_table(),
    )
    return groups[0], parameters, validation


def test_the_truth_is_recovered_from_the_buckets():
    group, parameters, _ = fitted_group()
    values = group.fits["buckets"].values
    for name in ("v0", "t_c1", "sigma", "alpha0", "kappa"):
        assert values[name] == pytest.approx(TRUE[name], rel=1e-3), name
    chosen = parameters[(parameters["overlap"] == "buckets") & (parameters["parameter"] == "kappa")]
    assert bool(chosen["fitted"].iloc[0])


def test_rank_counts_the_fit_never_saw_are_predicted():
    _, _, validation = fitted_group()
    rows = validation[
        (validation["overlap"] == "buckets")
        & (validation["scheme"] == commmodel.FEWEST_RANKS)
        & (validation["status"] == "ok")
    ]
    assert set(rows["world_size"]) == {4, 8}
    assert rows["relative_error"].abs().max() < 0.01
    additive = validation[
        (validation["overlap"] == "additive") & (validation["scheme"] == commmodel.FEWEST_RANKS)
    ]
    assert additive["relative_error"].abs().median() > rows["relative_error"].abs().median()


def bucket_design(layouts: list[tuple[int, int, str]]):
    """The fitted bucket form, windows over ``layouts`` and their design rows."""
    group, _, _ = fitted_group()
    fit = group.fits["buckets"]
    frame = windows(layouts)
    frame["gradient_bytes"] = MESSAGE
    return fit, frame, fit.design(frame, emulation=True)


def test_a_remedy_the_fit_never_saw_is_predicted_from_its_bytes_and_collectives():
    fit, frame, rows = bucket_design([(2, 1, "slow"), (4, 1, "slow")])
    remedy = RemedyTerms("powersgd-r2", 20.0, False, 0.0)
    predicted = remedy_step_seconds(fit.values, rows, remedy)
    truth = [
        true_step(n, d, net, b, ratio=20.0, collectives=3)
        for n, d, net, b in zip(
            frame["nodes"],
            frame["devices_per_node"],
            frame["network"],
            frame["batch_per_device"],
            strict=True,
        )
    ]
    assert predicted == pytest.approx(truth, rel=1e-3)
    assert not np.allclose(truth, frame["step_time_s"])  # the remedy does change the steps


def test_a_delayed_all_reduce_hides_behind_the_next_step():
    fit, frame, rows = bucket_design([(2, 1, "slow")])
    hidden = remedy_step_seconds(fit.values, rows, RemedyTerms("delayed", 1.0, True, 0.0))
    shown = remedy_step_seconds(fit.values, rows, RemedyTerms("none", 1.0, False, 0.0))
    assert (hidden <= shown + 1e-12).all() and (hidden < shown).any()
    wire = 2 * 1 / 2 * MESSAGE / (1e9 / 8)
    assert (hidden >= wire).all() and math.isfinite(hidden.sum())


def test_a_remedys_own_work_delays_the_backward_pass_instead_of_hiding_behind_it():
    fit, frame, rows = bucket_design([(2, 1, "fast")])
    # compressed 1000x, the traffic hides behind backward: the work is all that is left
    sent = RemedyTerms("powersgd-r2", 1000.0, False, 0.0)
    work = 0.04
    without = remedy_step_seconds(fit.values, rows, sent)
    with_work = remedy_step_seconds(
        fit.values, rows, RemedyTerms("powersgd-r2", 1000.0, False, work)
    )
    assert with_work - without == pytest.approx(np.full(len(frame), work), rel=1e-6)


def test_the_throughput_figure_curves_follow_the_bucket_form():
    group = copy.copy(fitted_group()[0])
    group.chosen = "buckets"
    curves = commmodel.model_curves(group, np.array([2.0, 8.0, 32.0]))
    assert np.isfinite(curves["img_s"]).all() and (curves["img_s"] > 0).all()
    eight = (curves["nodes"] == 8) & (curves["network"] == "slow")
    measured = curves[eight & (curves["batch_per_device"] == 8.0)]
    truth = 8 * 8 / true_step(8, 1, "slow", 8.0)
    assert measured["img_s"].iloc[0] == pytest.approx(truth, rel=1e-3)


def test_the_throughput_figure_shades_the_batches_no_cell_measured_as_extrapolated(
    tmp_path, monkeypatch
):
    group = copy.copy(fitted_group()[0])
    kept = []
    monkeypatch.setattr(commmodel_plots.plt, "close", kept.append)
    measured = windows(FITTED)
    measured["img_s"] = (
        measured["world_size"] * measured["batch_per_device"] / measured["step_time_s"]
    )
    commmodel_plots.throughput_figure(measured, [group], tmp_path / "t.png")
    for axis in kept[0].axes:
        labels = [text.get_text() for text in axis.get_legend().get_texts()]
        assert commmodel_plots.MODEL_EXTRAPOLATED in labels
        assert "shaded: not measured" in axis.get_xlabel()
    commmodel_plots.plt.close(kept[0])


def test_an_extra_latency_per_hop_is_fitted_only_where_an_all_reduce_outlasts_a_step():
    # where every all-reduce hides behind backward, the latency and kappa trade places
    timeline = buckets.timelines(timeline_table())[("torch-ddp", "m")]
    links = commmodel.links_from_config(NETWORKS, comm_fits(), "torch-ddp")

    def fitted(layouts: list[tuple[int, int, str]]) -> list[str]:
        obs = observations(windows(layouts), {"m": PARAMS})
        obs = obs[obs["batch_per_device"] >= 8]  # steps of 0.22 s and more
        return choose_parameters(obs, links, "buckets", timeline, RingAllReduce()).names

    fast_only = [(1, 1, "host"), (1, 2, "host"), (2, 1, "fast")]  # all-reduces 0.04-0.09 s
    assert "alpha0" not in fitted(fast_only) and "kappa" in fitted(fast_only)
    assert "alpha0" in fitted(fast_only + [(2, 1, "slow")])  # 0.35 s: longer than a step
