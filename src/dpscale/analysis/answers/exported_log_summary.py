"""The exported-log check's summary (analysis.answers.exported_log_check): per scheme,
strategy and model, a row per network and one over all networks, each beside the native
model's held-out median of the matching scheme and chosen form; its page note and the
rule's headline."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.answers.exported_log_check import (
    NATIVE_SCHEME,
    NOT_CHECKED,
    NOT_PREDICTED,
    OK,
    not_checked,
)
from dpscale.plan.columns import NETWORK, RUN
from dpscale.plan.layout import Layout

ALL_NETWORKS = "all networks"
WITHIN = 0.10
SUMMARY_COLUMNS = [
    "scheme",
    *RUN,
    NETWORK,
    "predicted_cells",
    "not_predicted",
    "median_abs_relative_error",
    "within_10pct",
    "within_interval",
    "worst",
    "native_scheme",
    "native_form",
    "native_predicted_cells",
    "native_median_abs_relative_error",
    "status",
    "note",
]


def _worst(ok: pd.DataFrame) -> str:
    if ok.empty:
        return ""
    row = ok.loc[ok["relative_error"].abs().idxmax()]
    return (
        f"{Layout.from_row(row).grid} {row[NETWORK]} "
        f"b{row['batch_per_device']}: {row['relative_error']:+.0%}"
    )


def _native(
    validation: pd.DataFrame, summary: pd.DataFrame, scheme: str, run: tuple, network: str
) -> tuple[str, float, float]:
    """(chosen form, cells, median |relative error|) of the native check; NaN where none."""
    native = NATIVE_SCHEME[scheme]
    if summary.empty or validation.empty:
        return "", math.nan, math.nan
    mine = (summary["scheme"] == native) & summary["chosen"].astype(bool)
    mine &= (summary["strategy"] == run[0]) & (summary["model"] == run[1])
    chosen = summary[mine]
    if chosen.empty:
        return "", math.nan, math.nan
    form = str(chosen["overlap"].iloc[0])
    if network == ALL_NETWORKS:
        return (
            form,
            float(chosen["predicted_cells"].iloc[0]),
            float(chosen["median_abs_relative_error"].iloc[0]),
        )
    rows = validation[
        (validation["scheme"] == native)
        & (validation["overlap"] == form)
        & (validation["strategy"] == run[0])
        & (validation["model"] == run[1])
        & (validation[NETWORK] == network)
        & (validation["status"] == OK)
    ]
    errors = rows["relative_error"].abs()
    return form, float(len(rows)), float(errors.median()) if len(rows) else math.nan


def contention_words(parameters: pd.DataFrame, run: tuple) -> str:
    """The native chosen form's fitted sigma and kappa, in words, where comm_model has them."""
    base = (
        "compute extrapolated from one process: where nodes are emulated on one machine "
        "their ranks share its cores, which the one-process step does not know"
    )
    if parameters.empty:
        return base
    rows = parameters[
        parameters["chosen"].astype(bool)
        & (parameters["strategy"] == run[0])
        & (parameters["model"] == run[1])
    ]
    values = dict(zip(rows["parameter"], rows["value"], strict=True))
    fitted = [
        f"{name} = {values[name]:.3g} ({what})"
        for name, what in (
            ("sigma", "compute slowdown per co-located rank"),
            ("kappa", "s of compute per GB sent on shared cores"),
        )
        if name in values and np.isfinite(values[name])
    ]
    if not fitted:
        return base
    return f"{base}; the native model fits {' and '.join(fitted)}, this path neither"


def _summary_row(
    group: pd.DataFrame, scheme: str, run: tuple, network: str, native: tuple, note: str
) -> dict[str, Any]:
    ok = group[group["status"] == OK]
    errors = ok["relative_error"].abs()
    form, native_cells, native_median = native
    return {
        "scheme": scheme,
        **dict(zip(RUN, run, strict=True)),
        NETWORK: network,
        "predicted_cells": len(ok),
        "not_predicted": int((group["status"] != OK).sum()),
        "median_abs_relative_error": float(errors.median()) if len(ok) else math.nan,
        "within_10pct": int((errors <= WITHIN).sum()),
        "within_interval": int(ok["within_interval"].astype(bool).sum()),
        "worst": _worst(ok),
        "native_scheme": NATIVE_SCHEME[scheme],
        "native_form": form,
        "native_predicted_cells": native_cells,
        "native_median_abs_relative_error": native_median,
        "status": OK if len(ok) else NOT_PREDICTED,
        "note": note,
    }


def summarise(
    table: pd.DataFrame,
    validation: pd.DataFrame,
    native_summary: pd.DataFrame,
    parameters: pd.DataFrame,
) -> pd.DataFrame:
    """Per scheme, strategy and model: a row per network and one over all networks, each
    beside the native held-out median of the matching scheme and chosen form."""
    if table.empty or (table["status"] == NOT_CHECKED).all():
        reason = table["reason"].iloc[0] if not table.empty else "no cells"
        return not_checked(reason, SUMMARY_COLUMNS)
    rows = []
    checked = table[table["status"] != NOT_CHECKED]
    for (scheme, *run), group in checked.groupby(["scheme", *RUN], sort=False):
        note = contention_words(parameters, tuple(run))
        for network, part in group.groupby(NETWORK, sort=True):
            native = _native(validation, native_summary, scheme, tuple(run), network)
            rows.append(_summary_row(part, scheme, tuple(run), network, native, note))
        native = _native(validation, native_summary, scheme, tuple(run), ALL_NETWORKS)
        rows.append(_summary_row(group, scheme, tuple(run), ALL_NETWORKS, native, note))
    return pd.DataFrame(rows).reindex(columns=SUMMARY_COLUMNS)


PAGE_NOTE = (
    "The study's own collectives cells exported as nccl-tests all_reduce_perf logs "
    "(dpscale export-nccl), read back as a cluster's log is, and every multi-node synthetic "
    "cell predicted from the one-process cell of its strategy, model and batch as dpscale "
    "predict does (cluster_prediction: the one-process step and its bucket timeline, each "
    "bucket's all-reduce from the log). relative_error = predicted / measured step - 1. "
    "Beside each summary row: the native communication model's held-out median of the "
    "matching scheme. Every prediction is extrapolated from one process: emulated nodes "
    "share this machine's cores, which the one-process step does not know, and the native "
    "model's compute slowdown per co-located rank (sigma) and shared-core cost per GB sent "
    "(kappa) have no place in this path. Nothing here is fitted to the multi-node cells."
)


def headline(summary: pd.DataFrame) -> str:
    """One line for the rule's log: each scheme's median over all networks beside the native
    median, or why nothing was checked."""
    overall = summary[summary[NETWORK] == ALL_NETWORKS]
    if overall.empty:
        return f"{NOT_CHECKED}: {summary['note'].iloc[0]}"
    return "; ".join(
        f"{row['scheme']}: median |error| {row['median_abs_relative_error']:.1%} over "
        f"{row['predicted_cells']} cells ({row['native_scheme']}, {row['native_form']}: "
        f"{row['native_median_abs_relative_error']:.1%})"
        for _, row in overall.iterrows()
    )
