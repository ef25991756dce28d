"""What helps when the network is too slow: each communication remedy (plan.remedies) beside the
same layout without one, measured, with its price in accuracy.

Per remedy cell group (strategy, model, network, layout, per-device batch): its img/s, its
speedup over one device, its gain over the same layout without a remedy, the fraction of the
slow network's cost it recovers, and its break-even global batch. The fraction recovered is
ChainerMN's measure (post 003): with time per image t, on the slow network N and the fastest
network F of the same layout,

    recovered = (t_none,N - t_remedy,N) / (t_none,N - t_none,F)

(1: as fast as on F; 0: no help; their published remedy: (21.3 h - 7.71 h) / (21.3 h - 6.96 h)
= 95%). The accuracy cost is each remedy's training runs against the same configuration's
runs without a remedy: the difference of mean final accuracy with its 95% interval (paired by seed).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis import fits
from dpscale.analysis.accuracy import resolved, seed_delta
from dpscale.analysis.commmodel.remedy_fit import remedy_ratios
from dpscale.analysis.findings import matching_rows
from dpscale.analysis.fits import intervals_overlap
from dpscale.analysis.words import batch_words, even_interval, readable_model
from dpscale.plan.columns import DEVICES_PER_NODE, LAYOUT, MODE_LAYOUT, NETWORK, NODES, RUN, SPREAD
from dpscale.plan.layout import HOST_NETWORK, Layout
from dpscale.plan.remedies import NO_REMEDY, name_of

MODE_POINT = [*MODE_LAYOUT, "batch_per_device"]
REMEDY_COLUMNS = [
    *MODE_POINT,
    "comm",
    "img_s",
    "img_s_ci95",
    "speedup",
    "speedup_ci95",
    "img_s_none",
    "gain_vs_none",
    "gain_vs_none_ci95",
    "fastest_network",
    "fraction_recovered",
    "fraction_recovered_ci95",
    "reference_host_bound",
    "fraction_recovered_vs_one_node",
    "fraction_recovered_vs_one_node_ci95",
    "exposed_comm_s",
    "exposed_comm_s_ci95",
    "exposed_comm_none_s",
    "hidden_comm_s",
    "hidden_comm_s_ci95",
    "wire_ratio",
    "collective_bytes",
    "collective_wire_bytes",
    "collective_busbw_GB_s",
    "collective_wire_busbw_GB_s",
    "collective_busbw_none_GB_s",
    "break_even_global_batch",
    "break_even_global_batch_ci95",
    "break_even_none",
    "break_even_none_ci95",
]
# the collectives table's layout columns a remedy row is matched on
COLLECTIVE_KEY = ["strategy", NETWORK, *SPREAD]
ACCURACY_KEY = LAYOUT
ACCURACY_COLUMNS = [
    *ACCURACY_KEY,
    "batch_per_device",
    "lr_rule",
    "comm",
    "seeds",
    "final_mean",
    "final_none",
    "accuracy_delta_vs_none",
    "accuracy_delta_vs_none_ci95",
    "accuracy_delta_vs_none_df",
    "accuracy_delta_vs_none_method",
    "accuracy_delta_vs_none_seeds_for_1pt",
    "time_to_target_s",
    "time_to_target_none_s",
]
# ChainerMN's published run (post 003): 10 GbE with double buffering and fp16 all-reduce
# recovered this fraction of the time 10 GbE cost against InfiniBand FDR.
CHAINERMN_RECOVERED = (21.3 - 7.71) / (21.3 - 6.96)


def remedies_table(
    scaling: pd.DataFrame,
    cells: pd.DataFrame,
    break_even: pd.DataFrame,
    collectives: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per remedy and measured point across processes (module docstring), with the
    remedy's all-reduce of the largest message where collectives cells measured it: its bytes
    on the wire and bus bandwidth, on the logical message (what training gets) and on the
    bytes sent (what the link carried)."""
    if scaling.empty or "comm" not in scaling:
        return pd.DataFrame(columns=REMEDY_COLUMNS)
    multi = scaling[scaling["world_size"] > 1]
    none = multi[multi["comm"] == NO_REMEDY].set_index(MODE_POINT)
    single = scaling[(scaling["world_size"] == 1) & (scaling["comm"] == NO_REMEDY)]
    ratios = remedy_ratios(cells)
    rows = []
    for row in multi[multi["comm"] != NO_REMEDY].to_dict("records"):
        key = tuple(row[k] for k in MODE_POINT)
        if key not in none.index:
            continue
        plain = none.loc[key]
        fastest, fast = _fastest_network(none, row)
        one_node = _one_node(none, row)
        rows.append(
            {
                **{k: row[k] for k in MODE_POINT},
                "comm": row["comm"],
                "img_s": row["img_s"],
                "img_s_ci95": row["img_s_ci95"],
                "speedup": row["speedup"],
                "speedup_ci95": row["speedup_ci95"],
                "img_s_none": plain["img_s"],
                "gain_vs_none": row["img_s"] / plain["img_s"],
                "gain_vs_none_ci95": fits.ratio_ci95(
                    row["img_s"], row["img_s_ci95"], plain["img_s"], plain["img_s_ci95"]
                ),
                "fastest_network": fastest,
                **_recovered(plain, row, fast, "", row["network"] == fastest),
                **_recovered(plain, row, one_node, "_vs_one_node", row["nodes"] == 1),
                "reference_host_bound": host_bound(collectives, row, fastest),
                **exposed_communication(row, plain, _compute_only(single, row)),
                "wire_ratio": ratios.get((row["strategy"], row["comm"]), math.nan),
                **_largest_collective(collectives, row),
                **_break_even(break_even, row, row["comm"], "break_even_global_batch"),
                **_break_even(break_even, row, NO_REMEDY, "break_even_none"),
            }
        )
    return pd.DataFrame(rows).reindex(columns=REMEDY_COLUMNS)


def fraction_recovered(
    none_img_s: float, remedy_img_s: float, fast_img_s: float, is_fastest: bool
) -> float:
    """ChainerMN's fraction (module docstring); NaN on the fastest network itself or where
    the slow network cost nothing."""
    if is_fastest or not np.isfinite(fast_img_s):
        return math.nan
    cost = 1 / none_img_s - 1 / fast_img_s
    if cost <= 0:
        return math.nan
    return (1 / none_img_s - 1 / remedy_img_s) / cost


def fraction_recovered_ci95(
    none: tuple[float, float], remedy: tuple[float, float], fast: tuple[float, float]
) -> float:
    """95% half-width of fraction_recovered from each point's (img/s, half-width), by the
    delta method: f = (a - b) / (a - c) in times per image a = 1/none, b = 1/remedy,
    c = 1/fast, the three points measured independently."""
    a, b, c = 1 / none[0], 1 / remedy[0], 1 / fast[0]
    cost = a - c
    if cost <= 0:
        return math.nan
    return math.hypot(
        (b - c) / cost**2 * none[1] / none[0] ** 2,
        1 / cost * remedy[1] / remedy[0] ** 2,
        (a - b) / cost**2 * fast[1] / fast[0] ** 2,
    )


NO_POINT = (math.nan, math.nan)


def _compute_only(single: pd.DataFrame, row: dict[str, Any]) -> tuple[float, float]:
    """One device at the same per-device batch (img/s, half-width): a step without any
    all-reduce."""
    return _first_point(_same_point(single, row))


def _same_point(frame: pd.DataFrame, row: dict[str, Any], **where: Any) -> pd.DataFrame:
    """The rows of ``frame`` (point means, index reset) of the row's strategy, model, mode
    and per-device batch, and the layout ``where`` names."""
    same = matching_rows(frame, row, ["strategy", "model", "mode", "batch_per_device"])
    return matching_rows(same, where, list(where))


def _first_point(same: pd.DataFrame) -> tuple[float, float]:
    if same.empty:
        return NO_POINT
    return float(same["img_s"].iloc[0]), float(same["img_s_ci95"].iloc[0])


def _step(images: float, img_s: float, half: float) -> tuple[float, float]:
    """Seconds per step of ``images`` at ``img_s`` (± half), and the step's half-width."""
    return images / img_s, images * half / img_s**2


def exposed_communication(
    row: dict[str, Any], plain: pd.Series, compute: tuple[float, float]
) -> dict[str, float]:
    """Communication the step waits for, with the remedy and without: each step's time minus
    one device's step at the same per-device batch (compute only); and what the remedy hides,
    the difference. Seconds per step, 95% half-widths from the three points' (independent)."""
    batch, world = row["batch_per_device"], row["world_size"]
    if not np.isfinite(compute[0]):
        return {}
    alone = _step(batch, *compute)
    mine = _step(batch * world, row["img_s"], row["img_s_ci95"])
    without = _step(batch * world, plain["img_s"], plain["img_s_ci95"])
    return {
        "exposed_comm_s": mine[0] - alone[0],
        "exposed_comm_s_ci95": math.hypot(mine[1], alone[1]),
        "exposed_comm_none_s": without[0] - alone[0],
        "hidden_comm_s": without[0] - mine[0],
        "hidden_comm_s_ci95": math.hypot(mine[1], without[1]),
    }


def _recovered(
    plain: pd.Series,
    row: dict[str, Any],
    reference: tuple[float, float],
    suffix: str,
    is_reference: bool,
) -> dict[str, float]:
    """The fraction recovered against a reference point (img/s, half-width) and its interval."""
    name = f"fraction_recovered{suffix}"
    value = fraction_recovered(plain["img_s"], row["img_s"], reference[0], is_reference)
    if not np.isfinite(value):
        return {name: math.nan, f"{name}_ci95": math.nan}
    half = fraction_recovered_ci95(
        (plain["img_s"], plain["img_s_ci95"]), (row["img_s"], row["img_s_ci95"]), reference
    )
    return {name: value, f"{name}_ci95": half}


def _one_node(none: pd.DataFrame, row: dict[str, Any]) -> tuple[float, float]:
    """The same number of devices on one node, without a remedy (img/s, half-width): the
    reference where no link between nodes binds."""
    return _first_point(_same_point(none.reset_index(), row, nodes=1, world_size=row["world_size"]))


# A link whose all-reduce reaches less than this fraction of its line rate is not what binds
HOST_BOUND_LINE_FRACTION = 0.5


def host_bound(collectives: pd.DataFrame | None, row: dict[str, Any], network: str | None) -> str:
    """Why ``network``'s all-reduce (largest message, no remedy) is bound by the host rather
    than its link, in words ("" where it is not, or no collectives cell says): its bus
    bandwidth lies within the spread of the one-node cell's (the same ranks without any
    link), or below HOST_BOUND_LINE_FRACTION of the link's line rate."""
    if network is None or collectives is None or collectives.empty or "comm" not in collectives:
        return ""
    plain = collectives[
        (collectives["comm"] == NO_REMEDY)
        & (collectives["strategy"] == row["strategy"])
        & (collectives["world_size"] == row["world_size"])
    ]
    plain = plain[plain["message_bytes"] == plain["message_bytes"].max()]
    fast = plain[(plain["network"] == network) & (plain["nodes"] == row["nodes"])]
    local = plain[plain["nodes"] == 1]
    if fast.empty:
        return ""
    busbw = float(fast["busbw_GB_s"].iloc[0])
    if not local.empty:
        low, high = (float(local[k].iloc[0]) for k in ("busbw_lo_GB_s", "busbw_hi_GB_s"))
        if low <= busbw <= high:
            return (
                f"{network}'s all-reduce ({busbw:.2f} GB/s bus bandwidth) is within the spread "
                f"of the same ranks on one node ({low:.2f}-{high:.2f} GB/s): bound by the host"
            )
    line = float(fast["link_GB_s"].iloc[0]) if "link_GB_s" in fast else math.nan
    if np.isfinite(line) and busbw < HOST_BOUND_LINE_FRACTION * line:
        return (
            f"{network}'s all-reduce reached {busbw:.2f} GB/s, {busbw / line:.0%} of its "
            f"{line:.2f} GB/s line rate: bound by the host"
        )
    return ""


def _fastest_network(
    none: pd.DataFrame, row: dict[str, Any]
) -> tuple[str | None, tuple[float, float]]:
    """The network on which the same layout and batch ran fastest without a remedy, with its
    img/s and half-width."""
    if row["nodes"] == 1:
        return None, NO_POINT
    same = _same_point(
        none.reset_index(), row, nodes=row["nodes"], devices_per_node=row["devices_per_node"]
    )
    if same.empty:
        return None, NO_POINT
    best = same.loc[same["img_s"].idxmax()]
    return best["network"], (float(best["img_s"]), float(best["img_s_ci95"]))


def _largest_collective(collectives: pd.DataFrame | None, row: dict[str, Any]) -> dict[str, Any]:
    if collectives is None or collectives.empty or "comm" not in collectives:
        return {}
    same = collectives[np.logical_and.reduce([collectives[k] == row[k] for k in COLLECTIVE_KEY])]
    same = same[same["message_bytes"] == same["message_bytes"].max()]
    mine, plain = same[same["comm"] == row["comm"]], same[same["comm"] == NO_REMEDY]
    if mine.empty:
        return {}
    first = mine.iloc[0]
    return {
        "collective_bytes": first["message_bytes"],
        "collective_wire_bytes": first["wire_bytes"],
        "collective_busbw_GB_s": first["busbw_GB_s"],
        "collective_wire_busbw_GB_s": first["wire_busbw_GB_s"],
        "collective_busbw_none_GB_s": plain["busbw_GB_s"].iloc[0] if len(plain) else math.nan,
    }


def _break_even(table: pd.DataFrame, row: dict[str, Any], comm: str, name: str) -> dict[str, float]:
    """The layout's break-even global batch with ``comm`` and its 95% half-width."""
    empty = {name: math.nan, f"{name}_ci95": math.nan}
    if table.empty or "comm" not in table:
        return empty
    found = table[
        (table["comm"] == comm) & np.logical_and.reduce([table[k] == row[k] for k in MODE_LAYOUT])
    ]
    if found.empty:
        return empty
    first = found.iloc[0]
    return {
        name: float(first["break_even_global_batch"]),
        f"{name}_ci95": float(first.get("break_even_global_batch_ci95", math.nan)),
    }


def accuracy_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Each remedy's training runs against the same configuration's runs without one."""
    if runs.empty or "comm" not in runs:
        return pd.DataFrame(columns=ACCURACY_COLUMNS)
    ok = runs[runs["status"] == "ok"]
    config = [*ACCURACY_KEY, "batch_per_device", "lr_rule", "dataset"]
    rows = []
    for key, group in ok[ok["comm"] != NO_REMEDY].groupby([*config, "comm"], sort=True):
        named = dict(zip([*config, "comm"], key, strict=True))
        plain = ok[
            (ok["comm"] == NO_REMEDY) & np.logical_and.reduce([ok[k] == named[k] for k in config])
        ]
        if plain.empty:
            continue
        found = seed_delta(group, plain, "final_val_accuracy")
        rows.append(
            {
                **named,
                "seeds": group["seed"].nunique(),
                "final_mean": group["final_val_accuracy"].mean(),
                "final_none": plain["final_val_accuracy"].mean(),
                "accuracy_delta_vs_none": found["delta"],
                "accuracy_delta_vs_none_ci95": found["ci95"],
                "accuracy_delta_vs_none_df": found["df"],
                "accuracy_delta_vs_none_method": found["method"],
                "accuracy_delta_vs_none_seeds_for_1pt": found["seeds_for_1pt"],
                "time_to_target_s": _all_reached(group),
                "time_to_target_none_s": _all_reached(plain),
            }
        )
    return pd.DataFrame(rows).reindex(columns=ACCURACY_COLUMNS)


def _all_reached(runs: pd.DataFrame) -> float:
    """Mean time to the target accuracy, only when every seed reached it."""
    times = runs["time_to_target_s"].astype(float)
    return float(times.mean()) if times.notna().all() else math.nan


# How far each remedy's update departs from synchronous SGD on exact gradients, least first:
# a bucket size changes only when bytes move; fp16 and bf16 round the gradients; delayed
# applies them a step late; PowerSGD and 2-bit compress them (error feedback keeps the rest).
FIDELITY = (NO_REMEDY, "push-pull", "fp16", "bf16", "delayed", "delayed-fp16", "powersgd", "2bit")
RANK_RULE = (
    "the largest gain over no remedy at the largest per-device batch measured, among gains "
    "resolved above 1; where gains' 95% intervals overlap, the smaller break-even global "
    "batch; where those overlap too, the remedy that changes the update least (a bucket size, "
    "then " + ", ".join(FIDELITY[1:]) + ")"
)
CHAINERMN_SETUP = "double buffering and fp16 all-reduce on 32 GPUs, 10 GbE against InfiniBand"


def _slow_points(table: pd.DataFrame) -> pd.DataFrame:
    """Remedy rows on a network slower than the fastest one measured for their layout."""
    between_nodes = table[table["fastest_network"].notna()]
    return between_nodes[between_nodes["network"] != between_nodes["fastest_network"]]


def _helps(point: pd.DataFrame) -> pd.Series:
    """Whether each remedy's gain is resolved above 1 (its whole 95% interval)."""
    return point["gain_vs_none"] - point["gain_vs_none_ci95"].fillna(0.0) > 1


def _tied_at(point: pd.DataFrame) -> pd.DataFrame:
    """The remedies at one measured point whose gain intervals overlap the largest gain's,
    largest gain first; among those whose gain is resolved above 1 where any is."""
    helping = point[_helps(point)]
    ordered = (helping if not helping.empty else point).sort_values("gain_vs_none", ascending=False)
    half = ordered["gain_vs_none_ci95"].fillna(0.0)
    top = ordered["gain_vs_none"].iloc[0]
    return ordered[top - ordered["gain_vs_none"] <= half + half.iloc[0]]


def _fidelity(comm: str) -> int:
    """A remedy key's place in FIDELITY (``powersgd-r2`` -> powersgd); unknown ones last."""
    name = name_of(comm)
    return FIDELITY.index(name) if name in FIDELITY else len(FIDELITY)


def _even(row: dict[str, Any]) -> tuple[float, float]:
    even = row["break_even_global_batch"]
    return (math.inf, math.nan) if pd.isna(even) else (float(even), row[f"{EVEN}_ci95"])


EVEN = "break_even_global_batch"


def _pick(tied: pd.DataFrame) -> tuple[dict[str, Any], str]:
    """Of tied remedies, RANK_RULE's choice after the gain: the smaller break-even batch where
    the intervals separate it, else the remedy that changes the update least; and the words
    for the criterion that decided."""
    rows = tied.to_dict("records")
    if len(rows) == 1:
        return rows[0], ""
    smallest = min((_even(row) for row in rows), key=lambda even: even[0])
    kept = [row for row in rows if intervals_overlap(*_even(row), *smallest)]
    if len(kept) < len(rows):
        chosen = min(kept, key=lambda row: (_even(row)[0], _fidelity(row["comm"])))
        return chosen, "by the smaller break-even batch"
    chosen = min(kept, key=lambda row: (_fidelity(row["comm"]), row["comm"]))
    evens = " and ".join(f"{row['comm']} {_even_words(*_even(row))}" for row in kept)
    return chosen, (
        f"their break-even batches overlap too: {evens}; so by the one that changes the "
        "update least"
    )


@dataclass(frozen=True)
class Ranking:
    """RANK_RULE's outcome for one layout on one slow network: the pick, the remedies tied
    with it, the one that gains most at the smallest batch where that is another (else None),
    the words for the criterion that decided, and the remedies whose gain is not resolved
    above 1 at the largest batch while another's is."""

    chosen: dict[str, Any]
    tied: pd.DataFrame
    other: dict[str, Any] | None
    why: str
    unresolved: pd.DataFrame

    @property
    def helps(self) -> bool:
        return self.chosen["gain_vs_none"] - _zero_if_nan(self.chosen["gain_vs_none_ci95"]) > 1


def _zero_if_nan(value: float) -> float:
    return 0.0 if pd.isna(value) else float(value)


def _ranked(table: pd.DataFrame) -> Iterator[Ranking]:
    """Per strategy, model, slow network and layout: RANK_RULE's Ranking."""
    if table.empty:
        return
    for _, layout in _slow_points(table).groupby(MODE_LAYOUT, sort=True):
        batches = sorted(layout["batch_per_device"].unique())
        largest = layout[layout["batch_per_device"] == batches[-1]]
        tied = _tied_at(largest)
        chosen, why = _pick(tied)
        other = None
        if len(batches) > 1:
            at_smallest = _tied_at(layout[layout["batch_per_device"] == batches[0]])
            if chosen["comm"] not in set(at_smallest["comm"]):
                other = at_smallest.iloc[0].to_dict()
        helps = _helps(largest)
        unresolved = largest[~helps] if helps.any() else largest.iloc[0:0]
        yield Ranking(chosen, tied[tied["comm"] != chosen["comm"]], other, why, unresolved)


def best_remedies(table: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, model, slow network and layout, the remedy RANK_RULE picks, where its
    gain is resolved above 1."""
    if table.empty:
        return table
    return pd.DataFrame([r.chosen for r in _ranked(table) if r.helps])


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


def _even_words(even: float, half: float = math.nan) -> str:
    if math.isnan(even):
        return "not fitted"
    return batch_words(even) + even_interval(even, half)


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
    without = _even_words(row["break_even_none"], row["break_even_none_ci95"])
    if pd.isna(row[EVEN]):
        return f"its break-even batch is not fitted (without it: {without})"
    return (
        f"it beats 1 device from global batch {_even_words(row[EVEN], row[f'{EVEN}_ci95'])} "
        f"(without: {without})"
    )


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
    for ranking in _ranked(table):
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


def findings_columns(
    findings: pd.DataFrame, table: pd.DataFrame, accuracy: pd.DataFrame
) -> pd.DataFrame:
    """findings.csv's remedy columns: per finding row (strategy, model, network, layout),
    the best remedy, its gain over no remedy and its accuracy delta."""
    best = best_remedies(table)
    out = findings.copy()
    for column in (
        "best_remedy",
        "best_remedy_gain",
        "best_remedy_recovered",
        "best_remedy_accuracy_delta",
    ):
        out[column] = math.nan if column != "best_remedy" else None
    if best.empty or findings.empty:
        return out
    keys = [k for k in (*RUN, NODES, NETWORK, DEVICES_PER_NODE) if k in findings]
    for index, row in out.iterrows():
        match = best[np.logical_and.reduce([best[k] == row[k] for k in keys])]
        if match.empty:
            continue
        top = match.iloc[0]
        out.at[index, "best_remedy"] = top["comm"]
        out.at[index, "best_remedy_gain"] = top["gain_vs_none"]
        out.at[index, "best_remedy_recovered"] = top["fraction_recovered"]
        delta = (
            accuracy[(accuracy["strategy"] == top["strategy"]) & (accuracy["comm"] == top["comm"])]
            if not accuracy.empty
            else accuracy
        )
        if len(delta):
            out.at[index, "best_remedy_accuracy_delta"] = delta["accuracy_delta_vs_none"].iloc[0]
    return out
