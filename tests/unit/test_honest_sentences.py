"""Sentences the report leads with, on synthetic studies whose truth is known: a tie is named
as one, a clear winner is not, paired seeds give a paired interval, and an accuracy delta
too wide to tell anything is "not resolved" with the seeds that would resolve it."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_remedy_gains import point

from dpscale.analysis.answers import answer, remedy_gains, remedy_ranking, remedy_words, verdicts
from dpscale.analysis.laws import accuracy as acc
from dpscale.analysis.laws.words import delta_words


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
        "node_hours_per_1000_images": 1000 / img_s / 3600,  # one node
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
    assert "batch: 11 against 24" in text and "choose mxnet-dist" not in text
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


def test_one_device_is_faster_than_several_only_where_several_were_measured():
    alone = landing([cost_row("torch-dp", 4688, 5, 1), cost_row("torch-ddp", 4559, 6, 1)], [])
    assert "choose torch-dp on 1 node x 1 device: 4688 img/s (±5)" in alone
    assert "multi-device" not in alone.split("choose")[1].split(".")[0]
    beside = landing([cost_row("torch-dp", 200, 5, 1), cost_row("torch-ddp", 150, 6)], [])
    assert "faster than every multi-device layout measured" in beside


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
    return remedy_words.finding_lines(table, pd.DataFrame())


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
    assert remedy_ranking.RANK_RULE in line


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
    assert (
        "recovering 109% (95% CI 108% to 110%) of what 1gbe cost against 10gbe (over 100%: "
        "with it, 1gbe ran faster than 10gbe did without it)"
    ) in line
    assert "double buffering and fp16 all-reduce on 32 GPUs" in line


def test_the_fraction_recovered_interval_covers_the_truth_about_95_times_in_100():
    """Three independent points with known spread: the delta-method interval against the
    true fraction (1/50 - 1/80) / (1/50 - 1/100) = 75%."""
    rng = np.random.default_rng(7)
    truth = remedy_gains.fraction_recovered(50.0, 80.0, 100.0, False)
    sd = {50.0: 1.0, 80.0: 2.0, 100.0: 3.0}
    inside, trials = 0, 1000
    for _ in range(trials):
        none, remedy, fast = (value + rng.normal(0, sd[value]) for value in (50.0, 80.0, 100.0))
        value = remedy_gains.fraction_recovered(none, remedy, fast, False)
        half = remedy_gains.fraction_recovered_ci95(
            (none, 1.96 * sd[50.0]), (remedy, 1.96 * sd[80.0]), (fast, 1.96 * sd[100.0])
        )
        inside += abs(value - truth) <= half
    assert 0.93 < inside / trials < 0.97


def test_a_fraction_from_no_help_to_full_recovery_is_not_resolved():
    [line] = remedy_lines(
        [
            ("1gbe", "none", 50.0, 8.0, 64),
            ("1gbe", "fp16", 56.0, 8.0, 64),
            ("10gbe", "none", 62.0, 8.0, 64),
        ]
    )
    assert "what it recovers of what 1gbe cost against 10gbe is not resolved (95% interval " in line
    assert "from no help to full recovery" in line and "recovering" not in line
    # a gain whose interval reaches 1 helps nobody measurably
    assert "no remedy's gain is resolved at per-device batch 64" in line
    assert "helps most" not in line
    assert "its break-even batch is not fitted (without it: not fitted)" in line


def host_points() -> list[dict]:
    one_node = {**remedy_point("host", "none", 120.0, 2.0, 64), "nodes": 1, "devices_per_node": 2}
    return [
        remedy_point("1gbe", "none", 50.0, 1.0, 64),
        remedy_point("1gbe", "fp16", 70.0, 1.0, 64),
        remedy_point("10gbe", "none", 100.0, 1.0, 64),
        one_node,
    ]


def collective(network: str, nodes: int, busbw: float, spread: float, link: float) -> dict:
    return {
        "strategy": "torch-ddp",
        "comm": "none",
        "network": network,
        "nodes": nodes,
        "devices_per_node": 2 // nodes,
        "world_size": 2,
        "message_bytes": 44_000_000,
        "busbw_GB_s": busbw,
        "busbw_lo_GB_s": busbw - spread,
        "busbw_hi_GB_s": busbw + spread,
        "link_GB_s": link,
    }


def host_lines(collectives: list[dict]) -> list[str]:
    scaling = pd.DataFrame(host_points())
    table = remedy_gains.remedies_table(
        scaling, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(collectives)
    )
    return remedy_words.finding_lines(table, pd.DataFrame())


def test_a_fast_link_bound_by_the_host_gives_the_fraction_against_one_node_as_well():
    [line] = host_lines(
        [
            collective("10gbe", 2, 1.12, 0.02, 1.25),
            collective("host", 1, 1.15, 0.08, math.nan),
            collective("1gbe", 2, 0.118, 0.001, 0.125),
        ]
    )
    assert "10gbe's all-reduce (1.12 GB/s bus bandwidth) is within the spread of the same " in line
    assert "bound by the host, so against 1 node x 2 devices as well: recovering" in line
    # (1/50 - 1/70) / (1/50 - 1/120) = 49%
    assert "recovering 49% (95% CI" in line and "cost against 1 node x 2 devices" in line


def test_a_fast_link_far_below_its_line_rate_is_bound_by_the_host():
    [line] = host_lines(
        [collective("10gbe", 2, 0.59, 0.02, 1.25), collective("host", 1, 1.69, 0.05, math.nan)]
    )
    assert "10gbe's all-reduce reached 0.59 GB/s, 47% of its 1.25 GB/s line rate" in line


def test_a_fast_link_at_its_line_rate_is_the_reference_alone():
    [line] = host_lines(
        [collective("10gbe", 2, 1.15, 0.02, 1.25), collective("host", 1, 1.69, 0.05, math.nan)]
    )
    assert "bound by the host" not in line and "1 node x 2 devices" not in line


def test_remedies_tied_in_gain_and_break_even_are_told_apart_by_what_they_change():
    scaling = pd.DataFrame(
        [
            remedy_point("1gbe", "none", 50.0, 1.0, 64),
            remedy_point("1gbe", "powersgd-r2", 64.0, 2.0, 64),
            remedy_point("1gbe", "fp16", 63.5, 2.0, 64),
            remedy_point("10gbe", "none", 100.0, 1.0, 64),
        ]
    )
    layout = {k: v for k, v in point("1gbe", "none", 1.0).items() if k in remedy_gains.MODE_POINT}
    evens = pd.DataFrame(
        [
            {**layout, "comm": "powersgd-r2", "break_even_global_batch": 21.0},
            {**layout, "comm": "fp16", "break_even_global_batch": 21.8},
            {**layout, "comm": "none", "break_even_global_batch": 40.0},
        ]
    )
    for half, decided in ((3.0, "fp16"), (0.1, "powersgd-r2")):
        table = remedy_gains.remedies_table(
            scaling, pd.DataFrame(), evens.assign(break_even_global_batch_ci95=half)
        )
        [line] = remedy_words.finding_lines(table, pd.DataFrame())
        best = remedy_ranking.best_remedies(table).iloc[0]["comm"]
        assert best == decided
        if decided == "fp16":
            assert "their break-even batches overlap too: powersgd-r2 21 (95% CI 18 to 24)" in line
            assert "so by the one that changes the update least, fp16" in line
        else:
            assert "by the smaller break-even batch, powersgd-r2" in line


def test_break_even_batches_that_overlap_leave_the_choice_to_the_simpler_layout():
    two_nodes = {**cost_row("torch-ddp", 158, 8), "nodes": 2, "devices_per_node": 1}
    two_nodes["network"] = "10gbe"
    there = {**finding("torch-ddp", 14.3), "nodes": 2, "devices_per_node": 1, "network": "10gbe"}
    here = finding("torch-ddp", 17.9)
    costs = [two_nodes, cost_row("torch-ddp", 165, 12)]
    wide = landing(
        costs,
        [
            {**there, "break_even_global_batch_ci95": 4.0},
            {**here, "break_even_global_batch_ci95": 5.0},
        ],
    )
    assert (
        "their break-even global batches overlap: 18 (95% CI 12 to 23) and 15 (95% CI 10 to 19); "
        "so the layout with fewer nodes"
    ) in wide
    assert "choose torch-ddp on 1 node x 2 devices" in wide
    narrow = landing(
        costs,
        [
            {**there, "break_even_global_batch_ci95": 1.0},
            {**here, "break_even_global_batch_ci95": 1.0},
        ],
    )
    assert (
        "choose torch-ddp on 2 nodes x 1 device over 10gbe: it beats one device from the " in narrow
    )
    assert "smaller global batch: 15 (95% CI 13 to 16) against 18 (95% CI 16 to 19)" in narrow


def test_a_chosen_layout_states_its_break_even_interval():
    text = landing(
        [cost_row("torch-ddp", 150, 2)],
        [{**finding("torch-ddp", 12.7), "break_even_global_batch_ci95": 2.5}],
    )
    assert "it beats one device from global batch 13 (95% CI 10 to 16)" in text


def test_a_remedy_whose_gain_reaches_one_is_no_candidate_for_helping_most():
    points = [
        ("1gbe", "none", 90.0, 10.0, 64),
        ("1gbe", "fp16", 95.0, 20.0, 64),  # 1.06x ±0.25: overlaps PowerSGD's, and 1
        ("1gbe", "powersgd-r2", 118.0, 15.0, 64),  # 1.31x ±0.22
        ("10gbe", "none", 160.0, 5.0, 64),
    ]
    [line] = remedy_lines(points)
    assert "powersgd-r2 helps most at per-device batch 64, the largest measured: 1.31x" in line
    assert "; fp16 (1.06x ±0.25): gain not resolved from none (its interval reaches 1)" in line
    scaling = pd.DataFrame([remedy_point(*p) for p in points])
    table = remedy_gains.remedies_table(scaling, pd.DataFrame(), pd.DataFrame())
    assert list(remedy_ranking.best_remedies(table)["comm"]) == ["powersgd-r2"]
    nobody = [p if p[1] != "powersgd-r2" else (*p[:2], 97.0, 15.0, 64) for p in points]
    scaling = pd.DataFrame([remedy_point(*p) for p in nobody])
    table = remedy_gains.remedies_table(scaling, pd.DataFrame(), pd.DataFrame())
    assert remedy_ranking.best_remedies(table).empty
    [line] = remedy_words.finding_lines(table, pd.DataFrame())
    assert "no remedy's gain is resolved at per-device batch 64" in line


def test_what_a_remedy_hides_is_the_step_time_it_saves_beyond_compute():
    one_device = {**remedy_point("host", "none", 80.0, 0.8, 16), "nodes": 1, "world_size": 1}
    points = [
        remedy_point("1gbe", "none", 60.0, 0.6, 16),  # 32 images: 0.533 s a step
        remedy_point("1gbe", "delayed", 80.0, 0.8, 16),  # 0.400 s
        remedy_point("10gbe", "none", 140.0, 1.4, 16),
        {**one_device, "devices_per_node": 1},  # 16 images: 0.200 s a step
    ]
    table = remedy_gains.remedies_table(pd.DataFrame(points), pd.DataFrame(), pd.DataFrame())
    row = table[table["network"] == "1gbe"].iloc[0]
    assert row["exposed_comm_s"] == pytest.approx(0.2)
    assert row["exposed_comm_none_s"] == pytest.approx(32 / 60 - 0.2)
    assert row["hidden_comm_s"] == pytest.approx(32 / 60 - 0.4)
    assert row["exposed_comm_s_ci95"] == pytest.approx(math.hypot(0.4 * 0.01, 0.2 * 0.01))
    [line] = remedy_words.finding_lines(table, pd.DataFrame())
    assert (
        "a step waits 0.20 s (±0.00) for communication beyond one device's step, against " in line
    )
    assert "0.33 s without: it hides 0.13 s (±0.01) per step" in line


def test_a_break_even_the_fits_cannot_bound_says_so():
    from dpscale.analysis.laws.words import even_interval

    assert even_interval(12.0, math.inf) == (
        " (95% interval unbounded: the fits cannot tell the per-image gain from zero)"
    )
    assert even_interval(12.7, 2.5) == " (95% CI 10 to 16)"
    assert even_interval(math.inf, 3.0) == "" and even_interval(0.0, 1.0) == ""
    row = {"world_size": 2, "break_even_global_batch": 12.0, "speedup": math.nan}
    text = verdicts.throughput_verdict({**row, "break_even_global_batch_ci95": math.inf})
    assert "from global batch 12 (95% interval unbounded" in text


def test_what_the_earlier_criteria_cannot_separate_goes_to_fewer_node_hours_not_a_name():
    text = landing(
        [
            cost_row("torch-ddp", 70, 60),
            cost_row("horovod-tf", 66, 14, devices=1),
            cost_row("torch-dp", 68, 14, devices=1),
        ],
        [finding("torch-ddp", 20.0)],
    )
    # the name that sorts first (horovod-tf) is behind on the mean: it is not chosen
    assert (
        "choose torch-dp on 1 node x 1 device: one device needs no break-even batch; the tie "
        "rule's earlier criteria cannot separate torch-dp on 1 node x 1 device and horovod-tf on "
        "1 node x 1 device, so the one with fewer node-hours per 1,000 images (means, within "
        "each other's intervals): 0.00408 against 0.00421"
    ) in text
    assert "by name" not in text


def test_layouts_equal_on_every_criterion_are_both_named_and_none_is_chosen_by_name():
    for first, second in (("a-strategy", "z-strategy"), ("z-strategy", "a-strategy")):
        text = landing(
            [cost_row(first, 68, 14, devices=1), cost_row(second, 68, 14, devices=1)], []
        )
        assert (
            f"the tie rule cannot separate {first} on 1 node x 1 device and {second} on 1 node x "
            "1 device: either serves equally"
        ) in text
        assert "by name" not in text and answer.TIE_RULE in text
