"""What distribution does to the model: tidy tables from training cells (mode train).

The baseline of a configuration is the same strategy, model and dataset on one device at the
base batch (learning rate unscaled).  Accuracy deltas carry a Welch 95% interval over seeds;
time-to-accuracy is the wall time (training plus validation) to the first epoch whose
validation accuracy reaches the target.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dpscale.analysis.collectives import comm_key

CONFIG_KEY = [
    "strategy",
    "model",
    "dataset",
    "world_size",
    "batch_per_device",
    "global_batch",
    "lr_rule",
    "network",
    "comm",
]
RUN_COLUMNS = [
    "cell_id",
    *CONFIG_KEY,
    "nodes",
    "devices_per_node",
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
        "network": (cell.get("network") or {}).get("name", "host"),
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
    """Difference of means and the half-width of its Welch 95% interval (nan if < 2 each)."""
    delta = float(np.mean(sample) - np.mean(reference))
    if len(sample) < 2 or len(reference) < 2:
        return delta, math.nan
    var_s, var_r = np.var(sample, ddof=1) / len(sample), np.var(reference, ddof=1) / len(reference)
    se = math.sqrt(var_s + var_r)
    if se == 0:
        return delta, 0.0
    df = (var_s + var_r) ** 2 / (var_s**2 / (len(sample) - 1) + var_r**2 / (len(reference) - 1))
    return delta, float(stats.t.ppf(0.975, df) * se)


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
        for metric in ("final", "best"):
            column = f"{metric}_val_accuracy"
            delta, half = welch_interval(group[column].to_numpy(), reference[column].to_numpy())
            row[f"{metric}_delta"] = delta
            row[f"{metric}_delta_ci95"] = half
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
