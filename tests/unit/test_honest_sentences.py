"""Sentences the report leads with, on synthetic studies whose truth is known: a tie is named
as one, a clear winner is not, paired seeds give a paired interval, and an accuracy delta
too wide to tell anything is "not resolved" with the seeds that would resolve it."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_remedy_gains import point

from dpscale.analysis import accuracy as acc
from dpscale.analysis import answer, remedy_gains
from dpscale.analysis.words import delta_words


def cost_row(strategy: str, img_s: float, half: float, devices: int = 2) -> dict:
    return {
        "strategy": strategy,
        "model": "resnet18-imagenet64-c10",
        "network": "host",
        "nodes": 1,
        "devices_per_node": devices,
        "world_size": devices,
        "batch_per_device": 32,
        "global_batch": 32 * devices,
        "img_s": img_s,
        "img_s_ci95": half,
        "node_hours_per_1000_images": 0.002,
    }


def finding(strategy: str, break_even: float, model: str = "resnet18-imagenet64-c10") -> dict:
    return {
        "strategy": strategy,
        "model": model,
        "network": "host",
        "nodes": 1,
        "devices_per_node": 2,
        "world_size": 2,
        "break_even_global_batch": break_even,
    }


def landing(costs: list[dict], findings: list[dict]) -> str:
    return answer.answer_paragraph(pd.DataFrame(findings), pd.DataFrame(costs), None, "")


def test_overlapping_intervals_are_named_together_and_the_tie_rule_decides():
    text = landing(
        [cost_row("mxnet-dist", 163, 5), cost_row("torch-ddp", 157, 6), cost_row("solo", 90, 1, 1)],
        [finding("mxnet-dist", 24.0), finding("torch-ddp", 10.2)],
    )
    assert "mxnet-dist on 1 node x 2 devices (163 ±5 img/s) and torch-ddp" in text
    assert "tie at per-device batch 32" in text
    # the faster mean loses: the rule picks the smaller break-even batch, and says so
    assert "choose torch-ddp on 1 node x 2 devices: it beats one device from the smaller " in text
    assert "(11 against 24)" in text and "choose mxnet-dist" not in text
    assert answer.TIE_RULE in text


def test_a_clear_winner_is_chosen_without_a_tie():
    text = landing(
        [cost_row("mxnet-dist", 163, 2), cost_row("torch-ddp", 150, 2)],
        [finding("mxnet-dist", 24.0), finding("torch-ddp", 10.0)],
    )
    assert "tie" not in text
    assert "choose mxnet-dist on 1 node x 2 devices: 163 img/s (±2)" in text
    assert "it beats one device from global batch 24" in text


def test_one_device_tied_with_two_is_the_simpler_choice():
    text = landing(
        [cost_row("torch-ddp", 100, 8), cost_row("torch-ddp", 95, 4, devices=1)],
        [finding("torch-ddp", 50.0)],
    )
    assert "choose torch-ddp on 1 node x 1 device: one device needs no break-even" in text


def test_accuracy_measured_on_another_model_says_which():
    trained = finding("torch-ddp", math.nan, model="resnet18-imagenet16-c10")
    trained.update(
        accuracy_delta_linear=0.004,
        accuracy_delta_linear_ci95=0.018,
        accuracy_seeds_linear=2,
        accuracy_seeds_for_1pt_linear=3,
        accuracy_delta_none=-0.026,
        accuracy_delta_none_ci95=0.008,
    )
    text = landing([cost_row("torch-ddp", 150, 2)], [finding("torch-ddp", 10.0), trained])
    assert "not measured" not in text
    assert (
        "measured by training ResNet-18 (16 px, 10 classes) with the same strategy and layout"
        in text
    )
    assert "under the linear learning-rate rule, final accuracy not distinguishable from 1 " in text
    assert "under the none learning-rate rule, final accuracy 2.6 points lower" in text


def test_accuracy_from_the_same_device_count_elsewhere_says_where():
    trained = finding("torch-ddp", math.nan, model="resnet18-imagenet8-c10")
    trained.update(accuracy_delta_linear=-0.01, accuracy_delta_linear_ci95=0.004)
    two_nodes = {**cost_row("torch-ddp", 150, 2), "nodes": 2, "devices_per_node": 1}
    two_nodes["network"] = "10gbe"
    there = {**finding("torch-ddp", 10.0), "nodes": 2, "devices_per_node": 1, "network": "10gbe"}
    text = landing([two_nodes], [there, trained])
    assert (
        "ResNet-18 (8 px, 10 classes) with the same strategy on 1 node x 2 devices (2 devices as "
        in text
    )
    assert "final accuracy 1.0 points lower" in text
    alone = landing([cost_row("mxnet-dist", 150, 2)], [finding("mxnet-dist", 10.0)])
    assert "its accuracy cost is not measured" in alone


def test_a_delta_wider_than_five_points_is_not_resolved_and_not_stated():
    text = delta_words(-3.5, 15.9, seeds=2, needed=15)
    assert text.startswith("final accuracy not resolved (2 seeds, 95% interval ±15.9 points")
    assert "about 15 seeds would resolve ±1 point" in text
    assert "3.5" not in text
    assert "not distinguishable" in delta_words(-3.5, 4.9)


def runs(final_by_seed: dict[int, float]) -> pd.DataFrame:
    seeds = list(final_by_seed)
    return pd.DataFrame({"seed": seeds, "final_val_accuracy": [final_by_seed[s] for s in seeds]})


def test_paired_seeds_give_the_paired_t_interval_and_its_degrees_of_freedom():
    # seeds differ a lot from each other, the arms little within a seed: pairing resolves it
    base = {0: 0.80, 1: 0.90, 2: 0.95, 3: 0.85}
    arm = {0: 0.81, 1: 0.905, 2: 0.962, 3: 0.858}
    found = acc.seed_delta(runs(arm), runs(base), "final_val_accuracy")
    diffs = np.array([arm[s] - base[s] for s in base])
    ci = stats.ttest_rel(list(arm.values()), list(base.values())).confidence_interval(0.95)
    assert found["method"] == "paired" and found["df"] == 3
    assert found["delta"] == pytest.approx(diffs.mean())
    assert found["delta"] - found["ci95"] == pytest.approx(ci.low)
    welch = acc.seed_delta(
        runs(arm), runs({s + 10: v for s, v in base.items()}), "final_val_accuracy"
    )
    assert welch["method"] == "welch" and welch["ci95"] > 5 * found["ci95"]


def test_seeds_needed_for_one_point_is_the_fewest_that_resolve_it():
    base = {s: 0.9 for s in range(3)}
    arm = {0: 0.92, 1: 0.89, 2: 0.905}
    found = acc.seed_delta(runs(arm), runs(base), "final_val_accuracy")
    sd = np.std([arm[s] - base[s] for s in base], ddof=1)
    needed = int(found["seeds_for_1pt"])

    def half(m: int) -> float:
        return stats.t.ppf(0.975, m - 1) * sd / math.sqrt(m)

    assert half(needed) <= 0.01 < half(needed - 1)


def test_the_detectable_difference_has_80_percent_power():
    base = {s: 0.9 for s in range(10)}
    arm = {s: 0.9 + 0.01 * ((s * 7) % 5 - 2) for s in range(10)}
    found = acc.seed_delta(runs(arm), runs(base), "final_val_accuracy")
    se = np.std([arm[s] - base[s] for s in base], ddof=1) / math.sqrt(10)
    df, critical = 9, stats.t.ppf(0.975, 9)
    shift = found["mde80"] / se
    power = 1 - stats.nct.cdf(critical, df, shift) + stats.nct.cdf(-critical, df, shift)
    assert power == pytest.approx(0.8, abs=0.02)


def remedy_point(network: str, comm: str, img_s: float, half: float, batch: int) -> dict:
    return {**point(network, comm, img_s, batch), "img_s_ci95": half}


def remedy_lines(points: list[tuple]) -> list[str]:
    scaling = pd.DataFrame([remedy_point(*p) for p in points])
    table = remedy_gains.remedies_table(scaling, pd.DataFrame(), pd.DataFrame())
    return remedy_gains.finding_lines(table, pd.DataFrame())


def test_remedies_whose_gains_overlap_are_a_tie():
    [line] = remedy_lines(
        [
            ("1gbe", "none", 50.0, 1.0, 64),
            ("1gbe", "fp16", 64.0, 2.0, 64),
            ("1gbe", "powersgd-r2", 63.5, 2.0, 64),
            ("10gbe", "none", 100.0, 1.0, 64),
        ]
    )
    assert "fp16 (1.28x ±" in line and "powersgd-r2 (1.27x ±" in line
    assert "tie at per-device batch 64" in line and "helps most" not in line
    assert remedy_gains.RANK_RULE in line


def test_a_ranking_that_changes_with_the_batch_says_so():
    [line] = remedy_lines(
        [
            ("1gbe", "none", 50.0, 0.5, 64),
            ("1gbe", "fp16", 80.0, 0.5, 64),
            ("1gbe", "powersgd-r2", 60.0, 0.5, 64),
            ("1gbe", "none", 20.0, 0.2, 16),
            ("1gbe", "fp16", 22.0, 0.2, 16),
            ("1gbe", "powersgd-r2", 30.0, 0.2, 16),
            ("10gbe", "none", 100.0, 1.0, 64),
            ("10gbe", "none", 40.0, 1.0, 16),
        ]
    )
    assert "fp16 helps most at per-device batch 64, the largest measured: 1.60x" in line
    assert "the ranking changes with the batch: at per-device batch 16 powersgd-r2" in line


def test_a_fraction_above_one_says_why_and_the_post_comparison_says_what_differs():
    [line] = remedy_lines(
        [
            ("1gbe", "none", 50.0, 0.5, 64),
            ("1gbe", "powersgd-r2", 110.0, 0.5, 64),
            ("10gbe", "none", 100.0, 0.5, 64),
        ]
    )
    assert "recovering 109% of what 1gbe cost against 10gbe (over 100%: with it, 1gbe ran " in line
    assert "double buffering and fp16 all-reduce on 32 GPUs" in line
