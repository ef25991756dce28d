"""Communication remedies (plan.remedies) in the model: each remedy's cells predicted from the fit
of the same strategy and model without a remedy, changed only where the remedy acts.

    T_comp' = T_comp + e                      (the remedy's encode and decode per step, N > 1)
    T_net'  = T_net with S / ratio bytes       (ratio: what the runner recorded it sent)
    T'      = (T_comp'^g + T_net'^g)^(1/g)     (g of the chosen form; delayed: g -> infinity,
                                                the all-reduce runs behind the next step)

In the bucket form (commmodel.buckets) the remedy changes each bucket instead: its bytes
(/ ratio), its collectives (PowerSGD: 3) and its cost (+ its share of e); delayed leaves the
buckets behind the next step.

One parameter per remedy, e (s, >= 0), fitted to its cells' log step times. Validation:
each remedy cell held out in turn (e refitted without it), and the remedy left out
altogether: nothing fitted on its cells, e = its own work as its collectives cell measured
it with nothing sent (gradient_replay.csv ``work_s``; 0 where none was measured).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize

from dpscale.analysis.laws.commmodel.analysis import GroupModel
from dpscale.analysis.laws.commmodel.inputs import OBS_COLUMNS, observations
from dpscale.analysis.laws.commmodel.model import (
    BUCKETS,
    MIN_STEP,
    Design,
    combine,
    parts,
    step_seconds,
)
from dpscale.analysis.laws.commmodel.prediction import break_even, predicted_networks
from dpscale.analysis.laws.words import batch_words
from dpscale.analysis.results.rows import no_remedy
from dpscale.plan.columns import DEVICES_PER_NODE, NETWORK, NODES, RUN, SPREAD, WORLD_SIZE
from dpscale.plan.layout import HOST_NETWORK, Layout
from dpscale.plan.remedies import NO_REMEDY, remedy_of

MAX_ENCODE_S = 100.0

REMEDY_COLUMNS = [
    "strategy",
    "model",
    "comm",
    "overlap",
    "wire_ratio",
    "encode_s",
    "work_s",
    "configurations",
    "loo_median_abs_relative_error",
    "left_out_median_abs_relative_error",
    "status",
    "reason",
]
REMEDY_VALIDATION_COLUMNS = [
    "scheme",
    "strategy",
    "model",
    "comm",
    *OBS_COLUMNS[2:],
    "measured",
    "predicted",
    "relative_error",
    "status",
]
REMEDY_PREDICTION_COLUMNS = [
    *RUN,
    "comm",
    NETWORK,
    "basis",
    "bandwidth_Gbit_s",
    *SPREAD,
    "break_even_global_batch",
    "break_even_none",
    "batch_per_device",
    "speedup",
    "speedup_none",
]


@dataclass(frozen=True)
class RemedyTerms:
    """What the model knows of a remedy before fitting (its wire ratio, whether it hides,
    its own work as measured alone), and its encode time once fitted. ``comm``: its key,
    which must name a declared remedy (plan.remedies.Remedy): its collectives per bucket are
    the declaration's."""

    comm: str
    ratio: float
    hidden: bool
    encode_s: float = 0.0
    work_s: float = 0.0

    def __post_init__(self) -> None:
        remedy_of(self.comm)  # a key no remedy declares is an error, not one collective


def remedy_step_seconds(values: dict[str, Any], rows: Design, remedy: RemedyTerms) -> np.ndarray:
    """The step times of ``rows`` with the remedy applied (module docstring)."""
    sent = dataclasses.replace(rows, message=rows.message / remedy.ratio)
    if values["form"] == BUCKETS:
        n = rows.batch.size
        sent = sent.with_buckets(
            collectives=np.full(n, float(remedy_of(remedy.comm).collectives_per_bucket)),
            encode_s=np.where(rows.ranks > 1, remedy.encode_s, 0.0),
            hidden=np.full(n, remedy.hidden),
        )
        return step_seconds(values, sent)
    compute, network = parts(values, sent)
    compute = compute + np.where(rows.ranks > 1, remedy.encode_s, 0.0)
    return combine(compute, network, math.inf if remedy.hidden else values["g"])


def _log_error(values: dict[str, Any], rows: Design, remedy: RemedyTerms, measured: np.ndarray):
    predicted = np.maximum(remedy_step_seconds(values, rows, remedy), MIN_STEP)
    return np.log(predicted) - np.log(measured)


def fit_encode(
    values: dict[str, Any], rows: Design, remedy: RemedyTerms, measured: np.ndarray
) -> float:
    """The encode time e (s) that fits the remedy's cells best on the log scale."""
    result = optimize.minimize_scalar(
        lambda e: float(
            np.sum(_log_error(values, rows, dataclasses.replace(remedy, encode_s=e), measured) ** 2)
        ),
        bounds=(0.0, MAX_ENCODE_S),
        method="bounded",
    )
    return float(result.x)


def remedy_ratios(cells: pd.DataFrame) -> dict[tuple[str, str], float]:
    """(strategy, comm) -> the median wire ratio the runners recorded (cells.csv)."""
    if cells.empty or "wire_ratio" not in cells or "comm" not in cells:
        return {}
    ok = cells[(cells["status"] == "ok") & np.isfinite(cells["wire_ratio"].astype(float))]
    return ok.groupby(["strategy", "comm"])["wire_ratio"].median().to_dict()


def remedy_work(replay: pd.DataFrame | None) -> dict[tuple[str, str, str], float]:
    """(strategy, model, comm) -> the remedy's own work per step, median over its
    collectives cells (gradient_replay.csv ``work_s``)."""
    if replay is None or replay.empty or "work_s" not in replay:
        return {}
    measured = replay[np.isfinite(replay["work_s"].astype(float))]
    return measured.groupby(["strategy", "model", "comm"])["work_s"].median().to_dict()


def fit_remedies(
    groups: Sequence[GroupModel],
    windows: pd.DataFrame,
    cells: pd.DataFrame,
    trainable_params: dict[str, int],
    replay: pd.DataFrame | None = None,
) -> tuple[list[tuple[GroupModel, RemedyTerms]], pd.DataFrame, pd.DataFrame]:
    """Each remedy of each strategy and model with a fitted model without one: (fitted
    remedies, their parameter rows, their held-out validation); ``replay``:
    gradient_replay.csv, whose ``work_s`` is each remedy's own work measured alone."""
    if windows.empty or "comm" not in windows:
        return [], pd.DataFrame(columns=REMEDY_COLUMNS), _empty_validation()
    ratios = remedy_ratios(cells)
    work = remedy_work(replay)
    fitted, rows, validations = [], [], []
    remedied = windows[~no_remedy(windows["comm"])]
    by_group = {(g.strategy, g.model): g for g in groups}
    for (strategy, model, comm), mine in remedied.groupby(["strategy", "model", "comm"]):
        base = {"strategy": strategy, "model": model, "comm": comm}
        declared = remedy_of(comm)  # an undeclared remedy is an error, never a default
        group = by_group.get((strategy, model))
        ratio = float(ratios.get((strategy, comm), math.nan))
        obs = observations(mine, trainable_params)
        obs = obs[obs["world_size"] > 1].reset_index(drop=True)
        reason = _unfit_reason(group, ratio, obs)
        if reason:
            rows.append(dict(base, status="not fitted", reason=reason))
            continue
        assert group is not None and group.chosen is not None
        own = float(work.get((strategy, model, comm), 0.0))
        remedy = RemedyTerms(comm, ratio, declared.hidden, work_s=own)
        fit = group.fits[group.chosen]
        design_rows = fit.design(obs, emulation=True)
        measured = obs["step_time_s"].to_numpy(dtype=float)
        remedy = dataclasses.replace(
            remedy, encode_s=fit_encode(fit.values, design_rows, remedy, measured)
        )
        validation = _validate(fit.values, obs, design_rows, remedy, base)
        validations.append(validation)
        fitted.append((group, remedy))
        rows.append(
            dict(
                base,
                overlap="hidden (max)" if remedy.hidden else group.chosen,
                wire_ratio=ratio,
                encode_s=remedy.encode_s,
                work_s=own if (strategy, model, comm) in work else math.nan,
                configurations=len(obs),
                loo_median_abs_relative_error=_median_error(validation, "leave one cell out"),
                left_out_median_abs_relative_error=_median_error(validation, "remedy left out"),
                status="ok",
            )
        )
    validation = pd.concat(validations, ignore_index=True) if validations else _empty_validation()
    return fitted, pd.DataFrame(rows).reindex(columns=REMEDY_COLUMNS), validation


def _unfit_reason(group: GroupModel | None, ratio: float, obs: pd.DataFrame) -> str | None:
    if group is None or group.chosen is None:
        return "no model of the cells without a remedy to start from"
    if not np.isfinite(ratio) or ratio <= 0:
        return "no cell recorded the bytes it sent (wire_ratio)"
    if obs.empty:
        return "no multi-rank cell measured"
    return None


def _validate(
    values: dict[str, Any], obs: pd.DataFrame, rows: Design, remedy: RemedyTerms, base: dict
) -> pd.DataFrame:
    """Each cell held out (e refitted on the others; alone, e = 0), and every cell
    predicted with nothing fitted on the remedy (e = its work measured alone)."""
    measured = obs["step_time_s"].to_numpy(dtype=float)
    out = []
    for index in range(len(obs)):
        keep = np.arange(len(obs)) != index
        encode = (
            fit_encode(values, _subset(rows, keep), remedy, measured[keep]) if keep.any() else 0.0
        )
        out.append(("leave one cell out", index, dataclasses.replace(remedy, encode_s=encode)))
        out.append(("remedy left out", index, dataclasses.replace(remedy, encode_s=remedy.work_s)))
    records = []
    for scheme, index, used in out:
        predicted = float(remedy_step_seconds(values, _subset(rows, [index]), used)[0])
        records.append(
            {
                "scheme": scheme,
                **base,
                **{k: obs.iloc[index][k] for k in OBS_COLUMNS[2:]},
                "measured": measured[index],
                "predicted": predicted,
                "relative_error": predicted / measured[index] - 1.0,
                "status": "ok",
            }
        )
    return pd.DataFrame(records).reindex(columns=REMEDY_VALIDATION_COLUMNS)


def _subset(rows: Design, index: Any) -> Design:
    return rows.take(index)


def _median_error(validation: pd.DataFrame, scheme: str) -> float:
    errors = validation.loc[validation["scheme"] == scheme, "relative_error"].abs()
    return float(errors.median()) if len(errors) else math.nan


def _empty_validation() -> pd.DataFrame:
    return pd.DataFrame(columns=REMEDY_VALIDATION_COLUMNS)


def remedy_predictions(
    fitted: Sequence[tuple[GroupModel, RemedyTerms]],
    predict: dict[str, Any],
    default_devices: Sequence[int],
    default_batches: Sequence[int],
) -> pd.DataFrame:
    """Per remedy, network and layout: the global batch from which N ranks beat one, with
    the remedy and without, and the speedups at each per-device batch."""
    rows = []
    nodes_list = list(predict.get("nodes") or [1, 2, 4, 8])
    devices_list = list(predict.get("devices_per_node") or default_devices)
    batches = list(predict.get("batch_per_device") or default_batches)
    for group, remedy in fitted:
        fit = group.fits[group.chosen]
        message = float(group.obs["gradient_bytes"].iloc[0])
        for network in predicted_networks(predict, group.links):
            links = dict(group.links)
            links[network.name] = network
            for nodes in nodes_list:
                for devices in devices_list:
                    if nodes == 1:  # within a node the link is not the network's
                        continue
                    rows += _layout_rows(
                        fit, group, remedy, links, network, nodes, devices, batches, message
                    )
    return pd.DataFrame(rows).reindex(columns=REMEDY_PREDICTION_COLUMNS)


def _layout_rows(fit, group, remedy, links, network, nodes, devices, batches, message) -> list:
    world = nodes * devices
    frame = pd.DataFrame(
        {
            "nodes": [nodes, 1],
            "network": [network.name, HOST_NETWORK],
            "devices_per_node": [devices, 1],
            "world_size": [world, 1],
            "batch_per_device": [1, 1],
            "gradient_bytes": message,
        }
    )
    rows = fit.design(frame, emulation=False, links=links)
    if not np.isfinite(rows.beta_ref[0]) and network.name not in fit.parameters.free_links:
        return []
    multi, single = _subset(rows, [0]), _subset(rows, [1])
    values = fit.values
    none = RemedyTerms(NO_REMEDY, 1.0, False)
    base = {
        "strategy": group.strategy,
        "model": group.model,
        "comm": remedy.comm,
        "network": network.name,
        "basis": network.source,
        "bandwidth_Gbit_s": network.gbit_per_s,
        "nodes": nodes,
        "devices_per_node": devices,
        "world_size": world,
        "break_even_global_batch": _break_even(values, multi, single, remedy),
        "break_even_none": _break_even(values, multi, single, none),
    }
    out = []
    for batch in batches:
        m, s = (
            dataclasses.replace(multi, batch=np.array([float(batch)])),
            dataclasses.replace(single, batch=np.array([float(batch)])),
        )
        one = float(remedy_step_seconds(values, s, none)[0])
        speed = world * one / float(remedy_step_seconds(values, m, remedy)[0])
        speed_none = world * one / float(remedy_step_seconds(values, m, none)[0])
        out.append(dict(base, batch_per_device=batch, speedup=speed, speedup_none=speed_none))
    return out


def _break_even(
    values: dict[str, Any], multi: Design, single: Design, remedy: RemedyTerms
) -> float:
    return break_even(
        values, multi, single, step=lambda v, rows: remedy_step_seconds(v, rows, remedy)
    )


def remedy_lines(predictions: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """One sentence per strategy, model, network and layout: from which global batch N ranks
    beat one without a remedy and with each; and the model's held-out error per remedy."""
    lines = []
    if not predictions.empty:
        # per network, its smallest layout across nodes: the first step off one machine
        smallest = predictions.sort_values([WORLD_SIZE, NODES]).groupby(
            ["strategy", "model", "network"], sort=True
        )
        first_layouts = smallest.head(1)[[*RUN, NETWORK, NODES, DEVICES_PER_NODE]]
        keys = [*RUN, NETWORK, NODES, DEVICES_PER_NODE]
        shown = predictions.merge(first_layouts, on=keys)
        for key, rows in shown.groupby(keys, sort=True):
            strategy, model, network, nodes, devices = key
            first = rows.iloc[0]
            parts_ = [
                f"with {r.comm} from {batch_words(r.break_even_global_batch)}"
                for r in rows.drop_duplicates("comm").itertuples(index=False)
            ]
            lines.append(
                f"{strategy} {model} over {network} ({first.bandwidth_Gbit_s:.3g} Gbit/s), "
                f"{Layout(nodes, devices).model_words()} beat 1 device from global batch "
                f"{batch_words(first.break_even_none)}; "
                + "; ".join(parts_)
                + " (model; no interval yet: the encode time is fitted without one)."
            )
    for row in table[table["status"] == "ok"].itertuples(index=False):
        lines.append(
            f"{row.strategy} {row.model} {row.comm}: encode {row.encode_s * 1e3:.1f} ms per step, "
            f"{row.wire_ratio:.3g}x fewer bytes; held-out median |error| "
            f"{row.loo_median_abs_relative_error:.1%} (leave one cell out), "
            f"{row.left_out_median_abs_relative_error:.1%} with nothing fitted on it (remedy "
            f"left out: its bytes, collectives and {_work_words(row.work_s)}), over "
            f"{row.configurations} configurations."
        )
    return lines


def _work_words(work_s: float) -> str:
    if not np.isfinite(work_s):
        return "no measured work of its own"
    return f"its own work measured alone, {work_s * 1e3:.1f} ms per step"


__all__ = [
    "REMEDY_COLUMNS",
    "REMEDY_PREDICTION_COLUMNS",
    "REMEDY_VALIDATION_COLUMNS",
    "RemedyTerms",
    "fit_encode",
    "fit_remedies",
    "remedy_lines",
    "remedy_predictions",
    "remedy_step_seconds",
]
