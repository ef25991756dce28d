"""What a layout costs: node-hours and money per 1,000 images, per epoch, for a whole run with
its start-up, and to the target accuracy (DAWNBench: time to accuracy x price per hour).

Prices come only from the config's ``cost`` section (price per node-hour per accelerator
kind, plus an optional surcharge per network for layouts that span nodes); without it every
money column is NaN and reads "no price given". Node-hours need no price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from dpscale.analysis.answers.startup import crossover_images, mean_rate
from dpscale.analysis.results.rows import without_remedies
from dpscale.plan.columns import LAYOUT, NETWORK, NODES, RUN, WORLD_SIZE
from dpscale.plan.layout import HOST_NETWORK

NO_PRICE = "no price given"
NO_EPOCH = "no epoch size given"
SECONDS_PER_HOUR = 3600.0
COLUMNS = [
    *LAYOUT,
    "batch_per_device",
    "global_batch",
    "img_s",
    "img_s_ci95",
    "startup_paid_s",
    "price_per_node_hour",
    "node_hours_per_1000_images",
    "cost_per_1000_images",
    "epoch_s",
    "node_hours_per_epoch",
    "cost_per_epoch",
    "run_epochs",
    "run_s",
    "run_cost",
    "meets_deadline",
    "break_even_images_vs_1",
    "run_speedup_vs_1",
    "currency",
]


@dataclass(frozen=True)
class Prices:
    """The config's ``cost`` section (plan.config checks it)."""

    currency: str
    node_hour: dict[str, float]
    source: str
    date: str
    network_hour: dict[str, float] = field(default_factory=dict)
    epoch_images: int | None = None
    run_epochs: float = 1.0
    deadline_hours: float | None = None

    @classmethod
    def from_config(cls, cost: dict[str, Any] | None) -> Prices | None:
        if not cost:
            return None
        return cls(
            currency=cost["currency"],
            node_hour={k: float(v) for k, v in cost["node_hour"].items()},
            source=cost["source"],
            date=str(cost["date"]),
            network_hour={k: float(v) for k, v in (cost.get("network_hour") or {}).items()},
            epoch_images=cost.get("epoch_images"),
            run_epochs=float(cost.get("run_epochs", 1.0)),
            deadline_hours=cost.get("deadline_hours"),
        )

    def per_node_hour(self, accelerator: str, network: str, nodes: int) -> float:
        """One node's price for an hour in this layout (the network's surcharge only when
        the layout spans nodes over it)."""
        price = self.node_hour.get(accelerator, math.nan)
        return price + (self.network_hour.get(network, 0.0) if nodes > 1 else 0.0)


def _layout_cost(row: dict[str, Any], prices: Prices | None) -> dict[str, Any]:
    nodes, rate = int(row["nodes"]), float(row["img_s"])
    price = prices.per_node_hour(row["accelerator"], row["network"], nodes) if prices else math.nan
    node_hours_per_image = nodes / rate / SECONDS_PER_HOUR
    epoch_images = prices.epoch_images if prices else None
    epoch_s = epoch_images / rate if epoch_images else math.nan
    run_epochs = prices.run_epochs if prices else math.nan
    run_s = row["startup_paid_s"] + run_epochs * epoch_s
    deadline = prices.deadline_hours if prices else None
    return {
        "global_batch": int(row["batch_per_device"] * row["world_size"]),
        "price_per_node_hour": price,
        "node_hours_per_1000_images": 1000 * node_hours_per_image,
        "cost_per_1000_images": 1000 * node_hours_per_image * price,
        "epoch_s": epoch_s,
        "node_hours_per_epoch": nodes * epoch_s / SECONDS_PER_HOUR,
        "cost_per_epoch": nodes * epoch_s / SECONDS_PER_HOUR * price,
        "run_epochs": run_epochs,
        "run_s": run_s,
        "run_cost": nodes * run_s / SECONDS_PER_HOUR * price,
        "meets_deadline": (run_s / SECONDS_PER_HOUR <= deadline) if deadline else None,
        "currency": prices.currency if prices else NO_PRICE,
    }


def _against_one_device(row: dict[str, Any], rates: pd.DataFrame) -> dict[str, float]:
    """Against one device at the same per-device batch: the run length (images) from which
    this layout, start-up included, finishes first (0: always; inf: never), and how many
    times as fast a run of ``run_epochs`` is; NaN without a one-device cell."""
    base = rates[
        (rates["strategy"] == row["strategy"])
        & (rates["model"] == row["model"])
        & (rates["world_size"] == 1)
        & (rates["batch_per_device"] == row["batch_per_device"])
    ]
    if base.empty or row["world_size"] == 1:
        return {"break_even_images_vs_1": math.nan, "run_speedup_vs_1": math.nan}
    one = base.iloc[0]
    images, longer = crossover_images(
        one["startup_paid_s"], one["img_s"], row["startup_paid_s"], row["img_s"]
    )
    work_s = row["run_s"] - row["startup_paid_s"]  # the run's epochs at this layout's rate
    one_run_s = one["startup_paid_s"] + work_s * row["img_s"] / one["img_s"]
    return {
        "break_even_images_vs_1": math.inf if longer == "a" else images,
        "run_speedup_vs_1": one_run_s / row["run_s"],
    }


def cost_table(cells: pd.DataFrame, prices: Prices | None) -> pd.DataFrame:
    """One row per layout and per-device batch (ok synthetic cells, repeats averaged)."""
    cells = without_remedies(cells)
    rates = mean_rate(cells)
    if rates.empty:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for row in rates.to_dict("records"):
        row.update(_layout_cost(row, prices))
        row.update(_against_one_device(row, rates))
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def cost_to_target(runs: pd.DataFrame, prices: Prices | None, accelerator: str) -> pd.DataFrame:
    """DAWNBench's cost per training configuration: mean time to the target accuracy over
    its seeds (NaN unless every seed reached it) x nodes x price per node-hour."""
    runs = without_remedies(runs)
    keys = [*RUN, NETWORK, NODES, WORLD_SIZE, "batch_per_device", "lr_rule"]
    columns = [*keys, "time_to_target_s", "node_hours_to_target", "cost_to_target"]
    if runs.empty or "time_to_target_s" not in runs.columns:
        return pd.DataFrame(columns=columns)
    ok = runs[runs["status"] == "ok"].copy()
    ok["network"] = ok["network"].fillna(HOST_NETWORK)
    rows = []
    for key, group in ok.groupby(keys, sort=True):
        row = dict(zip(keys, key, strict=True))
        times = group["time_to_target_s"]
        row["time_to_target_s"] = float(times.mean()) if times.notna().all() else math.nan
        row["node_hours_to_target"] = row["nodes"] * row["time_to_target_s"] / SECONDS_PER_HOUR
        nodes, network = row["nodes"], row["network"]
        price = prices.per_node_hour(accelerator, network, nodes) if prices else math.nan
        row["cost_to_target"] = row["node_hours_to_target"] * price
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=columns)


def money(value: float, prices: Prices | None) -> str:
    """An amount in the study's currency, or why there is none."""
    if prices is None:
        return NO_PRICE
    if value is None or math.isnan(value):
        return "not measured"
    digits = 2 if abs(value) >= 1 else 4
    return f"{value:,.{digits}f} {prices.currency}"


def cheapest(costs: pd.DataFrame, prices: Prices | None) -> dict[str, Any] | None:
    """The layout whose run of ``run_epochs`` (start-up included) costs least, among those
    that meet the deadline when one is given; None without prices or an epoch size."""
    if prices is None or costs.empty or costs["run_cost"].isna().all():
        return None
    candidates = costs[costs["run_cost"].notna()]
    if prices.deadline_hours:
        candidates = candidates[candidates["meets_deadline"].astype(bool)]
    if candidates.empty:
        return {}
    return candidates.sort_values(["run_cost", "run_s"]).iloc[0].to_dict()
