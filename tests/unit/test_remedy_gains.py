"""analysis.answers.remedy_gains: each remedy beside the same cell without one, ChainerMN's fraction
recovered, the accuracy cost with its Welch interval, and the finding in words."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dpscale.analysis.answers import remedy_accuracy, remedy_gains, remedy_ranking, remedy_words

LAYOUT = {"strategy": "torch-ddp", "model": "resnet18-imagenet64-c10", "mode": "synthetic"}


def point(network: str, comm: str, img_s: float, batch: int = 64) -> dict:
    return {
        **LAYOUT,
        "nodes": 2,
        "network": network,
        "devices_per_node": 1,
        "world_size": 2,
        "batch_per_device": batch,
        "comm": comm,
        "img_s": img_s,
        "img_s_ci95": img_s / 100,
        "speedup": img_s / 100,
        "speedup_ci95": 0.01,
    }


SCALING = pd.DataFrame(
    [
        point("1gbe", "none", 50.0),
        point("1gbe", "fp16", 80.0),
        point("1gbe", "powersgd-r2", 90.0),
        point("10gbe", "none", 100.0),
        point("10gbe", "fp16", 100.0),
    ]
)
CELLS = pd.DataFrame(
    [
        {"strategy": "torch-ddp", "comm": "fp16", "status": "ok", "wire_ratio": 2.0},
        {"strategy": "torch-ddp", "comm": "powersgd-r2", "status": "ok", "wire_ratio": 100.0},
    ]
)


def test_fraction_recovered_is_chainermn_s_measure():
    # their run: 21.3 h on 10 GbE, 7.71 h with the remedy, 6.96 h on InfiniBand
    per_hour = remedy_gains.fraction_recovered(1 / 21.3, 1 / 7.71, 1 / 6.96, is_fastest=False)
    assert per_hour == pytest.approx(remedy_gains.CHAINERMN_RECOVERED)
    assert abs(remedy_gains.CHAINERMN_RECOVERED - 0.948) < 1e-3
    assert math.isnan(remedy_gains.fraction_recovered(50, 80, 100, is_fastest=True))
    assert math.isnan(remedy_gains.fraction_recovered(100, 120, 90, is_fastest=False))  # no cost


def test_each_remedy_is_set_beside_the_same_cell_without_one():
    table = remedy_gains.remedies_table(SCALING, CELLS, pd.DataFrame()).set_index(
        ["network", "comm"]
    )
    fp16 = table.loc[("1gbe", "fp16")]
    assert fp16["gain_vs_none"] == pytest.approx(1.6)
    assert fp16["fastest_network"] == "10gbe" and fp16["wire_ratio"] == 2.0
    # time per image 1/50 without, 1/80 with, 1/100 on 10gbe: (1/50 - 1/80) / (1/50 - 1/100)
    assert fp16["fraction_recovered"] == pytest.approx(0.75)
    assert math.isnan(table.loc[("10gbe", "fp16"), "fraction_recovered"])  # the fast network


def test_the_finding_names_the_best_remedy_with_its_accuracy_cost():
    table = remedy_gains.remedies_table(SCALING, CELLS, pd.DataFrame())
    runs = pd.DataFrame(
        [
            {
                "strategy": "torch-ddp",
                "model": "resnet18-cifar8-c10",
                "dataset": "digits",
                "network": "host",
                "nodes": 1,
                "devices_per_node": 2,
                "world_size": 2,
                "batch_per_device": 32,
                "lr_rule": "linear",
                "comm": comm,
                "seed": seed,
                "status": "ok",
                "final_val_accuracy": accuracy,
                "time_to_target_s": 5.0,
            }
            for comm, seed, accuracy in [
                ("none", 0, 0.90),
                ("none", 1, 0.92),
                ("powersgd-r2", 0, 0.85),
                ("powersgd-r2", 1, 0.89),
            ]
        ]
    )
    accuracy = remedy_accuracy.accuracy_table(runs)
    assert accuracy.iloc[0]["accuracy_delta_vs_none"] == pytest.approx(-0.04)
    assert accuracy.iloc[0]["accuracy_delta_vs_none_ci95"] > 0
    lines = remedy_words.finding_lines(table, accuracy)
    assert len(lines) == 1  # 1gbe is slow; 10gbe is the fastest network
    assert "What helps on 1gbe" in lines[0] and "powersgd-r2 helps most" in lines[0]
    assert "recovering 89% (95% CI " in lines[0] and ") of what 1gbe cost against 10gbe" in lines[0]
    # paired by seed, 1 degree of freedom: ±12.7 points, too wide to state the -4.0
    assert accuracy.iloc[0]["accuracy_delta_vs_none_method"] == "paired"
    assert (
        "final accuracy against the same training without it is not resolved (2 seeds" in (lines[0])
    )
    assert "-4.0" not in lines[0] and "1 node x 2 devices" in lines[0]
    without = remedy_words.finding_lines(table, pd.DataFrame())
    assert "its accuracy cost is not measured" in without[0]


def test_findings_csv_gets_the_best_remedy_per_layout():
    table = remedy_gains.remedies_table(SCALING, CELLS, pd.DataFrame())
    findings = pd.DataFrame(
        [
            {**{k: v for k, v in point(n, "none", 1).items() if k in remedy_accuracy.ACCURACY_KEY}}
            for n in ("1gbe", "10gbe")
        ]
    )
    out = remedy_ranking.findings_columns(findings, table, pd.DataFrame()).set_index("network")
    assert out.loc["1gbe", "best_remedy"] == "powersgd-r2"
    assert out.loc["1gbe", "best_remedy_gain"] == pytest.approx(1.8)
    assert pd.isna(out.loc["10gbe", "best_remedy"])


def test_the_page_says_why_it_has_no_rows():
    from dpscale.render.findings_page import remedies_html

    page = remedies_html(pd.DataFrame(columns=remedy_gains.REMEDY_COLUMNS), pd.DataFrame(), [], "t")
    assert "<tbody><tr" in page and "no remedy cell across processes was measured" in page


def test_a_remedy_keys_fidelity_is_its_declarations_and_orders_as_before():
    """The ranking's last criterion reads plan.remedies' declaration: the order FIDELITY had
    (none, push-pull, fp16, bf16, delayed, delayed-fp16, powersgd, 2bit), a key by its name."""
    keys = ["2bit-t0.5", "powersgd-r2", "delayed-fp16-bucket1", "delayed", "bf16"]
    keys += ["fp16-bucket4", "push-pull", "none-bucket1"]
    ranked_keys = sorted(keys, key=remedy_ranking._fidelity)
    assert ranked_keys == keys[::-1]
    assert remedy_ranking._fidelity("powersgd-r2") == 6
    assert remedy_ranking._fidelity("powersgd-r2-s2") == remedy_ranking._fidelity("powersgd")
    assert remedy_ranking.RANK_RULE.endswith(
        "(a bucket size, then push-pull, fp16, bf16, delayed, delayed-fp16, powersgd, 2bit)"
    )


def test_a_remedy_no_declaration_names_is_an_error_not_ranked_last():
    with pytest.raises(ValueError, match="'someone-elses' names no declared remedy"):
        remedy_ranking._fidelity("someone-elses")
