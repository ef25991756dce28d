"""The communication model (dpscale.analysis.laws.commmodel): parameters recovered from synthetic
measurements, held-out predictions that really hold out, physics-respecting predictions,
config errors."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from dpscale.analysis.laws import commmodel
from dpscale.analysis.laws.commmodel import prediction
from dpscale.plan.errors import ConfigError
from dpscale.plan.link import predicted_links
from dpscale.plan.model_inputs import configured_links, model_inputs
from dpscale.plan.study import plan_study
from dpscale.plan.traffic import RingAllReduce
from dpscale.plan.units import parse_quantity
from dpscale.registry import STRATEGIES
from helpers.window_rows import window_row

PARAMS = 11_000_000  # trainable parameters: 44 MB of fp32 gradients
CONFIG_NETWORKS = [{"name": "slow", "rate": "1gbit"}, {"name": "fast", "rate": "10gbit"}]
NETWORKS = configured_links(CONFIG_NETWORKS)
TRUE = {"v0": 40.0, "t_c1": 0.02, "sigma": 0.15, "alpha0": 0.004, "eta": 0.6, "host": 5e8}
LAYOUTS = [(1, 1, "host"), (1, 2, "host"), (2, 1, "slow"), (2, 1, "fast"), (4, 1, "slow")]
BATCHES = [1, 2, 4, 8, 16, 32]


def true_step(nodes: int, devices: int, network: str, batch: float, g: float) -> float:
    world = nodes * devices
    rate = {"slow": 1e9 / 8 * TRUE["eta"], "fast": 1e10 / 8 * TRUE["eta"], "host": TRUE["host"]}
    colocated = world if network != "host" else devices  # emulated nodes share the machine
    compute = (1 + TRUE["sigma"] * (colocated - 1)) * batch / TRUE["v0"] + TRUE["t_c1"]
    if world == 1:
        return compute
    hops = 2 * (world - 1)
    net = hops / world * 4 * PARAMS / rate[network] + hops * TRUE["alpha0"]
    return float(commmodel.combine(np.array([compute]), np.array([net]), g)[0])


def synthetic_windows(g: float, noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    return windows_of(lambda n, d, net, b: true_step(n, d, net, b, g), noise=noise, seed=seed)


def windows_of(
    step_of: Callable[[int, int, str, int], float],
    strategy: str = "torch-ddp",
    noise: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """Three windows of every layout and batch, each ``step_of(nodes, devices, network,
    batch)`` seconds with log-normal ``noise``."""
    random = np.random.default_rng(seed)
    rows = []
    for nodes, devices, network in LAYOUTS:
        for batch in BATCHES:
            step = step_of(nodes, devices, network, batch)
            for window in range(3):
                noisy = step * math.exp(noise * random.standard_normal())
                rows.append(window_row(nodes, devices, network, batch, noisy, window, strategy))
    return pd.DataFrame(rows)


# the synthetic measurements' strategy, priced as its adapter declares
TRAFFIC = {"torch-ddp": RingAllReduce()}


def analyse(
    windows: pd.DataFrame, networks=NETWORKS, comm_fits=None, forms=("additive",), validate=True
):
    """The model of the synthetic measurements (one overlap form unless asked: fast)."""
    return commmodel.analyse(windows, {"m": PARAMS}, networks, TRAFFIC, comm_fits, forms, validate)


def value(parameters: pd.DataFrame, overlap: str, name: str) -> float:
    row = parameters[(parameters["overlap"] == overlap) & (parameters["parameter"] == name)]
    return float(row["value"].iloc[0])


@pytest.mark.parametrize(("g", "form"), [(1.0, "additive"), (math.inf, "max"), (3.0, "pollux")])
def test_parameters_are_recovered_from_synthetic_measurements(g, form):
    groups, parameters, validation, summary = analyse(synthetic_windows(g), forms=commmodel.FORMS)
    assert groups[0].chosen == form
    for name in ("v0", "t_c1", "sigma", "alpha0", "eta"):
        assert value(parameters, form, name) == pytest.approx(TRUE[name], rel=1e-3), name
    assert value(parameters, form, "beta_intra-node") == pytest.approx(TRUE["host"] / 1e9, rel=1e-3)
    if form == "pollux":
        assert value(parameters, form, "g") == pytest.approx(g, rel=1e-3)
    chosen = summary[summary["chosen"]].set_index("scheme")
    assert chosen.loc["leave one cell out", "median_abs_relative_error"] < 1e-3
    # without the fast network, the slow one (N = 2 and 4) still separates alpha0 from eta
    held = validation[validation["chosen"] & (validation["scheme"] == "leave one network out")]
    fast = held[held["network"] == "fast"]
    assert len(fast) == len(BATCHES) and (fast["relative_error"].abs() < 1e-3).all()


def test_noisy_measurements_give_intervals_that_cover_the_truth():
    _, parameters, _, _ = analyse(synthetic_windows(1.0, noise=0.02, seed=3))
    chosen = parameters[parameters["chosen"] & parameters["fitted"]]
    for name in ("v0", "t_c1", "eta"):
        row = chosen[chosen["parameter"] == name].iloc[0]
        assert row["lo"] < TRUE[name] < row["hi"], (name, row["lo"], row["hi"])
        assert row["lo"] < row["value"] < row["hi"]


def test_a_held_out_cell_does_not_inform_its_own_prediction():
    windows = synthetic_windows(1.0, noise=0.01, seed=1)
    target = (
        (windows["nodes"] == 2)
        & (windows["network"] == "slow")
        & (windows["batch_per_device"] == 16)
    )
    changed = windows.copy()
    changed.loc[target, "step_time_s"] *= 3.0
    before = analyse(windows)[2]
    after = analyse(changed)[2]

    def held_out(table: pd.DataFrame, scheme: str) -> pd.Series:
        rows = table[
            (table["scheme"] == scheme)
            & (table["overlap"] == "additive")
            & (table["nodes"] == 2)
            & (table["network"] == "slow")
            & (table["batch_per_device"] == 16)
        ]
        assert len(rows) == 1
        return rows.iloc[0]

    for scheme in ("leave one cell out", "leave one network out"):
        old, new = held_out(before, scheme), held_out(after, scheme)
        assert new["measured"] == pytest.approx(3 * old["measured"])
        assert new["predicted"] == pytest.approx(old["predicted"], rel=1e-6)
    # and it does inform the others' (the machinery is not simply ignoring the cell)
    other = (
        (before["scheme"] == "leave one cell out")
        & (before["overlap"] == "additive")
        & (before["network"] == "fast")
    )
    assert not np.allclose(before.loc[other, "predicted"], after.loc[other, "predicted"])


def test_leave_one_network_out_needs_two_networks_between_nodes():
    windows = synthetic_windows(1.0)
    one_network = windows[windows["network"].isin(["host", "slow"])]
    validation = analyse(one_network)[2]
    assert "leave one network out" not in set(validation["scheme"])
    assert (validation["status"] == "ok").any()


def test_a_study_with_one_rank_count_says_not_enough_data():
    windows = synthetic_windows(1.0)
    groups, parameters, validation, summary = analyse(windows[windows["world_size"] == 1])
    assert groups[0].chosen is None and "not enough data" in groups[0].reason
    assert parameters.empty and validation.empty and summary.empty
    assert list(validation.columns) == commmodel.VALIDATION_COLUMNS


CONFIG_PREDICT = {
    "networks": [
        {"name": "g10", "bandwidth": "10gbit", "latency": "50us"},
        {"name": "g25", "bandwidth": "25gbit"},
        {"name": "g100", "bandwidth": "100gbit"},
    ],
    "nodes": [1, 2, 4, 8],
    "devices_per_node": [1, 2],
    "batch_per_device": [4, 32, 256],
}
PREDICT = {**CONFIG_PREDICT, "networks": predicted_links(CONFIG_PREDICT)}


@pytest.mark.parametrize(("g", "form"), [(1.0, "additive"), (math.inf, "max"), (3.0, "pollux")])
def test_more_bandwidth_is_never_slower_and_more_batch_never_fewer_img_s_per_device(g, form):
    groups, *_ = analyse(synthetic_windows(g, noise=0.01), forms=(form,), validate=False)
    table = commmodel.predictions(groups, PREDICT, [1, 2], [8])
    ok = table[(table["status"] == "ok") & (table["nodes"] > 1)]
    assert set(ok["network"]) >= {"g10", "g25", "g100", "slow", "fast"}
    # more bandwidth, or the same with less latency: never slower
    by_rate = ok.sort_values(["bandwidth_Gbit_s", "latency_us"], ascending=[True, False])
    for _, same in by_rate.groupby(["nodes", "devices_per_node", "batch_per_device"]):
        steps = same["step_time_s"].to_numpy()
        assert (np.diff(steps) <= 1e-12).all(), same[["network", "step_time_s"]]
    for _, same in ok.groupby(["network", "nodes", "devices_per_node"]):
        per_device = (same["img_s"] / same["world_size"]).to_numpy()
        assert (np.diff(per_device) >= -1e-9).all()
    assert (ok["step_time_lo_s"] <= ok["step_time_s"]).all()
    assert (ok["step_time_s"] <= ok["step_time_hi_s"]).all()


def test_break_even_batch_matches_the_additive_closed_form():
    groups, *_ = analyse(synthetic_windows(1.0), validate=False)
    table = commmodel.predictions(groups, PREDICT, [1, 2], [8])
    row = table[(table["network"] == "g100") & (table["nodes"] == 2)]
    row = row[row["devices_per_node"] == 1].iloc[0]
    # additive: B/v0 + t = kappa B/(N v0) + t + T_net  =>  B = T_net v0 / (1 - kappa/N)
    net = 2 * 1 / 2 * 4 * PARAMS / (1e11 / 8 * TRUE["eta"]) + 2 * TRUE["alpha0"]
    expected = net * TRUE["v0"] / (1 - 1 / 2)
    assert row["break_even_global_batch"] == pytest.approx(expected, rel=1e-3)


def test_comm_fits_replace_the_configured_rate():
    windows = synthetic_windows(1.0)
    comm_fits = pd.DataFrame(
        {
            "strategy": ["torch-ddp"] * 2,
            "network": ["slow", "fast"],
            "nodes": [2, 2],
            "status": ["ok", "ok"],
            "alpha_s": [0.0, 0.0],
            # the benchmark measured exactly what the training all-reduce gets
            "beta_GB_s": [1e9 / 8 * TRUE["eta"] / 1e9, 1e10 / 8 * TRUE["eta"] / 1e9],
        }
    )
    links = commmodel.links_from_config(NETWORKS, comm_fits, "torch-ddp")
    assert links["slow"].source == "comm_fits"
    _, parameters, _, _ = analyse(windows, comm_fits=comm_fits)
    assert value(parameters, "additive", "eta") == pytest.approx(1.0, rel=1e-3)


def _fewest_ranks_rows(validation: pd.DataFrame) -> pd.DataFrame:
    return validation[
        (validation["scheme"] == commmodel.FEWEST_RANKS) & (validation["overlap"] == "additive")
    ]


def test_the_fewest_ranks_scheme_predicts_every_larger_rank_count_from_the_fewest():
    windows = synthetic_windows(1.0, noise=0.01, seed=2)
    rows = _fewest_ranks_rows(analyse(windows)[2])
    assert set(rows["world_size"]) == {4} and len(rows) == len(BATCHES)
    assert (rows["status"] == "ok").all()
    # the 4-rank cells do not inform their own prediction
    changed = windows.copy()
    changed.loc[changed["world_size"] == 4, "step_time_s"] *= 3.0
    again = _fewest_ranks_rows(analyse(changed)[2])
    assert np.allclose(again["measured"], 3 * rows["measured"].to_numpy())
    assert np.allclose(again["predicted"], rows["predicted"].to_numpy(), rtol=1e-6)


def test_the_fewest_ranks_scheme_reads_collective_benchmarks_at_those_ranks_only():
    windows = synthetic_windows(1.0)

    def comm_fits(beta_at_4: float) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "strategy": ["torch-ddp"] * 3,
                "network": ["slow", "slow", "fast"],
                "nodes": [2, 4, 2],
                "world_size": [2, 4, 2],
                "status": ["ok"] * 3,
                "alpha_s": [0.0] * 3,
                "beta_GB_s": [0.075, beta_at_4, 0.75],
            }
        )

    slow, fast = (
        _fewest_ranks_rows(analyse(windows, comm_fits=comm_fits(b))[2]) for b in (0.07, 7)
    )
    assert np.allclose(slow["predicted"], fast["predicted"].to_numpy(), rtol=1e-9)
    # the leave-one-cell-out model does read the 4-rank benchmark (its links' median)
    loo = [
        analyse(windows, comm_fits=comm_fits(b))[2].query("scheme == 'leave one cell out'")
        for b in (0.07, 7)
    ]
    assert not np.allclose(loo[0]["predicted"], loo[1]["predicted"].to_numpy())


def test_one_multi_rank_count_has_no_fewest_ranks_scheme():
    windows = synthetic_windows(1.0)
    validation = analyse(windows[windows["world_size"] <= 2])[2]
    assert commmodel.FEWEST_RANKS not in set(validation["scheme"])
    assert (validation["status"] == "ok").any()


@pytest.mark.parametrize(
    ("predict", "field"),
    [
        ({"networks": [{"name": "x", "bandwidth": "10gb"}]}, "predict.networks[0].bandwidth"),
        ({"networks": [{"name": "x", "bandwidth": "fast"}]}, "predict.networks[0].bandwidth"),
        (
            {"networks": [{"name": "x", "bandwidth": "1gbit", "latency": "5s"}]},
            "predict.networks[0].latency",
        ),
        ({"networks": [{"name": "Ten G", "bandwidth": "10gbit"}]}, "predict.networks[0].name"),
        (
            {
                "networks": [
                    {"name": "a", "bandwidth": "1gbit"},
                    {"name": "a", "bandwidth": "2gbit"},
                ]
            },
            "predict.networks",
        ),
        ({"nodes": [0]}, "predict.nodes[0]"),
        ({"batch_per_device": ["big"]}, "predict.batch_per_device[0]"),
        ({"speed": 1}, "predict"),
    ],
)
def test_bad_predict_config_is_one_line_naming_the_field(predict, field):
    config = {
        "study": "s",
        "strategies": ["torch-ddp"],
        "models": [{"name": "resnet18"}],
        "batch_sizes": [8],
        "devices_per_node": [1],
        "nodes": [1],
        "modes": ["synthetic"],
        "predict": predict,
    }
    with pytest.raises(ConfigError) as error:
        plan_study(config, STRATEGIES)[0]
    message = str(error.value)
    assert "\n" not in message and message.startswith(field), message


def test_predict_defaults_are_filled_and_valid():
    config = {
        "study": "s",
        "strategies": ["torch-ddp"],
        "models": [{"name": "resnet18"}],
        "batch_sizes": [8],
        "devices_per_node": [1],
        "nodes": [1],
        "modes": ["synthetic"],
    }
    filled = plan_study(config, STRATEGIES)[0]["predict"]
    assert [n["name"] for n in filled["networks"]] == ["10g", "25g", "100g"]
    for entry in filled["networks"]:
        assert parse_quantity(entry["bandwidth"], "bandwidth") >= 1e10


def test_parse_quantity_names_the_field():
    assert parse_quantity("25gbit", "f") == 25e9
    assert parse_quantity("50us", "f") == pytest.approx(5e-5)
    with pytest.raises(ValueError, match="^predict.x: '10GB'"):
        parse_quantity("10GB", "predict.x")


def test_the_step_writes_every_output_with_headers_when_there_is_not_enough_data(tmp_path):
    import json

    from dpscale.steps.model import fit_comm_model

    windows = synthetic_windows(1.0)
    windows = windows[windows["world_size"] == 1].assign(img_s=1.0)
    windows.to_csv(tmp_path / "windows.csv", index=False)
    pd.DataFrame({"model": ["m"], "trainable_params": [PARAMS]}).to_csv(
        tmp_path / "cells.csv", index=False
    )
    study = model_inputs(
        {
            "networks": CONFIG_NETWORKS,
            "predict": CONFIG_PREDICT,
            "devices_per_node": [1],
            "batch_sizes": [8],
            "strategies": ["torch-ddp"],
        },
        STRATEGIES,
    )
    out = {
        name: tmp_path / f"{name}.{ext}"
        for name, ext in (
            ("parameters", "csv"),
            ("validation", "csv"),
            ("summary", "csv"),
            ("predictions", "csv"),
            ("top", "json"),
            ("validation_html", "html"),
            ("parameters_html", "html"),
            ("predictions_html", "html"),
            ("remedies", "csv"),
            ("remedy_validation", "csv"),
            ("remedy_predictions", "csv"),
            ("remedies_html", "html"),
            ("validation_figure", "png"),
            ("throughput_figure", "png"),
        )
    }
    inputs = {name: tmp_path / f"{name}.csv" for name in ("windows", "cells")}
    fit_comm_model(
        {**inputs, "comm_fits": tmp_path / "absent.csv"}, out, {"study": json.dumps(study)}
    )
    assert all(path.is_file() for path in out.values())
    assert list(pd.read_csv(out["validation"]).columns) == commmodel.VALIDATION_COLUMNS
    assert list(pd.read_csv(out["predictions"]).columns) == commmodel.PREDICTION_COLUMNS
    lines = json.loads(out["top"].read_text())
    assert len(lines) == 1 and "not enough data" in lines[0] and "multi-rank" in lines[0]
    for name in ("validation_html", "parameters_html", "predictions_html"):
        page = out[name].read_text()
        assert "<tbody><tr" in page and "not enough data" in page  # a row that says why


def test_a_clusters_own_network_is_a_link_apart_from_the_intra_node_one():
    links = commmodel.links_from_config(configured_links(["host"]), None, "torch-ddp")
    assert set(links) == {commmodel.INTRA, "host"}
    rows = pd.DataFrame(
        {
            "nodes": [1, 2],
            "network": ["host", "host"],
            "devices_per_node": [2, 1],
            "world_size": [2, 2],
            "batch_per_device": [8, 8],
            "gradient_bytes": [4 * PARAMS] * 2,
        }
    )
    design = commmodel.design(
        rows, links, [commmodel.INTRA, "host"], emulation=True, traffic=RingAllReduce()
    )
    assert list(design.free_link) == [0, 1]


def test_a_predicted_network_may_not_reuse_a_measured_networks_name():
    config = {
        "study": "s",
        "strategies": ["torch-ddp"],
        "models": [{"name": "resnet18"}],
        "batch_sizes": [8],
        "devices_per_node": [1],
        "nodes": [1, 2],
        "networks": [{"name": "slow", "rate": "1gbit"}],
        "modes": ["synthetic"],
        "predict": {"networks": [{"name": "slow", "bandwidth": "2gbit"}]},
    }
    with pytest.raises(ConfigError, match=r"^predict.networks\[0\].name: 'slow' is a measured"):
        plan_study(config, STRATEGIES)[0]


def test_the_noise_floor_baseline_predicts_each_cell_from_its_own_layouts_other_batches():
    obs = commmodel.observations(synthetic_windows(1.0), {"m": PARAMS})
    baseline = commmodel.layout_law_baseline(obs)
    assert len(baseline) == len(obs[obs["world_size"] > 1])
    # additive: every layout's step time is a line in the batch, so the lines are exact
    assert (baseline["relative_error"].abs() < 1e-9).all()
    # max: a kink per layout, so a line through the other batches misses
    kinked = commmodel.layout_law_baseline(
        commmodel.observations(synthetic_windows(math.inf), {"m": PARAMS})
    )
    assert kinked["relative_error"].abs().max() > 0.05


def test_a_parameter_the_data_do_not_inform_has_no_interval():
    windows = synthetic_windows(math.inf)
    hidden = windows[windows["batch_per_device"] >= 8]  # compute hides every all-reduce
    hidden = hidden[hidden["network"] != "slow"]
    _, parameters, _, _ = analyse(hidden, networks=[NETWORKS[1]], forms=("max",), validate=False)
    rows = parameters.set_index("parameter")
    assert np.isnan(rows.loc["eta", "lo"]) and np.isnan(rows.loc["eta", "hi"])
    assert rows.loc["v0", "lo"] < rows.loc["v0", "value"] < rows.loc["v0", "hi"]


def test_the_max_form_fits_with_one_configuration_fewer_than_pollux_needs():
    windows = synthetic_windows(math.inf)
    few = windows[(windows["batch_per_device"] >= 16) & (windows["network"] != "slow")]
    groups, parameters, _, _ = analyse(
        few, networks=[NETWORKS[1]], forms=("max", "pollux"), validate=False
    )
    assert set(groups[0].fits) == {"max"} and groups[0].chosen == "max"
    assert "6 configurations for 6 parameters" in groups[0].reason


def test_predicted_break_even_carries_an_interval_that_narrows_with_less_noise():
    halves = []
    for noise in (0.05, 0.005):
        groups, *_ = analyse(synthetic_windows(1.0, noise=noise), validate=False)
        table = commmodel.predictions(groups, PREDICT, [1, 2], [8])
        row = table[(table["network"] == "slow") & (table["nodes"] == 2)].iloc[0]
        assert 0 < row["break_even_global_batch_ci95"] < row["break_even_global_batch"]
        halves.append(row["break_even_global_batch_ci95"] / row["break_even_global_batch"])
    assert halves[1] < halves[0] / 3


def _summary_row(scheme: str, overlap: str, status: str = "ok", ratio: float = 1.2) -> dict:
    return {
        "scheme": scheme,
        "overlap": overlap,
        "chosen": overlap == "pollux",
        "strategy": "torch-ddp",
        "model": "m",
        "predicted_cells": 8 if status == "ok" else 0,
        "median_abs_relative_error": 0.14 if status == "ok" else math.nan,
        "within_10pct": 2,
        "within_interval": 8,
        "interval_hi_over_lo_median": ratio,
        "worst": "8x1 slow b32: +31%",
        "status": status,
    }


def _group(chosen: str) -> commmodel.GroupModel:
    return commmodel.GroupModel(
        "torch-ddp", "m", pd.DataFrame(), {}, {}, {}, chosen, None, RingAllReduce()
    )


def test_a_chosen_form_too_large_for_the_fewest_ranks_names_the_forms_that_fit():
    summary = pd.DataFrame(
        [
            _summary_row(commmodel.FEWEST_RANKS, "pollux", status="not enough data"),
            _summary_row(commmodel.FEWEST_RANKS, "additive", ratio=12.3),
        ]
    )
    (line,) = commmodel.summary_lines([_group("pollux")], summary)
    assert commmodel.FEWEST_RANKS in line and "pollux overlap has more parameters" in line
    assert "additive overlap: median |error| 14.0%" in line
    assert "8 of 8 measured inside their 95% prediction interval (unresolved" in line
    assert "12.3x" in line


def test_narrow_intervals_are_not_called_unresolved():
    summary = pd.DataFrame([_summary_row(commmodel.LEAVE_ONE_CELL_OUT, "pollux", ratio=1.3)])
    (line,) = commmodel.summary_lines([_group("pollux")], summary)
    assert "8 of 8 measured inside their 95% prediction interval." in line
    assert "unresolved" not in line


def _prediction(table: pd.DataFrame, network: str, nodes: int, devices: int, batch: int):
    rows = table[
        (table["network"] == network)
        & (table["nodes"] == nodes)
        & (table["devices_per_node"] == devices)
        & (table["batch_per_device"] == batch)
    ]
    assert len(rows) == 1
    return rows.iloc[0]


def test_every_prediction_says_whether_it_interpolates_or_extrapolates_and_how_well_checked():
    groups, _, _, summary = analyse(synthetic_windows(1.0, noise=0.01))
    table = commmodel.predictions(groups, PREDICT, [1, 2], [4], summary=summary)
    ok = table[table["status"] == "ok"]
    assert ok["kind"].notna().all() and ok["validated_by"].notna().all()
    # measured: 2 nodes over the slow link at batch 4
    assert _prediction(table, "slow", 2, 1, 4)["kind"] == "measured"
    # inside every measured range (10 Gbit/s lies within 1 and 10): interpolation, checked
    # by leaving one cell out
    inside = _prediction(table, "g10", 2, 1, 4)
    assert inside["kind"] == "interpolates"
    assert commmodel.LEAVE_ONE_CELL_OUT in inside["validated_by"]
    assert np.isfinite(inside["validated_median_abs_error"])
    # 8 ranks were never measured (at most 4): checked by the fewest-ranks scheme
    ranks = _prediction(table, "slow", 8, 1, 4)
    assert ranks["kind"] == "extrapolates in ranks"
    assert commmodel.FEWEST_RANKS in ranks["validated_by"]
    # 100 Gbit/s is above every measured link: checked by leaving one network out
    faster = _prediction(table, "g100", 2, 1, 4)
    assert faster["kind"] == "extrapolates in bandwidth"
    assert commmodel.LEAVE_ONE_NETWORK_OUT in faster["validated_by"]
    # a batch above 32 was never measured, and no scheme holds the largest batch out
    batch = _prediction(table, "g100", 8, 2, 256)
    assert batch["kind"] == "extrapolates in ranks, bandwidth, batch"
    assert "batch: not validated" in batch["validated_by"]
    assert math.isnan(batch["validated_median_abs_error"])


def test_without_a_validation_summary_no_prediction_claims_a_validated_error():
    groups, *_ = analyse(synthetic_windows(1.0), validate=False)
    table = commmodel.predictions(groups, PREDICT, [1, 2], [4])
    predicted = table[(table["status"] == "ok") & ~table["measured"].astype(bool)]
    assert not predicted.empty
    assert predicted["validated_median_abs_error"].isna().all()
    assert predicted["validated_by"].str.contains("not validated").all()


def test_the_compression_for_90pct_efficiency_matches_the_additive_closed_form():
    groups, *_ = analyse(synthetic_windows(1.0), validate=False)
    predict = {**PREDICT, "batch_per_device": [1, 32]}
    table = commmodel.predictions(groups, predict, [1, 2], [8])
    hops, alpha = 2.0, 2 * TRUE["alpha0"]  # 2 nodes: 2(N-1) hops, each alpha0
    # additive, separate machines: T_N = T_1 + X / r + A, efficiency T_1 / T_N = 0.9
    one = 32 / TRUE["v0"] + TRUE["t_c1"]
    sent = hops / 2 * 4 * PARAMS / (1e9 / 8 * TRUE["eta"])
    slow = _prediction(table, "slow", 2, 1, 32)
    assert slow["compression_for_90pct"] == pytest.approx(sent / (one / 9 - alpha), rel=0.01)
    assert slow["efficiency_uncompressed"] == pytest.approx(one / (one + sent + alpha), rel=1e-6)
    # 100 Gbit/s needs none (Zhang et al.'s finding for ResNets at 100 Gbit/s)
    assert _prediction(table, "g100", 2, 1, 32)["compression_for_90pct"] == 1.0
    # at batch 1 the latency alone keeps 2 nodes under 90%: no compression reaches it
    tiny = _prediction(table, "slow", 2, 1, 1)
    assert math.isinf(tiny["compression_for_90pct"])
    ceiling = (1 / TRUE["v0"] + TRUE["t_c1"]) / (1 / TRUE["v0"] + TRUE["t_c1"] + alpha)
    assert tiny["efficiency_nothing_sent"] == pytest.approx(ceiling, rel=1e-6) and ceiling < 0.9


def test_the_needed_compression_carries_an_interval_around_it():
    groups, *_ = analyse(synthetic_windows(1.0, noise=0.03, seed=4), validate=False)
    table = commmodel.predictions(groups, {**PREDICT, "batch_per_device": [32]}, [1], [8])
    row = _prediction(table, "slow", 2, 1, 32)
    assert row["compression_for_90pct_lo"] <= row["compression_for_90pct"]
    assert row["compression_for_90pct"] <= row["compression_for_90pct_hi"]
    assert row["compression_for_90pct_lo"] < row["compression_for_90pct_hi"]


def test_a_prediction_with_no_communication_time_says_it_stands_on_compute_only():
    """The max form hides the network behind compute where compute is longer: such a row's
    speed-up is compute's alone, the same on every network, and its basis says so."""
    groups, *_ = analyse(synthetic_windows(math.inf, noise=0.01), forms=("max",), validate=False)
    table = commmodel.predictions(groups, PREDICT, [1, 2], [8])
    ok = table[(table["status"] == "ok") & (table["world_size"] > 1)]
    only = ok["basis"].str.contains(prediction.COMPUTE_ONLY, regex=False)
    assert only.any() and not only.all()
    assert ok.loc[only, "basis"].str.contains("hides all communication behind compute").all()
    alone = ok[only & (ok["devices_per_node"] == 1)]
    assert np.allclose(alone["speedup"], alone["world_size"])  # ranks, nothing sent counted
    # a row whose step the network lengthens stands on the network, not compute alone
    priced = ok[~only]
    assert (priced["step_time_s"] > 0).all() and not priced["basis"].str.contains("compute").any()
    groups, *_ = analyse(synthetic_windows(1.0), validate=False)
    additive = commmodel.predictions(groups, PREDICT, [1, 2], [8])
    assert not additive["basis"].astype(str).str.contains(prediction.COMPUTE_ONLY).any()
