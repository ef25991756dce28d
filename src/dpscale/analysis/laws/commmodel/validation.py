"""Held-out predictions (leave one cell or one network out), their summary, and the noise
floor they are judged against: a line per layout and the windows' own scatter."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.laws.commmodel.buckets import BucketTimeline
from dpscale.analysis.laws.commmodel.fitting import Z95, fit_model, safe_exp
from dpscale.analysis.laws.commmodel.inputs import INTRA, OBS_COLUMNS
from dpscale.plan.columns import DEVICES_PER_NODE, LAYOUT, NETWORK, NODES
from dpscale.plan.layout import Layout
from dpscale.plan.link import Link
from dpscale.plan.traffic import Traffic

VALIDATION_COLUMNS = [
    "scheme",
    "overlap",
    "chosen",
    *LAYOUT,
    "batch_per_device",
    "measured",
    "predicted",
    "lo",
    "hi",
    "relative_error",
    "status",
    "reason",
]
SUMMARY_COLUMNS = [
    "scheme",
    "overlap",
    "chosen",
    "strategy",
    "model",
    "predicted_cells",
    "median_abs_relative_error",
    "within_10pct",
    "within_interval",
    "interval_hi_over_lo_median",
    "worst",
    "status",
]


LEAVE_ONE_CELL_OUT = "leave one cell out"
LEAVE_ONE_NETWORK_OUT = "leave one network out"
# Extrapolation in ranks: fitted on 1 rank and the fewest ranks above 1, every larger rank
# count predicted (its links known only from collective benchmarks at those fewest ranks)
FEWEST_RANKS = "fit on the fewest ranks, predict more"


def fewest_multi_ranks(obs: pd.DataFrame) -> int | None:
    """The smallest world size above 1, when a larger one was measured too (else None)."""
    sizes = sorted(obs.loc[obs["world_size"] > 1, "world_size"].unique())
    return int(sizes[0]) if len(sizes) >= 2 else None


def held_out_predictions(
    obs: pd.DataFrame,
    links: dict[str, Link],
    form: str,
    scheme: str,
    timeline: BucketTimeline | None,
    traffic: Traffic,
) -> pd.DataFrame:
    """Each multi-rank configuration (leave one cell out), network (leave one network out)
    or rank count above the fewest (fit on the fewest ranks) predicted from a model fitted
    without it."""
    multi = obs[obs["world_size"] > 1]
    if scheme == LEAVE_ONE_CELL_OUT:
        groups = [(multi.index[[i]], None) for i in range(len(multi))]
    elif scheme == FEWEST_RANKS:
        fewest = fewest_multi_ranks(obs)
        groups = [] if fewest is None else [(multi.index[multi["world_size"] > fewest], None)]
    else:
        groups = [
            (multi.index[multi["network"] == net], net)
            for net in sorted(multi.loc[multi["nodes"] > 1, "network"].unique())
        ]
    rows = []
    for held, network in groups:
        rows.extend(_predict_held_out(obs, held, links, form, scheme, network, timeline, traffic))
    return pd.DataFrame(rows).reindex(columns=VALIDATION_COLUMNS)


def _predict_held_out(
    obs: pd.DataFrame,
    held: pd.Index,
    links: dict[str, Link],
    form: str,
    scheme: str,
    network: str | None,
    timeline: BucketTimeline | None,
    traffic: Traffic,
) -> list[dict[str, Any]]:
    train, test = obs.drop(index=held), obs.loc[held]
    base = [
        {
            "scheme": scheme,
            "overlap": form,
            **{k: row[k] for k in OBS_COLUMNS},
            "measured": row["step_time_s"],
        }
        for _, row in test.iterrows()
    ]
    reason = _unpredictable(train, test, links, network)
    if reason is None:
        try:
            fitted = fit_model(train, links, form, timeline, traffic=traffic)
        except (ValueError, np.linalg.LinAlgError) as error:  # NotEnoughData among them
            reason = f"not enough data without it: {error}"
    if reason is not None:
        return [dict(b, status="not predicted", reason=reason) for b in base]
    centre, variance = fitted.log_prediction(fitted.design(test, emulation=True))
    out = []
    for row, mid, var in zip(base, centre, variance, strict=True):
        half = Z95 * math.sqrt(var) if np.isfinite(var) else math.nan
        predicted = safe_exp(mid)
        out.append(
            dict(
                row,
                predicted=predicted,
                lo=safe_exp(mid - half),
                hi=safe_exp(mid + half),
                relative_error=predicted / row["measured"] - 1.0,
                status="ok",
                reason=None,
            )
        )
    return out


def _unpredictable(
    train: pd.DataFrame, test: pd.DataFrame, links: dict[str, Link], network: str | None
) -> str | None:
    """Why the held-out rows cannot be predicted, or None: a link without a reference
    bandwidth needs cells of its own in the fit."""
    for nodes, net in zip(test["nodes"], test["network"], strict=True):
        name = INTRA if nodes == 1 else net
        link = links.get(name)
        if link is not None and np.isfinite(link.bytes_per_s):
            continue
        left = train[
            (train["world_size"] > 1)
            & ((train["nodes"] == 1) if name == INTRA else (train["network"] == name))
        ]
        if left.empty:
            return f"link {name!r} has no rate or collective benchmark and no other cell"
    del network
    return None


def summarise(validation: pd.DataFrame) -> pd.DataFrame:
    rows = []
    keys = ["scheme", "overlap", "strategy", "model"]
    for key, group in validation.groupby(keys, sort=True):
        ok = group[group["status"] == "ok"]
        errors = ok["relative_error"].abs()
        worst = ""
        if not ok.empty:
            row = ok.loc[errors.idxmax()]
            worst = (
                f"{Layout.from_row(row).grid} {row['network']} "
                f"b{row['batch_per_device']}: {row['relative_error']:+.0%}"
            )
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "predicted_cells": len(ok),
                "median_abs_relative_error": float(errors.median()) if len(ok) else math.nan,
                "within_10pct": int((errors <= 0.10).sum()),
                "within_interval": int(
                    ((ok["lo"] <= ok["measured"]) & (ok["measured"] <= ok["hi"])).sum()
                ),
                "interval_hi_over_lo_median": float((ok["hi"] / ok["lo"]).median())
                if len(ok)
                else math.nan,
                "worst": worst,
                "status": "ok" if len(ok) else "not enough data",
            }
        )
    return pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)


BASELINE = "baseline: a line per layout, leave one cell out"
BASELINE_FORM = "per-layout law"


def layout_law_baseline(obs: pd.DataFrame) -> pd.DataFrame:
    """The noise floor: each multi-rank configuration predicted by a straight line (the
    throughput law, 2 parameters per layout) through the other batches of its own layout.
    A model with fewer parameters cannot be expected to do much better than this."""
    rows = []
    multi = obs[obs["world_size"] > 1]
    for _, layout in multi.groupby([NODES, NETWORK, DEVICES_PER_NODE], sort=True):
        for index in layout.index:
            rest = layout.drop(index=index)
            row = layout.loc[index]
            base = {
                "scheme": BASELINE,
                "overlap": BASELINE_FORM,
                "chosen": False,
                **{k: row[k] for k in OBS_COLUMNS},
                "measured": row["step_time_s"],
            }
            if rest["batch_per_device"].nunique() < 2:
                rows.append(dict(base, status="not predicted", reason="fewer than 2 other batches"))
                continue
            slope, intercept = np.polyfit(rest["batch_per_device"], rest["step_time_s"], 1)
            predicted = slope * row["batch_per_device"] + intercept
            rows.append(
                dict(
                    base,
                    predicted=predicted,
                    relative_error=predicted / row["step_time_s"] - 1.0,
                    status="ok",
                    reason=None,
                )
            )
    return pd.DataFrame(rows).reindex(columns=VALIDATION_COLUMNS)


def window_cv(windows: pd.DataFrame) -> pd.Series:
    """Median over configurations of the windows' coefficient of variation of step time, per
    (strategy, model): how much one configuration's own measurement scatters."""
    if windows.empty:
        return pd.Series(dtype=float)
    keys = ["strategy", "model", *OBS_COLUMNS[2:]]
    per_config = windows.groupby(keys)["step_time_s"].agg(lambda t: t.std() / t.mean())
    return per_config.groupby(level=["strategy", "model"]).median()
