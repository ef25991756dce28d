"""Cost per layout (analysis.answers.cost) and the answer paragraph, by hand-computed examples."""

import math

import pandas as pd
import pytest

from dpscale.analysis.answers import answer, cost, startup
from dpscale.analysis.answers.findings import findings_table
from dpscale.analysis.answers.verdicts import startup_verdict

PRICES = cost.Prices(
    currency="EUR",
    node_hour={"cpu": 2.0},
    source="a test",
    date="2026-11-01",
    network_hour={"1gbe": 0.5},
    epoch_images=36_000,
    run_epochs=2,
    deadline_hours=0.5,
)


def cell(nodes: int, devices: int, img_s: float, startup_s: float, network: str = "host"):
    """One ok synthetic cell at per-device batch 8; start-up all in the first step."""
    phases = dict.fromkeys(startup.PHASE_COLUMNS, 0.0)
    phases["startup_first_step_s"] = startup_s
    return {
        "cell_id": f"n{nodes}-d{devices}-{network}",
        "strategy": "torch-ddp",
        "model": "resnet50-imagenet32-c10",
        "mode": "synthetic",
        "status": "ok",
        "reason": None,
        "quality": "ok",
        "network": network,
        "nodes": nodes,
        "devices_per_node": devices,
        "world_size": nodes * devices,
        "batch_per_device": 8,
        "accelerator": "cpu",
        "img_s_mean": img_s,
        "img_s_ci95": 1.0,
        "startup_s": startup_s + 1.0,
        **phases,
        "startup_warmup_s": 1.0,
    }


@pytest.fixture
def cells() -> pd.DataFrame:
    return pd.DataFrame(
        [cell(1, 1, 10.0, 5.0), cell(1, 2, 20.0, 6.0), cell(2, 1, 16.0, 11.0, "1gbe")]
    )


def test_cost_columns_follow_from_the_price_table(cells):
    table = cost.cost_table(cells, PRICES).set_index(["nodes", "devices_per_node"])
    one, two_nodes = table.loc[(1, 1)], table.loc[(2, 1)]
    # one node at 10 img/s: 1000 images take 100 s = 1/36 node-hour at 2 EUR
    assert one["node_hours_per_1000_images"] == pytest.approx(1 / 36)
    assert one["cost_per_1000_images"] == pytest.approx(2 / 36)
    assert one["epoch_s"] == pytest.approx(3600) and one["cost_per_epoch"] == pytest.approx(2.0)
    # start-up paid (5 s, the warm-up not included) + 2 epochs of 3600 s
    assert one["run_s"] == pytest.approx(7205) and one["run_cost"] == pytest.approx(7205 / 1800)
    assert not one["meets_deadline"]
    # two nodes over 1gbe: 2.5 EUR per node-hour (the network's surcharge), 2 nodes at 16 img/s
    assert two_nodes["price_per_node_hour"] == pytest.approx(2.5)
    assert two_nodes["cost_per_1000_images"] == pytest.approx(2 * 2.5 * 1000 / 16 / 3600)
    # 5 + I/10 = 11 + I/16 at I = 160 images
    assert two_nodes["break_even_images_vs_1"] == pytest.approx(160)
    # 2 epochs: 5 + 7200 s on one device, 11 + 4500 s on two nodes
    assert two_nodes["run_speedup_vs_1"] == pytest.approx(7205 / 4511)
    assert (table["currency"] == "EUR").all()


def test_without_prices_node_hours_stay_and_money_says_so(cells):
    table = cost.cost_table(cells, None)
    assert table["node_hours_per_1000_images"].notna().all()
    assert table["cost_per_1000_images"].isna().all() and (table["currency"] == cost.NO_PRICE).all()
    assert cost.money(1.0, None) == "no price given"
    assert cost.money(0.5, PRICES) == "0.5000 EUR"


def test_cheapest_layout_within_the_deadline():
    quick = pd.DataFrame(
        [cell(1, 1, 100.0, 5.0), cell(1, 2, 200.0, 6.0), cell(2, 1, 160.0, 11.0, "1gbe")]
    )
    table = cost.cost_table(quick, PRICES)
    best = cost.cheapest(table, PRICES)
    # 2 epochs of 36,000 images: 1 x 1 takes 725 s (0.403 EUR), 1 x 2 366 s (0.203 EUR)
    assert (best["nodes"], best["devices_per_node"]) == (1, 2)
    assert best["run_cost"] == pytest.approx(366 / 1800)
    late = cost.Prices(**{**PRICES.__dict__, "deadline_hours": 0.05})
    assert cost.cheapest(cost.cost_table(quick, late), late) == {}


def test_cost_to_target_is_time_to_accuracy_times_nodes_times_price():
    runs = pd.DataFrame(
        {
            "strategy": "torch-ddp",
            "model": "m",
            "network": ["1gbe", "1gbe", "host"],
            "nodes": [2, 2, 1],
            "world_size": [2, 2, 1],
            "batch_per_device": 8,
            "lr_rule": "linear",
            "status": "ok",
            "time_to_target_s": [1800.0, 3600.0, math.nan],
        }
    )
    table = cost.cost_to_target(runs, PRICES, "cpu").set_index("nodes")
    assert table.loc[2, "cost_to_target"] == pytest.approx(2 * 0.75 * 2.5)
    assert math.isnan(table.loc[1, "cost_to_target"])  # a seed never reached the target


def test_start_up_break_even_in_words(cells):
    row = {
        "startup_extra_s": 5.0,
        "startup_reference": "1 node x 2 devices",
        "reference_first_below_images": 400.0,
        "batch_per_device": 8,
        "world_size": 2,
    }
    assert startup_verdict(row) == (
        "start-up (launch to first step) 5.0 s longer than on 1 node x 2 devices; for a run "
        "shorter than 400 images (25 steps) 1 node x 2 devices finishes first"
    )
    row["reference_first_below_images"] = math.inf
    assert startup_verdict(row).endswith("1 node x 2 devices finishes first at any run length")


def test_the_answer_names_the_layout_its_cost_and_the_trust(cells):
    table = cost.cost_table(cells, PRICES)
    scaling = pd.DataFrame(columns=["mode", "strategy", "model", "network", "nodes"])
    fits = pd.DataFrame(columns=["status", "mode", "strategy", "model", "world_size"])
    even = pd.DataFrame(columns=["mode", "strategy", "model", "network", "nodes"])
    findings = findings_table(cells, scaling, fits, even, costs=table)
    text = answer.answer_paragraph(findings, table, PRICES, "Measurement quality: 3 of 3 ok.")
    assert text.startswith(
        "For ResNet-50 (32 px, 10 classes), choose torch-ddp on 1 node x 2 devices: 20 img/s"
    )
    assert "2.0000 EUR per epoch" not in text and "1.00 EUR per epoch" in text
    assert text.endswith("Measurement quality: 3 of 3 ok.")
    assert "no price given" in answer.answer_paragraph(findings, table, None, "")
    two_nodes = findings.set_index("nodes").loc[2]
    assert two_nodes["startup_reference"] == "1 node x 2 devices"
    assert two_nodes["startup_extra_s"] == pytest.approx(5.0)
    assert math.isinf(two_nodes["reference_first_below_images"])  # slower and later
