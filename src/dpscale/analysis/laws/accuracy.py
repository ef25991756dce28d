"""What distribution does to the model: tidy tables from training cells (mode train).

The baseline of a configuration is the same strategy, model and dataset on one device at the
base batch (learning rate unscaled).  Accuracy deltas carry a 95% interval over seeds:
paired by seed where both arms ran the same seeds (the same seed gives the same initial
weights and epoch permutations in every strategy), Welch's otherwise; with the degrees of
freedom, the smallest difference the seeds could detect, and the seeds that would resolve
one point.  Time-to-accuracy is the wall time (training plus validation) to the first epoch
whose validation accuracy reaches the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.results.collectives import comm_key
from dpscale.plan.columns import DEVICES_PER_NODE, NETWORK, NODES, RUN, WORLD_SIZE
from dpscale.plan.layout import HOST_NETWORK

CONFIG_KEY = [
    *RUN,
    "dataset",
    WORLD_SIZE,
    "batch_per_device",
    "global_batch",
    "lr_rule",
    NETWORK,
    "comm",
]
RUN_COLUMNS = [
    "cell_id",
    *CONFIG_KEY,
    NODES,
    DEVICES_PER_NODE,
    "seed",
    "status",
    "reason",
    "base_batch",
    "peak_lr",
    "epochs",
    "final_val_accuracy",
    "best_val_accuracy",
    "target_accuracy",
    "time_to_target_s",
    "mean_epoch_train_s",
    "train_images_per_s",
    "ranks_consistent",
]
EPOCH_COLUMNS = [
    "cell_id",
    *CONFIG_KEY,
    "seed",
    "epoch",
    "train_seconds",
    "val_seconds",
    "wall_seconds",
    "train_loss",
    "train_accuracy",
    "val_loss",
    "val_accuracy",
    "lr_last",
]


def _config(result: dict[str, Any]) -> dict[str, Any]:
    cell = result["cell"]
    training = cell["training"]
    return {
        "cell_id": cell["cell_id"],
        "strategy": cell["strategy"],
        "model": cell["model"]["key"],
        "dataset": training["dataset"],
        "world_size": cell["world_size"],
        "batch_per_device": cell["batch_per_device"],
        "global_batch": cell["global_batch"],
        "lr_rule": training["lr_rule"],
        "network": (cell.get("network") or {}).get("name", HOST_NETWORK),
        "comm": comm_key(cell),
        "nodes": cell["nodes"],
        "devices_per_node": cell["devices_per_node"],
        "seed": cell["seed"],
        "base_batch": training["base_batch"],
        "target_accuracy": training["target_accuracy"],
    }


def training_results(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r["cell"].get("mode") == "train"]


def runs_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for result in training_results(results):
        row = {**_config(result), "status": result["status"], "reason": result["reason"]}
        record = result.get("training") or {}
        epochs = record.get("epochs", [])
        if epochs:
            checksums = record.get("rank_param_checksums", [])
            row.update(
                peak_lr=record["peak_lr"],
                epochs=len(epochs),
                final_val_accuracy=record["final_val_accuracy"],
                best_val_accuracy=record["best_val_accuracy"],
                time_to_target_s=record["time_to_target_s"],
                mean_epoch_train_s=float(np.mean([e["train_seconds"] for e in epochs])),
                train_images_per_s=record["train_images_per_s"],
                ranks_consistent=len(set(checksums)) == 1 if checksums else None,
            )
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=RUN_COLUMNS)


def epochs_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for result in training_results(results):
        if result["status"] != "ok":
            continue
        base = {k: v for k, v in _config(result).items() if k in EPOCH_COLUMNS}
        rows += [{**base, **epoch} for epoch in result["training"]["epochs"]]
    return pd.DataFrame(rows).reindex(columns=EPOCH_COLUMNS)


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Final and best accuracy per configuration: mean and sd over seeds."""
    ok = runs[runs["status"] == "ok"]
    columns = [
        *CONFIG_KEY,
        "seeds",
        "final_mean",
        "final_sd",
        "best_mean",
        "best_sd",
        "mean_epoch_train_s",
    ]
    if ok.empty:
        return pd.DataFrame(columns=columns)
    grouped = ok.groupby(CONFIG_KEY, sort=True)
    summary = grouped.agg(
        seeds=("seed", "nunique"),
        final_mean=("final_val_accuracy", "mean"),
        final_sd=("final_val_accuracy", "std"),
        best_mean=("best_val_accuracy", "mean"),
        best_sd=("best_val_accuracy", "std"),
        mean_epoch_train_s=("mean_epoch_train_s", "mean"),
    )
    return summary.reset_index().reindex(columns=columns)


def welch_interval(sample: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """Difference of means and the half-width of its Welch 95% interval (nan if < 2 each;
    0 where neither arm varies, which scipy's t test leaves undefined)."""
    from scipy import stats  # here: importing scipy.stats takes ~0.5 s of each job

    delta = float(np.mean(sample) - np.mean(reference))
    if len(sample) < 2 or len(reference) < 2:
        return delta, math.nan
    if np.var(sample, ddof=1) + np.var(reference, ddof=1) == 0:
        return delta, 0.0
    low, high = stats.ttest_ind(sample, reference, equal_var=False).confidence_interval(0.95)
    return delta, float(high - low) / 2


def _welch_df(sample: np.ndarray, reference: np.ndarray) -> float:
    """Welch-Satterthwaite degrees of freedom (scipy's Welch t test)."""
    from scipy import stats  # here: importing scipy.stats takes ~0.5 s of each job

    return float(stats.ttest_ind(sample, reference, equal_var=False).df)


RESOLVED_HALF = 0.05  # a delta known to within ±5 points says something; wider, it does not
TARGET_HALF = 0.01  # the resolution the "seeds needed" figure aims at: ±1 point
POWER_Z = 0.8  # the power of the detectable difference
MAX_SEEDS = 10_000
DELTA_FIELDS = ("delta", "ci95", "df", "method", "mde80", "seeds_for_1pt")


def _needed(half_at: Callable[[int], float]) -> float:
    """The fewest seeds per arm whose 95% half-width is at most TARGET_HALF (nan if none)."""
    if half_at(2) <= TARGET_HALF:
        return 2.0
    low, high = 2, MAX_SEEDS
    if half_at(high) > TARGET_HALF:
        return math.nan
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if half_at(middle) <= TARGET_HALF else (middle, high)
    return float(high)


def _power_factor(df: float) -> float:
    """t(97.5%) + t(80%): the detectable difference is this many standard errors."""
    from scipy import stats  # here: importing scipy.stats takes ~0.5 s of each job

    return float(stats.t.ppf(0.975, df) + stats.t.ppf(POWER_Z, df))


def paired_delta(sample: pd.Series, reference: pd.Series) -> dict[str, Any]:
    """Mean of per-seed differences (both indexed by seed), its paired-t 95% half-width."""
    from scipy import stats  # here: importing scipy.stats takes ~0.5 s of each job

    common = sample.index.intersection(reference.index)
    paired = [frame[common].to_numpy(dtype=float) for frame in (sample, reference)]
    diffs = paired[0] - paired[1]
    n, sd = len(diffs), float(np.std(diffs, ddof=1))
    se, df = sd / math.sqrt(n), n - 1
    if sd > 0:
        low, high = stats.ttest_rel(*paired).confidence_interval(0.95)
        half = float(high - low) / 2
    else:  # every seed moved by the same amount: scipy's t test is undefined, the interval 0
        half = 0.0
    return {
        "delta": float(diffs.mean()),
        "ci95": half,
        "df": float(df),
        "method": "paired",
        "mde80": _power_factor(df) * se,
        "seeds_for_1pt": _needed(lambda m: stats.t.ppf(0.975, m - 1) * sd / math.sqrt(m)),
    }


def welch_delta(sample: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """Difference of means, Welch's 95% half-width and its degrees of freedom."""
    from scipy import stats  # here: importing scipy.stats takes ~0.5 s of each job

    delta, half = welch_interval(sample, reference)
    out = dict.fromkeys(DELTA_FIELDS, math.nan) | {"delta": delta, "ci95": half}
    out["method"] = "welch"
    if not math.isfinite(half):
        return out
    var_s, var_r = np.var(sample, ddof=1), np.var(reference, ddof=1)
    se = math.sqrt(var_s / len(sample) + var_r / len(reference))
    df = _welch_df(sample, reference) if se else 1.0
    out.update(df=df, mde80=_power_factor(df) * se)
    out["seeds_for_1pt"] = _needed(
        lambda m: stats.t.ppf(0.975, 2 * m - 2) * math.sqrt((var_s + var_r) / m)
    )
    return out


def seed_delta(sample: pd.DataFrame, reference: pd.DataFrame, column: str) -> dict[str, Any]:
    """``sample`` minus ``reference`` in ``column``: paired by seed where both arms ran the
    same seeds (two or more), Welch's otherwise."""
    by_seed = [frame.groupby("seed")[column].mean() for frame in (sample, reference)]
    if set(by_seed[0].index) == set(by_seed[1].index) and len(by_seed[0]) >= 2:
        return paired_delta(*by_seed)
    return welch_delta(sample[column].to_numpy(float), reference[column].to_numpy(float))


def resolved(half: float) -> bool:
    """Is a delta known well enough to be stated as a number?"""
    return math.isfinite(half) and half <= RESOLVED_HALF


def _baselines(ok: pd.DataFrame) -> pd.DataFrame:
    return ok[(ok["world_size"] == 1) & (ok["global_batch"] == ok["base_batch"])]


def delta_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Accuracy of every configuration against its 1-device, base-batch baseline."""
    ok = runs[runs["status"] == "ok"]
    base = _baselines(ok)
    rows = []
    for key, group in ok.groupby(CONFIG_KEY, sort=True):
        row = dict(zip(CONFIG_KEY, key, strict=True))
        reference = base[
            (base["strategy"] == row["strategy"])
            & (base["model"] == row["model"])
            & (base["dataset"] == row["dataset"])
        ]
        if reference.empty:
            continue
        for metric in ("best", "final"):
            found = seed_delta(group, reference, f"{metric}_val_accuracy")
            row[f"{metric}_delta"], row[f"{metric}_delta_ci95"] = found["delta"], found["ci95"]
        row.update({f"final_delta_{field}": found[field] for field in DELTA_FIELDS[2:]})
        row["seeds"] = group["seed"].nunique()
        row["baseline_seeds"] = reference["seed"].nunique()
        row["baseline_final_mean"] = reference["final_val_accuracy"].mean()
        row["final_mean"] = group["final_val_accuracy"].mean()
        rows.append(row)
    columns = [
        *CONFIG_KEY,
        "seeds",
        "baseline_seeds",
        "baseline_final_mean",
        "final_mean",
        "final_delta",
        "final_delta_ci95",
        *(f"final_delta_{field}" for field in DELTA_FIELDS[2:]),
        "best_delta",
        "best_delta_ci95",
    ]
    return pd.DataFrame(rows).reindex(columns=columns)


def time_to_accuracy_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean wall time to the target accuracy, and its speedup over the baseline."""
    ok = runs[runs["status"] == "ok"]
    base = _baselines(ok)
    rows = []
    for key, group in ok.groupby(CONFIG_KEY, sort=True):
        row = dict(zip(CONFIG_KEY, key, strict=True))
        reached = group["time_to_target_s"].dropna()
        row["target_accuracy"] = group["target_accuracy"].iloc[0]
        row["seeds"] = group["seed"].nunique()
        row["seeds_reaching_target"] = len(reached)
        row["time_to_target_s"] = reached.mean() if len(reached) == len(group) else math.nan
        reference = base[
            (base["strategy"] == row["strategy"])
            & (base["model"] == row["model"])
            & (base["dataset"] == row["dataset"])
        ]
        ref_times = reference["time_to_target_s"].dropna()
        complete = len(ref_times) == len(reference) and len(reference) > 0
        row["baseline_time_to_target_s"] = ref_times.mean() if complete else math.nan
        row["speedup"] = row["baseline_time_to_target_s"] / row["time_to_target_s"]
        rows.append(row)
    columns = [
        *CONFIG_KEY,
        "target_accuracy",
        "seeds",
        "seeds_reaching_target",
        "time_to_target_s",
        "baseline_time_to_target_s",
        "speedup",
    ]
    return pd.DataFrame(rows).reindex(columns=columns)
