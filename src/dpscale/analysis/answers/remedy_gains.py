"""What helps when the network is too slow: each communication remedy (plan.remedies) beside the
same layout without one, measured.

Per remedy cell group (strategy, model, network, layout, per-device batch): its img/s, its
speedup over one device, its gain over the same layout without a remedy, the fraction of the
slow network's cost it recovers, and its break-even global batch. The fraction recovered is
ChainerMN's measure (post 003): with time per image t, on the slow network N and the fastest
network F of the same layout,

    recovered = (t_none,N - t_remedy,N) / (t_none,N - t_none,F)

(1: as fast as on F; 0: no help; their published remedy: (21.3 h - 7.71 h) / (21.3 h - 6.96 h)
= 95%). Which remedy helps most: remedy_ranking; in words: remedy_words; the price in
accuracy: remedy_accuracy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.answers.findings import matching_rows
from dpscale.analysis.laws import fits
from dpscale.analysis.laws.commmodel.remedy_fit import remedy_ratios
from dpscale.plan.columns import MODE_LAYOUT, NETWORK, SPREAD
from dpscale.plan.remedies import NO_REMEDY

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
