"""The whole analysis: every overlap form fitted and validated per strategy and model, one
chosen by held-out error, and the table of fitted parameters."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.laws.commmodel.buckets import BucketTimeline, timelines
from dpscale.analysis.laws.commmodel.fitting import Z95, Fit, NotEnoughData, fit_forms, safe_exp
from dpscale.analysis.laws.commmodel.inputs import links_from_config, observations
from dpscale.analysis.laws.commmodel.validation import (
    FEWEST_RANKS,
    LEAVE_ONE_CELL_OUT,
    LEAVE_ONE_NETWORK_OUT,
    SUMMARY_COLUMNS,
    VALIDATION_COLUMNS,
    cell_scheme,
    fewest_multi_ranks,
    held_out_by_form,
    layout_law_baseline,
    summarise,
    window_cv,
)
from dpscale.plan.link import Link
from dpscale.plan.traffic import Traffic

# ordered by parameter count (the bucket form: the mechanism, from a recorded timeline)
FORMS = ("additive", "max", "pollux", "buckets")


PARAMETER_COLUMNS = [
    "strategy",
    "model",
    "overlap",
    "chosen",
    "parameter",
    "value",
    "lo",
    "hi",
    "unit",
    "fitted",
    "loo_median_abs_relative_error",
    "configurations",
    "rmse_log",
]


@dataclass
class GroupModel:
    strategy: str
    model: str
    obs: pd.DataFrame
    links: dict[str, Link]
    fits: dict[str, Fit]
    loo_error: dict[str, float]
    chosen: str | None
    reason: str | None
    traffic: Traffic  # what the strategy declares it sends a step (plan.traffic)
    window_cv: float = math.nan
    cell_scheme: str = LEAVE_ONE_CELL_OUT  # how its cells were held out (validation.CELL_SCHEMES)


def fit_group(
    obs: pd.DataFrame,
    links: dict[str, Link],
    strategy: str,
    model: str,
    traffic: Traffic,
    forms: Sequence[str] = FORMS,
    validate: bool = True,
    fewest_rank_links: dict[str, Link] | None = None,
    timeline: BucketTimeline | None = None,
) -> tuple[GroupModel, pd.DataFrame]:
    """Every overlap form fitted to all configurations and validated (``validate``: else
    the first form that fits is chosen); the chosen one. ``fewest_rank_links``: the links
    as the collective benchmarks at the fewest ranks alone know them, for the extrapolation
    in ranks (default ``links``). The cells are held out one at a time, or in folds in a
    large group (validation.cell_scheme)."""
    fitted, failed = fit_forms(obs, links, forms, timeline, traffic)
    reason = _unfitted_reason(failed)
    scheme = cell_scheme(obs)
    loo_error: dict[str, float] = {}
    validation = pd.DataFrame(columns=VALIDATION_COLUMNS)
    chosen = next(iter(fitted), None)
    if validate and fitted:
        by_form = _validations(
            obs, links, list(fitted), scheme, fewest_rank_links, timeline, traffic
        )
        for form, (cells, *_) in by_form.items():
            errors = cells.loc[cells["status"] == "ok", "relative_error"].abs()
            loo_error[form] = float(errors.median()) if len(errors) else math.nan
        held_out = {
            form: _held_out(_concat(frames, VALIDATION_COLUMNS)) for form, frames in by_form.items()
        }
        chosen = _choose(held_out, list(fitted))
        validation = _concat([f for frames in by_form.values() for f in frames], VALIDATION_COLUMNS)
    validation["chosen"] = validation["overlap"] == chosen
    group = GroupModel(
        strategy, model, obs, links, fitted, loo_error, chosen, reason, traffic, cell_scheme=scheme
    )
    return group, validation


def _unfitted_reason(failed: Mapping[str, Exception]) -> str | None:
    """Why forms could not be fitted: the first form's lack of data, else the last form's
    failure to start (the words fit_group has always given)."""
    reason = None
    for form, error in failed.items():
        if isinstance(error, NotEnoughData):
            reason = reason or f"not enough data: {error}"
        else:  # a fit that cannot start
            reason = f"{form} not fitted: {error}"
    return reason


def _validations(
    obs: pd.DataFrame,
    links: dict[str, Link],
    forms: list[str],
    scheme: str,
    fewest_rank_links: dict[str, Link] | None,
    timeline: BucketTimeline | None,
    traffic: Traffic,
) -> dict[str, list[pd.DataFrame]]:
    """Each form's held-out predictions: (the cells held out by ``scheme``, one of
    validation.CELL_SCHEMES; networks left out; fit on the fewest ranks), every held-out
    set's refits of all forms done together."""
    by_cell = held_out_by_form(obs, links, forms, scheme, timeline, traffic)
    empty = pd.DataFrame(columns=VALIDATION_COLUMNS)
    by_network = {form: empty for form in forms}
    if obs.loc[obs["nodes"] > 1, "network"].nunique() >= 2:  # links between nodes
        by_network = held_out_by_form(obs, links, forms, LEAVE_ONE_NETWORK_OUT, timeline, traffic)
    rank_links = links if fewest_rank_links is None else fewest_rank_links
    by_ranks = held_out_by_form(obs, rank_links, forms, FEWEST_RANKS, timeline, traffic)
    return {form: [by_cell[form], by_network[form], by_ranks[form]] for form in forms}


def declared(traffic: Mapping[str, Traffic], strategy: str) -> Traffic:
    """The strategy's declared traffic; no strategy is priced as anything it did not say."""
    if strategy not in traffic:
        raise KeyError(
            f"{strategy} has no declared traffic in the model's inputs (declared: "
            f"{sorted(traffic)}); its adapter's STRATEGY.traffic says what a step sends"
        )
    return traffic[strategy]


@dataclass(frozen=True)
class HeldOut:
    """A form's held-out predictions over every scheme: how many it could not make, and
    the median |relative error| of those it made."""

    unpredicted: int
    median_error: float


def _held_out(validation: pd.DataFrame) -> HeldOut:
    ok = validation["status"] == "ok"
    errors = validation.loc[ok, "relative_error"].abs()
    return HeldOut(int((~ok).sum()), float(errors.median()) if len(errors) else math.nan)


def _choose(held_out: dict[str, HeldOut], fitted: list[str]) -> str:
    """The form that predicts the most held-out configurations (every scheme pooled: a form
    that cannot be fitted without a network cannot predict one), then the smallest median
    error over them; within 1e-3 of it, the form with fewer parameters (without held-out
    errors: the first form fitted, additive by default)."""
    finite = {k: v for k, v in held_out.items() if np.isfinite(v.median_error)}
    if not finite:
        return fitted[0]
    fewest = min(v.unpredicted for v in finite.values())
    best = min(v.median_error for v in finite.values() if v.unpredicted == fewest)
    for form in FORMS:  # ordered by parameter count
        mine = finite.get(form)
        if mine and mine.unpredicted == fewest and mine.median_error <= best + 1e-3:
            return form
    raise AssertionError("unreachable")


def _at_most_ranks(comm_fits: pd.DataFrame | None, ranks: int | None) -> pd.DataFrame | None:
    """The collective benchmarks' fits at ``ranks`` or fewer (all of them when None)."""
    if comm_fits is None or ranks is None or "world_size" not in comm_fits:
        return comm_fits
    return comm_fits[comm_fits["world_size"] <= ranks]


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    frames = [f.reindex(columns=columns) for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True).reindex(columns=columns)


def parameter_rows(group: GroupModel) -> list[dict[str, Any]]:
    rows = []
    for form, fit in group.fits.items():
        se = np.sqrt(np.maximum(np.diag(fit.covariance), 0.0))
        named = dict(zip(fit.parameters.names, zip(fit.theta, se, strict=True), strict=True))
        base = {
            "strategy": group.strategy,
            "model": group.model,
            "overlap": form,
            "chosen": form == group.chosen,
            "loo_median_abs_relative_error": group.loo_error.get(form, math.nan),
            "configurations": fit.configurations,
            "rmse_log": math.sqrt(fit.residual_var) if np.isfinite(fit.residual_var) else math.nan,
        }
        values = fit.values
        report = [
            ("v0", "log_v0", values["v0"], "img/s per device", safe_exp, 1.0),
            ("t_c1", "t_c1", values["t_c1"], "s", None, 1.0),
            ("sigma", "sigma", values["sigma"], "compute slowdown per co-located rank", None, 1.0),
            ("alpha0", "alpha0", values["alpha0"], "s per hop", None, 1.0),
            ("eta", "log_eta", values["eta"], "fraction of the reference bandwidth", safe_exp, 1.0),
            ("g", "g", values["g"], "overlap exponent", None, 1.0),
            (
                "kappa",
                "kappa",
                values["kappa"],
                "s of compute per GB sent, shared cores",
                None,
                1.0,
            ),
        ]
        for index, link in enumerate(fit.parameters.free_links):
            report.append(
                (
                    f"beta_{link}",
                    f"log_beta_{link}",
                    values["beta_free"][index] / 1e9,
                    "GB/s",
                    safe_exp,
                    1e-9,
                )
            )
        limits = dict(
            zip(fit.parameters.names, zip(*fit.parameters.bounds(), strict=True), strict=True)
        )
        for name, key, value, unit, transform, scale in report:
            if key in named:
                theta, error = named[key]
                lower, upper = limits[key]  # an interval never leaves the parameter's range
                low = max(theta - Z95 * error, lower) if np.isfinite(error) else math.nan
                high = min(theta + Z95 * error, upper) if np.isfinite(error) else math.nan
                if transform is not None:
                    low, high = transform(low) * scale, transform(high) * scale
                fitted = True
            else:
                low = high = value
                fitted = False
            rows.append(
                dict(base, parameter=name, value=value, lo=low, hi=high, unit=unit, fitted=fitted)
            )
    return rows


def analyse(
    windows: pd.DataFrame,
    trainable_params: dict[str, int],
    networks: Sequence[Link],
    traffic: Mapping[str, Traffic],
    comm_fits: pd.DataFrame | None = None,
    forms: Sequence[str] = FORMS,
    validate: bool = True,
    timeline_table: pd.DataFrame | None = None,
) -> tuple[list[GroupModel], pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(models, parameters, validation, summary) for every strategy and model measured;
    ``traffic``: each strategy's declared traffic (a strategy without one is an error);
    ``timeline_table``: bucket_timeline.csv, for the bucket form."""
    recorded = timelines(timeline_table)
    obs_all = observations(windows, trainable_params)
    everything = observations(windows.assign(quality="ok"), trainable_params)
    scatter = window_cv(windows)
    groups, parameters, validations = [], [], []
    for (strategy, model), measured in everything.groupby(["strategy", "model"], sort=True):
        mine = (obs_all["strategy"] == strategy) & (obs_all["model"] == model)
        obs = obs_all[mine].reset_index(drop=True)
        links = links_from_config(networks, comm_fits, strategy)
        fewest_rank_links = links_from_config(
            networks, _at_most_ranks(comm_fits, fewest_multi_ranks(obs)), strategy
        )
        group, validation = fit_group(
            obs,
            links,
            strategy,
            model,
            declared(traffic, strategy),
            forms,
            validate,
            fewest_rank_links,
            recorded.get((strategy, model)),
        )
        left_out = len(measured) - len(obs)
        if group.chosen is None and left_out:
            group.reason = (
                f"{group.reason or 'not enough data'}; {left_out} of {len(measured)} "
                "configurations left out: only contaminated cells (other work took the CPU)"
            )
        group.window_cv = float(scatter.get((strategy, model), math.nan))
        groups.append(group)
        parameters += parameter_rows(group)
        validations.append(validation)
        if validate and group.chosen is not None:
            validations.append(layout_law_baseline(obs))
    validation = _concat(validations, VALIDATION_COLUMNS)
    summary = summarise(validation)
    if not summary.empty:
        chosen = {(g.strategy, g.model): g.chosen for g in groups}
        summary["chosen"] = [
            chosen.get((s, m)) == o
            for s, m, o in zip(
                summary["strategy"], summary["model"], summary["overlap"], strict=True
            )
        ]
    return (
        groups,
        pd.DataFrame(parameters).reindex(columns=PARAMETER_COLUMNS),
        validation,
        summary.reindex(columns=SUMMARY_COLUMNS),
    )
