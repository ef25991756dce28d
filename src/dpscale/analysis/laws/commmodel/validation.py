"""Held-out predictions (leave one cell out, K folds over cells in a large group, leave one
network out, fit on the fewest ranks), their summary, and the noise floor they are judged
against: a line per layout and the windows' own scatter."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.laws.commmodel.buckets import BucketTimeline
from dpscale.analysis.laws.commmodel.fitting import Z95, Fit, fit_forms, safe_exp
from dpscale.analysis.laws.commmodel.inputs import INTRA, OBS_COLUMNS
from dpscale.plan.columns import DEVICES_PER_NODE, LAYOUT, NETWORK, NODES, WORLD_SIZE
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
# Above LEAVE_ONE_OUT_UP_TO multi-rank configurations in a (strategy, model) group, its cells
# are held out in FOLDS folds instead of one at a time: a refit per configuration grows with
# the square of a group's cells (docs/decisions/held-out-cells-at-scale.md)
FOLDS = 5
LEAVE_ONE_OUT_UP_TO = 40
K_FOLD_OVER_CELLS = f"{FOLDS}-fold over cells"
CELL_SCHEMES = (LEAVE_ONE_CELL_OUT, K_FOLD_OVER_CELLS)  # each cell held out once, either way
LEAVE_ONE_NETWORK_OUT = "leave one network out"
# Extrapolation in ranks: fitted on 1 rank and the fewest ranks above 1, every larger rank
# count predicted (its links known only from collective benchmarks at those fewest ranks)
FEWEST_RANKS = "fit on the fewest ranks, predict more"
# what names a configuration's fold: its layout, network and batch, never its row
FOLD_KEY = [NODES, NETWORK, DEVICES_PER_NODE, WORLD_SIZE, "batch_per_device"]


def fewest_multi_ranks(obs: pd.DataFrame) -> int | None:
    """The smallest world size above 1, when a larger one was measured too (else None)."""
    sizes = sorted(obs.loc[obs["world_size"] > 1, "world_size"].unique())
    return int(sizes[0]) if len(sizes) >= 2 else None


def cell_scheme(obs: pd.DataFrame) -> str:
    """How a group's cells are held out: one at a time up to LEAVE_ONE_OUT_UP_TO multi-rank
    configurations, in FOLDS folds above (the same check, linear instead of quadratic)."""
    multi = int((obs["world_size"] > 1).sum())
    return LEAVE_ONE_CELL_OUT if multi <= LEAVE_ONE_OUT_UP_TO else K_FOLD_OVER_CELLS


def _canonical(value: Any) -> str:
    """A key value as text that does not depend on how a table typed it (16, 16.0, '16')."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    return str(value)


def fold_of(key: Sequence[Any], folds: int = FOLDS) -> int:
    """The fold of the configuration with these FOLD_KEY values: a stable hash (the same in
    every run and process, unlike Python's salted hash()), so folds neither depend on row
    order nor move when other configurations are added."""
    text = "|".join(f"{name}={_canonical(v)}" for name, v in zip(FOLD_KEY, key, strict=True))
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % folds


def cell_folds(rows: pd.DataFrame, folds: int = FOLDS) -> pd.Series:
    """Each row's fold (:func:`fold_of`), indexed as ``rows``."""
    keys = rows[FOLD_KEY].itertuples(index=False, name=None)
    return pd.Series([fold_of(key, folds) for key in keys], index=rows.index, dtype=int)


def held_out_sets(obs: pd.DataFrame, scheme: str) -> list[tuple[pd.Index, str | None]]:
    """The rows each refit leaves out under ``scheme`` (with the network held out, if
    any): every multi-rank configuration alone or its fold, each network's configurations,
    or every rank count above the fewest."""
    multi = obs[obs["world_size"] > 1]
    if scheme == LEAVE_ONE_CELL_OUT:
        return [(multi.index[[i]], None) for i in range(len(multi))]
    if scheme == K_FOLD_OVER_CELLS:
        folds = cell_folds(multi)
        return [(multi.index[folds == k], None) for k in sorted(folds.unique())]
    if scheme == FEWEST_RANKS:
        fewest = fewest_multi_ranks(obs)
        return [] if fewest is None else [(multi.index[multi["world_size"] > fewest], None)]
    return [
        (multi.index[multi["network"] == net], net)
        for net in sorted(multi.loc[multi["nodes"] > 1, "network"].unique())
    ]


def held_out_predictions(
    obs: pd.DataFrame,
    links: dict[str, Link],
    form: str,
    scheme: str,
    timeline: BucketTimeline | None,
    traffic: Traffic,
) -> pd.DataFrame:
    """Each multi-rank configuration (leave one cell out, or K folds over cells), network
    (leave one network out) or rank count above the fewest (fit on the fewest ranks)
    predicted from a model of ``form`` fitted without it."""
    return held_out_by_form(obs, links, [form], scheme, timeline, traffic)[form]


def held_out_by_form(
    obs: pd.DataFrame,
    links: dict[str, Link],
    forms: Sequence[str],
    scheme: str,
    timeline: BucketTimeline | None,
    traffic: Traffic,
) -> dict[str, pd.DataFrame]:
    """:func:`held_out_predictions` of every form in ``forms``: each held-out set's refits
    of all forms done together (fitting.fit_forms), so the forms share the fits they start
    from."""
    rows: dict[str, list[dict[str, Any]]] = {form: [] for form in forms}
    order: list[Any] = []  # the held-out rows' index, in the order they were predicted
    for held, network in held_out_sets(obs, scheme):
        order += list(held)
        for form, predicted in _predict_held_out(
            obs, held, links, forms, scheme, network, timeline, traffic
        ).items():
            rows[form].extend(predicted)
    # folds list their configurations in the table's order again (the other schemes do)
    ranked = np.argsort(order, kind="stable") if scheme == K_FOLD_OVER_CELLS else None
    return {form: _frame(rows[form], ranked) for form in forms}


def _frame(rows: list[dict[str, Any]], order: np.ndarray | None) -> pd.DataFrame:
    """Validation rows as a table, in ``order`` (positions) where one is given."""
    frame = pd.DataFrame(rows).reindex(columns=VALIDATION_COLUMNS)
    return frame if order is None else frame.iloc[order].reset_index(drop=True)


def _predict_held_out(
    obs: pd.DataFrame,
    held: pd.Index,
    links: dict[str, Link],
    forms: Sequence[str],
    scheme: str,
    network: str | None,
    timeline: BucketTimeline | None,
    traffic: Traffic,
) -> dict[str, list[dict[str, Any]]]:
    """The rows ``held`` predicted by each form fitted on the others, or why not."""
    train, test = obs.drop(index=held), obs.loc[held]
    reason = _unpredictable(train, test, links, network)
    fitted: dict[str, Fit] = {}
    failed: dict[str, Exception] = {}
    if reason is None:
        fitted, failed = fit_forms(train, links, forms, timeline, traffic)
    measured = [
        {"scheme": scheme, **{k: row[k] for k in OBS_COLUMNS}, "measured": row["step_time_s"]}
        for row in test[[*OBS_COLUMNS, "step_time_s"]].to_dict("records")
    ]
    out = {}
    for form in forms:
        base = [dict(row, overlap=form) for row in measured]
        why = reason or (f"not enough data without it: {failed[form]}" if form in failed else None)
        if why is not None:
            out[form] = [dict(b, status="not predicted", reason=why) for b in base]
        else:
            out[form] = _predicted_rows(fitted[form], test, base)
    return out


def _predicted_rows(
    fitted: Fit, test: pd.DataFrame, base: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``base`` (one per row of ``test``) with the fit's prediction and 95% interval."""
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
    bandwidth needs cells of its own in the fit (each link looked at once: a fold holds
    hundreds of rows on a few links)."""
    seen: set[str] = set()
    for nodes, net in zip(test["nodes"], test["network"], strict=True):
        name = INTRA if nodes == 1 else net
        if name in seen:
            continue
        seen.add(name)
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
    records = multi[[*OBS_COLUMNS, "step_time_s"]].to_dict("records")  # once, not per layout
    batch = multi["batch_per_device"].to_numpy(dtype=float)
    step = multi["step_time_s"].to_numpy(dtype=float)
    for positions in _layouts(multi):
        rows += _layout_rows([records[i] for i in positions], batch[positions], step[positions])
    return pd.DataFrame(rows).reindex(columns=VALIDATION_COLUMNS)


def _layouts(multi: pd.DataFrame) -> list[np.ndarray]:
    """Each layout's row positions in ``multi``, in the table's order, the layouts in the
    order groupby (sorted, keys with a gap left out) gives them."""
    codes = multi.groupby([NODES, NETWORK, DEVICES_PER_NODE], sort=True).ngroup()
    valid = codes.notna().to_numpy()
    numbers = codes.to_numpy()[valid].astype(int)
    if numbers.size == 0:
        return []
    order = np.argsort(numbers, kind="stable")
    positions = np.flatnonzero(valid)[order]
    return np.split(positions, np.flatnonzero(np.diff(numbers[order])) + 1)


def _layout_rows(
    records: list[dict[str, Any]], batch: np.ndarray, step: np.ndarray
) -> list[dict[str, Any]]:
    """One layout's configurations (its rows as records, their batches and step times),
    each predicted by the line through the others."""
    predicted = _line_without_each(batch, step)
    rows = []
    for i, record in enumerate(records):
        base = {
            "scheme": BASELINE,
            "overlap": BASELINE_FORM,
            "chosen": False,
            **{k: record[k] for k in OBS_COLUMNS},
            "measured": record["step_time_s"],
        }
        if not np.isfinite(predicted[i]):
            rows.append(dict(base, status="not predicted", reason="fewer than 2 other batches"))
            continue
        rows.append(
            dict(
                base,
                predicted=predicted[i],
                relative_error=predicted[i] / step[i] - 1.0,
                status="ok",
                reason=None,
            )
        )
    return rows


def _line_without_each(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """At each x_i, the least-squares line through the other points (NaN where they hold
    fewer than 2 distinct x): every point's fit at once, row i of a mask leaving i out
    (two passes, means then centred sums, as a fit of its own would: a layout has a
    handful of batches, a study thousands of layouts)."""
    rest = ~np.eye(x.size, dtype=bool)
    count = rest.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a layout of one batch: no rest
        mean_x = (rest * x).sum(axis=1) / count
        mean_y = (rest * y).sum(axis=1) / count
        dx = np.where(rest, x - mean_x[:, None], 0.0)
        dy = np.where(rest, y - mean_y[:, None], 0.0)
        slope = (dx * dy).sum(axis=1) / (dx * dx).sum(axis=1)
        line = mean_y + slope * (x - mean_x)
    distinct = np.array([np.unique(x[row]).size >= 2 for row in rest], dtype=bool)
    return np.where(distinct, line, np.nan)


def window_cv(windows: pd.DataFrame) -> pd.Series:
    """Median over configurations of the windows' coefficient of variation of step time, per
    (strategy, model): how much one configuration's own measurement scatters."""
    if windows.empty:
        return pd.Series(dtype=float)
    keys = ["strategy", "model", *OBS_COLUMNS[2:]]
    per_config = windows.groupby(keys)["step_time_s"].agg(lambda t: t.std() / t.mean())
    return per_config.groupby(level=["strategy", "model"]).median()
