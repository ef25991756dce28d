"""Findings (the answer first) and MFU, from synthetic results with a known throughput law."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from conftest import aggregate, make_cell
from dpscale.analysis.answers import findings, verdicts
from dpscale.analysis.laws import fits
from dpscale.analysis.results import measurement_quality
from dpscale.plan.result import make_result, now_iso, write_result
from dpscale.runner.timing import throughput_measurement
from dpscale.steps.findings import findings as findings_step

PEAK = {"tflop_s": 0.5, "ci95": 0.01, "n": 5, "dtype": "fp32", "framework": "torch"}
SYSTEM = {"host": "h", "cpu_model": "c", "python": "3.11", "matmul_peak": PEAK}
LAW = {1: (100.0, 0.02), 2: (100.0, 0.05)}  # world size -> (v0, t_c)
BATCHES = (4, 8, 16, 32)


def measured(cell, rng):
    v0, t_c = LAW[cell.world_size]
    seconds = [
        2 * fits.step_time(cell.batch_per_device, v0, t_c) * (1 + rng.normal(0, 0.01))
        for _ in range(4)
    ]
    return throughput_measurement(seconds, 2, cell.batch_per_device, cell.world_size)


def write_results(root, system=SYSTEM, contaminated_world=None):
    rng = np.random.default_rng(0)
    paths = []
    for devices in (1, 2):
        for batch in BATCHES:
            cell = make_cell(devices=devices, batch=batch)
            result = make_result(
                cell, "ok", started_at=now_iso(), system=system, measurement=measured(cell, rng)
            )
            if contaminated_world is not None:  # the launcher's verdict (launch.contention)
                busy = devices == contaminated_world
                contention = {**CONTENDED, "foreign_cpu_cores_mean": 0.34 if busy else 0.01}
                result["system"] = {**system, "contention": contention}
                result["quality"] = "contaminated" if busy else "ok"
                result["quality_reason"] = "a neighbour" if busy else None
            paths.append(write_result(cell.result_path(root), result))
    skipped = make_cell(strategy="torch-dp", devices=2)
    result = make_result(
        skipped, "skipped", started_at=now_iso(), system=system, reason="one process per node"
    )
    paths.append(write_result(skipped.result_path(root), result))
    return [str(p) for p in paths]


CONTENDED = {
    "interval_s": 0.5,
    "samples": 8,
    "cpus": 2,
    "cpus_used_by_cell": 2,
    "foreign_cpu_cores_mean": 0.34,
}


@pytest.fixture
def tables(tmp_path):
    out = tmp_path / "tables"
    aggregate(out, write_results(tmp_path))
    return out


def run_findings(tables, inputs=(), cells_dir=""):
    """The findings rule's step on the tables, with the extra inputs named."""
    names = ("cells", "scaling", "fits", "break_even", *inputs)
    outputs = {
        "findings": tables / "findings.csv",
        "findings_html": tables / "findings.html",
        "findings_top": tables / "findings_top.json",
    }
    params = {"cells_dir": cells_dir, "prices": "null"}
    findings_step({name: tables / f"{name}.csv" for name in names}, outputs, params)
    return pd.read_csv(outputs["findings"])


def test_findings_one_row_per_layout_with_break_even_verdict(tables):
    table = run_findings(tables).set_index("strategy")
    assert sorted(table.index) == ["torch-ddp", "torch-dp"]
    ddp = table.loc["torch-ddp"]
    assert ddp["network"] == "host"
    assert ddp["batch_per_device"] == max(BATCHES)
    expected = fits.throughput(32, *LAW[2], 2) / fits.throughput(32, *LAW[1], 1)
    assert ddp["speedup"] == pytest.approx(expected, rel=0.05)
    # B > (t_2 - t_1) / (1/v0_1 - 1/(2 v0_2)) = 0.03 / 0.005 = 6
    assert ddp["break_even_global_batch"] == pytest.approx(6, rel=0.3)
    even, half = ddp["break_even_global_batch"], ddp["break_even_global_batch_ci95"]
    assert 0 < half < even
    low, high = math.floor(even - half), math.ceil(even + half)
    assert (
        f"2 devices beat 1 from global batch {math.ceil(even)} (95% CI {low} to {high}); "
        "below that, one device running the whole global batch is faster"
    ) in ddp["verdict"]
    speedup = f"{ddp['speedup']:.2f}x (±{ddp['speedup_ci95']:.2f}) as fast as 1 device at batch 32"
    assert speedup in ddp["verdict"]
    assert f"(efficiency {100 * ddp['efficiency']:.0f}% ±" in ddp["verdict"]
    # no predictions.csv: not predicted, and why
    assert ddp["predicted_speedup_more_devices"] == (
        "not predicted (the communication model made no prediction)"
    )


def test_unmeasured_layout_says_not_measured_never_a_number(tables):
    table = run_findings(tables).set_index("strategy")
    dp = table.loc["torch-dp"]
    assert dp["verdict"] == "not measured: one process per node"
    assert math.isnan(dp["speedup"]) and math.isnan(dp["break_even_global_batch"])
    page = (tables / "findings.html").read_text()
    assert "not measured" in page and "one process per node" in page
    top = json.loads((tables / "findings_top.json").read_text())
    assert top[0].endswith("Measurement quality: 0 of 8 measured cells ok, 8 unknown.")
    assert top[1].startswith("torch-ddp") and "not measured" in top[-1]


def test_network_column_is_read_from_the_tables(tables):
    for name in ("cells", "scaling", "fits", "break_even"):
        frame = pd.read_csv(tables / f"{name}.csv")
        frame["network"] = "veth-1gbit"
        frame.to_csv(tables / f"{name}.csv", index=False)
    table = run_findings(tables).set_index("strategy")
    assert set(table["network"]) == {"veth-1gbit"}
    assert table.loc["torch-ddp", "speedup"] > 1


def test_accuracy_columns_per_lr_rule_and_their_verdicts(tables):
    deltas = pd.DataFrame(
        {
            "strategy": ["torch-ddp"] * 3,
            "model": ["resnet18-cifar32-c10"] * 3,
            "world_size": [2, 2, 2],
            "batch_per_device": [32, 16, 32],  # the row at the largest batch is the finding
            "lr_rule": ["linear", "linear", "none"],
            "final_delta": [-0.002, -0.5, -0.10],
            "final_delta_ci95": [0.01, 0.01, 0.02],
        }
    )
    keys = ["strategy", "model", "world_size", "batch_per_device", "lr_rule"]
    tta = deltas[keys].assign(speedup=[1.5, 9.0, math.nan])
    deltas.to_csv(tables / "accuracy_delta.csv", index=False)
    tta.to_csv(tables / "time_to_accuracy.csv", index=False)
    table = run_findings(tables, ("accuracy_delta", "time_to_accuracy")).set_index("strategy")
    ddp = table.loc["torch-ddp"]
    assert ddp["accuracy_delta_linear"] == pytest.approx(-0.002)
    assert ddp["accuracy_delta_none_ci95"] == pytest.approx(0.02)
    assert ddp["tta_speedup_linear"] == pytest.approx(1.5)
    assert "lr rule linear: final accuracy not distinguishable from 1 device" in ddp["verdict"]
    assert "reaches the target 1.50x as fast" in ddp["verdict"]
    assert "lr rule none: final accuracy 10.0 points lower" in ddp["verdict"]
    assert math.isnan(table.loc["torch-dp", "accuracy_delta_linear"])


def test_a_training_only_layout_says_its_throughput_was_not_measured():
    row = {"world_size": 2, "cells_ok": 2, "break_even_global_batch": math.nan}
    row.update(speedup=math.nan, accuracy_delta_linear=0.01, accuracy_delta_linear_ci95=0.001)
    text = verdicts.verdict(row, ["linear"])
    assert text.startswith("throughput not measured (training runs only); lr rule linear")
    assert "1.0 points higher" in text


def test_never_and_always_break_even_read_as_words():
    row = {"world_size": 4, "break_even_global_batch": math.inf, "speedup": 0.5}
    row.update(batch_per_device=8, efficiency=0.125)
    assert "never beat 1" in verdicts.throughput_verdict(row)
    assert "slower than one device" in verdicts.throughput_verdict(row)
    row.update(break_even_global_batch=0.0, speedup=3.0, efficiency=0.75)
    assert "beat 1 at every global batch" in verdicts.throughput_verdict(row)


def test_mfu_is_per_device_achieved_over_the_measured_peak(tables):
    cells = pd.read_csv(tables / "cells.csv")
    ok = cells[cells["status"] == "ok"]
    expected = ok["img_s_mean"] / ok["world_size"] * ok["train_flops_per_sample"] / 1e12 / 0.5
    assert np.allclose(ok["mfu"], expected)
    assert (ok["peak_tflop_s"] == 0.5).all()
    fit_table = pd.read_csv(tables / "fits.csv")
    v0 = fit_table["v0"] * cells["train_flops_per_sample"].iloc[0] / 1e12 / 0.5
    assert np.allclose(fit_table["mfu_ceiling"], v0)


def test_mfu_is_nan_without_a_measured_peak(tmp_path):
    system = {k: v for k, v in SYSTEM.items() if k != "matmul_peak"}
    out = tmp_path / "tables"
    aggregate(out, write_results(tmp_path, system))
    cells = pd.read_csv(out / "cells.csv")
    assert cells["mfu"].isna().all() and cells["peak_tflop_s"].isna().all()
    assert pd.read_csv(out / "fits.csv")["mfu_ceiling"].isna().all()


def prediction(nodes, devices, network, speedup, batch=32, bandwidth=1.0):
    return {
        "strategy": "torch-ddp",
        "model": "resnet18",
        "network": network,
        "bandwidth_Gbit_s": bandwidth,
        "nodes": nodes,
        "devices_per_node": devices,
        "batch_per_device": batch,
        "speedup": speedup,
        "speedup_lo": speedup * 0.8,
        "speedup_hi": speedup * 1.2,
        "status": "ok",
    }


def test_predicted_speedups_name_the_layouts_and_networks_they_are_for():
    predictions = pd.DataFrame(
        [
            prediction(4, 1, "1gbe", 2.5),
            prediction(8, 1, "1gbe", 4.0),
            prediction(2, 1, "25g", 1.9, bandwidth=25.0),
            prediction(2, 1, "10g", 1.7, bandwidth=10.0),
            prediction(4, 1, "1gbe", 9.9, batch=8),  # another batch: not this row's
            prediction(1, 4, "10g", 3.0),
        ]
    )
    layout = {"strategy": "torch-ddp", "model": "resnet18", "network": "1gbe", "nodes": 2}
    row = {**layout, "devices_per_node": 1, "batch_per_device": 32.0}
    numbers = findings.predicted_numbers(row, predictions)
    assert numbers["predicted_speedup_more_devices"] == "4 nodes 2.5x [2, 3]; 8 nodes 4x [3.2, 4.8]"
    assert numbers["predicted_speedup_other_networks"] == "10g 1.7x [1.4, 2]; 25g 1.9x [1.5, 2.3]"
    one_node = {**row, "network": "host", "nodes": 1, "devices_per_node": 2}
    assert findings.predicted_numbers(one_node, predictions)["predicted_speedup_more_devices"] == (
        "4 devices 3x [2.4, 3.6]"
    )


def test_each_predicted_speedup_says_what_kind_of_prediction_it_is():
    kinds = [
        ("measured", math.nan),
        ("interpolates", 0.04),
        ("extrapolates in ranks", 0.14),
        ("extrapolates in ranks, batch", math.nan),
    ]
    predictions = pd.DataFrame(
        [
            {**prediction(nodes, 1, "1gbe", 2.0), "kind": kind, "validated_median_abs_error": e}
            for nodes, (kind, e) in zip((3, 4, 6, 8), kinds, strict=True)
        ]
    )
    row = {"strategy": "torch-ddp", "model": "resnet18", "network": "1gbe", "nodes": 2}
    row |= {"devices_per_node": 1, "batch_per_device": 32.0}
    words = findings.predicted_numbers(row, predictions)["predicted_speedup_more_devices"]
    assert words == (
        "3 nodes 2x [1.6, 2.4] (layout measured; the model's value on separate machines); "
        "4 nodes 2x [1.6, 2.4] (interpolates, held-out error 4%); "
        "6 nodes 2x [1.6, 2.4] (extrapolates in ranks, held-out error 14%); "
        "8 nodes 2x [1.6, 2.4] (extrapolates in ranks, batch, not validated)"
    )


@pytest.mark.parametrize(
    ("ratio", "high", "expected"),
    [
        (1.0, 1.0, "1x (none) [1x, 1x]; 95% efficient uncompressed (model, separate machines)"),
        (1.0, math.inf, "1x (none) [1x, unbounded]; 95% efficient uncompressed"),
        (3.1, 4.4, "3.1x [2x, 4.4x]; 60% efficient uncompressed (model, separate machines)"),
        (math.inf, math.inf, "out of reach [2x, unbounded]; 60% efficient uncompressed, 85% with"),
    ],
)
def test_the_compression_a_layout_needs_is_in_its_findings_row(ratio, high, expected):
    efficiency = 0.95 if ratio == 1.0 else 0.6
    needed = {
        "compression_for_90pct": ratio,
        "compression_for_90pct_lo": 1.0 if ratio == 1.0 else 2.0,
        "compression_for_90pct_hi": high,
        "efficiency_uncompressed": efficiency,
        "efficiency_nothing_sent": 0.85,
    }
    predictions = pd.DataFrame([{**prediction(2, 1, "1gbe", 1.2), **needed}])
    row = {"strategy": "torch-ddp", "model": "resnet18", "network": "1gbe", "nodes": 2}
    row |= {"devices_per_node": 1, "batch_per_device": 32.0}
    words = findings.predicted_numbers(row, predictions)["compression_for_90pct"]
    assert words.startswith(expected)
    # one node is one machine: the model's words do not say "separate machines"
    one_node = predictions.assign(nodes=1, network="host", devices_per_node=2)
    here = {**row, "network": "host", "nodes": 1, "devices_per_node": 2}
    words_one = findings.predicted_numbers(here, one_node)["compression_for_90pct"]
    assert words_one.endswith("(model)")
    # with the rank count, the efficiency carries the speedup's interval (1.2x +-20% / 2)
    predictions["world_size"] = 2
    words = findings.predicted_numbers(row, predictions)["compression_for_90pct"]
    assert f"{efficiency:.0%} [48%, 72%] efficient uncompressed" in words


def test_no_fitted_model_means_not_predicted():
    row = {"strategy": "torch-ddp", "model": "resnet18", "network": "host", "nodes": 1}
    row |= {"devices_per_node": 2, "batch_per_device": 32.0}
    empty = findings.predicted_numbers(row, pd.DataFrame())
    assert empty["predicted_speedup_more_devices"].startswith("not predicted (the communication")
    assert empty["predicted_speedup_other_networks"].startswith("one node: no network")
    failed = pd.DataFrame([{**prediction(4, 1, "1gbe", 3.0), "status": "not fitted"}])
    two_nodes = {**row, "network": "1gbe", "nodes": 2, "devices_per_node": 1}
    words = set(findings.predicted_numbers(two_nodes, failed).values())
    assert words == {"not predicted (no prediction for this strategy and model at this batch)"}


def test_a_column_the_model_left_empty_says_why_it_is_not_predicted():
    """Only the more-devices column has a prediction: the other two say why they have none."""
    row = {"strategy": "torch-ddp", "model": "resnet18", "network": "1gbe", "nodes": 2}
    row |= {"devices_per_node": 1, "batch_per_device": 32.0}
    more = pd.DataFrame([prediction(4, 1, "1gbe", 3.0)])
    numbers = findings.predicted_numbers(row, more)
    assert numbers["predicted_speedup_more_devices"].startswith("4 nodes")
    assert numbers["predicted_speedup_other_networks"] == (
        "not predicted (no other network at this layout among the predictions)"
    )
    assert numbers["compression_for_90pct"].startswith("not predicted (")


def test_the_landing_page_gives_the_quality_and_a_finding_lost_to_contamination_says_so(
    tmp_path,
):
    tables = tmp_path / "tables"
    aggregate(tables, write_results(tmp_path, contaminated_world=2))
    table = run_findings(tables, cells_dir="results/s/cells").set_index("strategy")
    top = json.loads((tables / "findings_top.json").read_text())
    two = make_cell(devices=2, batch=4).cell_id
    assert (
        top[0]
        .split("Measurement quality:")[1]
        .startswith(
            " 4 of 8 measured cells ok, 4 contaminated (contaminated cells are "
            "left out of the fits); the worst foreign load was 0.34 cores ("
        )
    )
    verdict = table.loc["torch-ddp", "verdict"]
    assert math.isnan(table.loc["torch-ddp", "break_even_global_batch"])
    assert "the break-even batch is not fitted: 4 cell(s) were contaminated" in verdict
    command = verdict.split("measure them again on a quiet machine: ")[1].rstrip(".")
    assert command.startswith("snakemake --forcerun ") and f"results/s/cells/{two}.json" in command
    assert len(command.split()) == 2 + 4


def test_the_findings_page_says_never_for_a_batch_and_unbounded_for_an_interval():
    from dpscale.render.findings_page import display_table

    row = {"strategy": "s", "model": "m", "network": "host", "nodes": 1, "devices_per_node": 2}
    row.update(world_size=2, verdict="v", break_even_global_batch=math.inf)
    row.update(break_even_global_batch_ci95=math.inf, efficiency=0.81, efficiency_ci95=0.04)
    shown = display_table(pd.DataFrame([row])).iloc[0]
    assert shown["break_even_global_batch"] == "never"
    assert shown["break_even_global_batch_ci95"] == "unbounded"
    assert (shown["efficiency"], shown["efficiency_ci95"]) == ("81%", "± 4%")


def test_the_quality_line_counts_every_measured_cell_remedies_included():
    cells = pd.DataFrame(
        {
            "status": ["ok", "ok", "ok", "skipped"],
            "comm": ["none", "fp16", "powersgd-r2", "none"],
            "quality": ["ok", "ok", "noisy", None],
            "cell_id": ["a", "b", "c", "d"],
        }
    )
    line = measurement_quality.quality_line(cells)
    assert line.startswith("Measurement quality: 2 of 3 measured cells ok, 1 noisy")


def test_the_quality_line_names_oversubscribed_cells_and_what_became_of_them():
    cells = pd.DataFrame(
        {
            "status": ["ok", "ok", "ok"],
            "quality": ["ok", "ok", "contaminated"],
            "cell_id": ["a", "b", "c"],
            "oversubscribed": [False, True, True],
            "cell_cpu_cores_mean": [1.0, 0.62, 1.7],
        }
    )
    line = measurement_quality.quality_line(cells)
    assert "2 cells ran more ranks than CPUs (oversubscribed)" in line
    assert "at most 1.70 cores: 1 network-bound and kept, 1 left out" in line
    assert "oversubscribed" not in measurement_quality.quality_line(cells.iloc[:1])
