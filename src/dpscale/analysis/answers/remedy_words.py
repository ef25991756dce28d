"""Per slow network and layout, the remedy ranking in words: the pick (or the tie), its gain
and speedup, what it recovers of the slow network's cost, and its price in accuracy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.answers.remedy_gains import CHAINERMN_RECOVERED
from dpscale.analysis.answers.remedy_ranking import (
    EVEN,
    RANK_RULE,
    Ranking,
    break_even_words,
    ranked,
)
from dpscale.analysis.laws.accuracy import resolved
from dpscale.analysis.laws.words import readable_model
from dpscale.plan.layout import HOST_NETWORK, Layout

CHAINERMN_SETUP = "double buffering and fp16 all-reduce on 32 GPUs, 10 GbE against InfiniBand"


def _gain(row: dict[str, Any]) -> str:
    return f"{row['comm']} ({row['gain_vs_none']:.2f}x ±{row['gain_vs_none_ci95']:.2f})"


def _ranking_words(ranking: Ranking) -> str:
    """Which remedy helps most at the largest batch, by RANK_RULE, said with its numbers."""
    row, tied = ranking.chosen, ranking.tied
    batch = row["batch_per_device"]
    img_s = f"{row['img_s']:.1f} ±{row['img_s_ci95']:.1f} img/s"
    if not ranking.helps:
        named = " and ".join(_gain(r) for r in [row, *tied.to_dict("records")])
        return (
            f"no remedy's gain is resolved at per-device batch {batch}, the largest measured: "
            f"{named} against the img/s without one, each interval reaching 1"
        )
    if tied.empty:
        text = (
            f"{row['comm']} helps most at per-device batch {batch}, the largest measured: "
            f"{row['gain_vs_none']:.2f}x (±{row['gain_vs_none_ci95']:.2f}) the img/s without a "
            f"remedy ({img_s})"
        )
    else:
        named = " and ".join(_gain(r) for r in [row, *tied.to_dict("records")])
        text = (
            f"{named} tie at per-device batch {batch}, the largest measured (their gains' 95% "
            f"intervals overlap); {ranking.why}, {row['comm']} ({img_s})"
        )
    if not ranking.unresolved.empty:
        others = " and ".join(_gain(r) for r in ranking.unresolved.to_dict("records"))
        text += f"; {others}: gain not resolved from none (its interval reaches 1)"
    return text


def fraction_words(value: float, half: float, slow: str, reference: str) -> str:
    """A fraction recovered with its 95% interval, in words; one whose interval reaches from
    no help (0) to full recovery (1) is "not resolved", without its point value; above 100%,
    why."""
    cost = f"what {slow} cost against {reference}"
    if not np.isfinite(half):
        return f"recovering {value:.0%} of {cost} (no interval)"
    low, high = value - half, value + half
    if low <= 0 and high >= 1:
        return (
            f"what it recovers of {cost} is not resolved (95% interval {low:.0%} to "
            f"{high:.0%}, from no help to full recovery; repeats of the three cells would "
            "narrow it)"
        )
    text = f"recovering {value:.0%} (95% CI {low:.0%} to {high:.0%}) of {cost}"
    if low > 1:
        text += f" (over 100%: with it, {slow} ran faster than {reference} did without it)"
    elif value > 1:
        text += f" (over 100% by its point value only: within the noise, as fast as {reference})"
    return text


def _recovered_words(row: dict[str, Any]) -> str:
    """The fraction against the fastest network; where that network's all-reduce is bound
    by the host, also against the same devices on one node, and why."""
    if not np.isfinite(row["fraction_recovered"]):
        return ""
    slow, fast = row["network"], row["fastest_network"]
    text = ", " + fraction_words(
        row["fraction_recovered"], row["fraction_recovered_ci95"], slow, fast
    )
    one_node = row.get("fraction_recovered_vs_one_node", math.nan)
    bound = row.get("reference_host_bound")
    if isinstance(bound, str) and bound and np.isfinite(one_node):
        where = Layout(1, int(row["world_size"])).words(HOST_NETWORK)
        text += f"; {bound}, so against {where} as well: " + fraction_words(
            one_node, row["fraction_recovered_vs_one_node_ci95"], slow, where
        )
    return text + (
        f" (ChainerMN's published remedy recovered {CHAINERMN_RECOVERED:.0%} with "
        f"{CHAINERMN_SETUP})"
    )


def _exposed_words(row: dict[str, Any]) -> str:
    """How long a step waits for communication with the remedy and without (the step's time
    beyond one device's at the same per-device batch), and what the remedy hides."""
    exposed = row.get("exposed_comm_s", math.nan)
    if pd.isna(exposed):
        return ""
    return (
        f"; a step waits {exposed:.2f} s (±{row['exposed_comm_s_ci95']:.2f}) for communication "
        f"beyond one device's step, against {row['exposed_comm_none_s']:.2f} s without: it "
        f"hides {row['hidden_comm_s']:.2f} s (±{row['hidden_comm_s_ci95']:.2f}) per step"
    )


def _beats_words(row: dict[str, Any]) -> str:
    """From which global batch the layout beats one device with the remedy, and without."""
    without = break_even_words(row["break_even_none"], row["break_even_none_ci95"])
    if pd.isna(row[EVEN]):
        return f"its break-even batch is not fitted (without it: {without})"
    even = break_even_words(row[EVEN], row[f"{EVEN}_ci95"])
    return f"it beats 1 device from global batch {even} (without: {without})"


def _other_batch_words(other: dict[str, Any] | None) -> str:
    if other is None:
        return ""
    return (
        f"; the ranking changes with the batch: at per-device batch "
        f"{other['batch_per_device']} {other['comm']} gains most "
        f"({other['gain_vs_none']:.2f}x ±{other['gain_vs_none_ci95']:.2f})"
    )


def finding_lines(table: pd.DataFrame, accuracy: pd.DataFrame) -> list[str]:
    """In words, per slow network and layout: the remedy RANK_RULE picks (or the tie), its
    gain and speedup, what it recovers, and its accuracy cost (or that it was not measured)."""
    lines = []
    for ranking in ranked(table):
        row = ranking.chosen
        layout = Layout.from_row(row).words(row["network"])
        lines.append(
            f"What helps on {row['network']}: for {readable_model(row['model'])}, "
            f"{row['strategy']} on {layout}, {_ranking_words(ranking)} (ranked by "
            f"{RANK_RULE}); speedup {row['speedup']:.2f} (±{row['speedup_ci95']:.2f}) over 1 "
            f"device{_exposed_words(row)}; {_beats_words(row)}{_recovered_words(row)}"
            f"{_other_batch_words(ranking.other)}; {_accuracy_words(row, accuracy)}."
        )
    return lines


def _accuracy_words(row: dict[str, Any], accuracy: pd.DataFrame) -> str:
    """The remedy's accuracy cost: its numerics do not depend on the link, so training on
    another layout of the same strategy counts (the sentence says which)."""
    same = (
        accuracy[(accuracy["strategy"] == row["strategy"]) & (accuracy["comm"] == row["comm"])]
        if not accuracy.empty
        else accuracy
    )
    if same.empty:
        return "its accuracy cost is not measured (no training runs with it)"
    same = same.assign(_here=same["network"] != row["network"]).sort_values("_here")
    best = same.iloc[0]
    half = best["accuracy_delta_vs_none_ci95"]
    where = Layout.from_row(best).words(best["network"])
    source = f"{readable_model(best['model'])} on {where}"
    if np.isfinite(half) and not resolved(half):
        needed = best.get("accuracy_delta_vs_none_seeds_for_1pt", math.nan)
        more = f"; about {needed:,.0f} would resolve ±1 point" if np.isfinite(needed) else ""
        return (
            f"its final accuracy against the same training without it is not resolved "
            f"({best['seeds']} seeds: 95% interval ±{half * 100:.1f} points{more}; {source})"
        )
    interval = f" (±{half * 100:.1f})" if np.isfinite(half) else " (one seed: no interval)"
    return (
        f"final accuracy {best['accuracy_delta_vs_none'] * 100:+.1f} points{interval} against "
        f"the same training without it ({best['seeds']} seeds, {source})"
    )
