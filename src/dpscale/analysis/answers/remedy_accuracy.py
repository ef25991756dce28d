"""The accuracy cost of each communication remedy: its training runs against the same
configuration's runs without a remedy, the difference of mean final accuracy with its 95%
interval (paired by seed)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpscale.analysis.laws.accuracy import seed_delta
from dpscale.plan.columns import LAYOUT
from dpscale.plan.remedies import NO_REMEDY

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
