"""Least squares on log step times, the fit's covariance and the delta method that turns it
into intervals."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize

from dpscale.analysis.laws.commmodel.buckets import BucketTimeline
from dpscale.analysis.laws.commmodel.inputs import INTRA
from dpscale.analysis.laws.commmodel.model import (
    BUCKETS,
    MIN_STEP,
    Design,
    Parameters,
    design,
    network_seconds,
    step_seconds,
)
from dpscale.plan.link import Link
from dpscale.plan.traffic import Traffic

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval
# The max form's kinks make the optimiser crawl; 200 steps from each start are plenty for
# the smooth forms and enough for max (each start lands on its piece's minimum).
MAX_EVALUATIONS = 200


def safe_exp(value: float) -> float:
    """exp that gives inf (an unbounded interval) instead of raising OverflowError."""
    if math.isnan(value):
        return math.nan
    return math.exp(value) if value < 700 else math.inf


@dataclass
class Fit:
    parameters: Parameters
    theta: np.ndarray
    covariance: np.ndarray
    residual_var: float
    links: dict[str, Link]
    configurations: int
    timeline: BucketTimeline | None
    traffic: Traffic  # what the strategy sends a step (plan.traffic)

    def design(
        self, rows: pd.DataFrame, emulation: bool, links: dict[str, Link] | None = None
    ) -> Design:
        """The model's rows for ``rows`` (this fit's free links and timeline; ``links``:
        the fit's own, or those with a predicted network added)."""
        known = self.links if links is None else links
        return design(
            rows, known, self.parameters.free_links, emulation, self.timeline, traffic=self.traffic
        )

    @property
    def values(self) -> dict[str, Any]:
        return self.parameters.values(self.theta)

    def log_prediction(self, rows: Design) -> tuple[np.ndarray, np.ndarray]:
        """log T and its prediction-interval variance (parameters + residual scatter)."""

        def log_t(values: dict[str, Any]) -> np.ndarray:
            return np.log(np.maximum(step_seconds(values, rows), MIN_STEP))

        centre = log_t(self.values)
        gradient = stacked_jacobian(log_t, self.parameters, self.theta, centre)
        variance = propagate(gradient, self.covariance)
        return centre, variance + self.residual_var


def _covariance(jac: np.ndarray, residual_var: float) -> np.ndarray:
    """s^2 (J^T J)^-1 over the parameters the data inform; NaN rows and columns for those
    they do not (a zero column of J: e.g. the network's parameters when the max form hides
    every all-reduce behind compute), so their intervals say "unknown", not "exact"."""
    norms = np.linalg.norm(jac, axis=0)
    informed = norms > 1e-8 * max(float(norms.max(initial=0.0)), 1e-300)
    covariance = np.full((jac.shape[1], jac.shape[1]), np.nan)
    sub = jac[:, informed]
    covariance[np.ix_(informed, informed)] = residual_var * np.linalg.pinv(sub.T @ sub)
    return covariance


def propagate(gradient: np.ndarray, covariance: np.ndarray) -> np.ndarray:
    """Delta-method variance of each row's function; NaN where it depends on a parameter
    the data do not inform."""
    known = np.isfinite(np.diag(covariance))
    part = gradient[:, known]
    variance = np.einsum("ij,jk,ik->i", part, covariance[np.ix_(known, known)], part)
    depends = (np.abs(gradient[:, ~known]) > 1e-12).any(axis=1)
    return np.where(depends, np.nan, variance)


def delta_steps(theta: np.ndarray) -> np.ndarray:
    """The forward-difference step of each parameter in the delta method's gradients."""
    return 1e-6 * np.maximum(1.0, np.abs(theta))


def moved_sets(theta: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """One parameter set per parameter (sets x parameters): ``theta`` with that parameter
    moved by its step, the others as they are."""
    moved = np.repeat(theta[None, :], theta.size, axis=0)
    diagonal = np.arange(theta.size)
    moved[diagonal, diagonal] = theta + steps
    return moved


def stacked_jacobian(
    function: Callable[[dict[str, Any]], np.ndarray],
    parameters: Parameters,
    theta: np.ndarray,
    centre: np.ndarray,
) -> np.ndarray:
    """The forward-difference gradient (rows x parameters) of a function of the model's
    values (``function``: values -> one number per row, the last axis), every moved
    parameter set priced in one call (Parameters.stacked_values): the same numbers as a
    call per parameter."""
    if theta.size == 0:
        return np.zeros((centre.size, 0))
    steps = delta_steps(theta)
    shifted = function(parameters.stacked_values(moved_sets(theta, steps)))  # sets x rows
    return np.ascontiguousarray(((shifted - centre) / steps[:, None]).T)  # as column_stack


class NotEnoughData(ValueError):
    """The configurations cannot determine the model's parameters."""


class SameRows:
    """What every form fitted to the same rows (fit_forms) reads alike, worked out on first
    use and then shared: the rows' split by rank count, their links' references, the
    model's design of them and their measured log step times (a form's own choices, its
    parameters and starts, stay its own)."""

    def __init__(self, obs: pd.DataFrame, links: dict[str, Link], traffic: Traffic) -> None:
        self.obs, self.links, self.traffic = obs, links, traffic
        self._designs: dict[tuple[tuple[str, ...], int], Design] = {}

    @functools.cached_property
    def split(self) -> tuple[pd.DataFrame, pd.DataFrame, Design]:
        """(1-rank rows, multi-rank rows, their design without free links); raise
        NotEnoughData where the rows cannot be fitted by any form."""
        obs = self.obs
        single = obs[obs["world_size"] == 1]
        multi = obs[obs["world_size"] > 1]
        if single["batch_per_device"].nunique() < 2:
            raise NotEnoughData("needs 1-rank cells at two batch sizes or more")
        if multi.empty:
            raise NotEnoughData("no multi-rank cell measured")
        rows = design(multi, self.links, [], emulation=True, traffic=self.traffic)
        return single, multi, rows

    def design(self, free_links: list[str], timeline: BucketTimeline | None) -> Design:
        """The model's rows of every configuration, as fit_model fits them."""
        key = (tuple(free_links), id(timeline))
        if key not in self._designs:
            self._designs[key] = design(
                self.obs, self.links, free_links, True, timeline, traffic=self.traffic
            )
        return self._designs[key]

    @functools.cached_property
    def exposed(self) -> bool:
        """:func:`_exposed` of these rows."""
        return _exposed(*self.split)

    @functools.cached_property
    def measured(self) -> np.ndarray:
        """log step time of every configuration."""
        return np.log(self.obs["step_time_s"].to_numpy(dtype=float))


def choose_parameters(
    obs: pd.DataFrame,
    links: dict[str, Link],
    form: str,
    timeline: BucketTimeline | None,
    traffic: Traffic,
    same: SameRows | None = None,
) -> Parameters:
    """Fit only what the configurations inform; raise NotEnoughData when they cannot.
    ``same``: these rows' shared work (fit_forms), else worked out here."""
    if form == BUCKETS and timeline is None:
        raise NotEnoughData("no bucket timeline (a one-rank cell of the strategy records it)")
    same = same if same is not None else SameRows(obs, links, traffic)
    _, multi, rows = same.split
    has_ref = np.isfinite(rows.beta_ref)
    link_names = [
        INTRA if n == 1 else net for n, net in zip(multi["nodes"], multi["network"], strict=True)
    ]
    free = sorted({name for name, ref in zip(link_names, has_ref, strict=True) if not ref})
    referenced = {(r, b) for r, b, ok in zip(rows.ranks, rows.beta_ref, has_ref, strict=True) if ok}
    parameters = Parameters(
        form=form,
        free_links=free,
        fit_sigma=bool((rows.colocated > 1).any()),
        fit_alpha0=len(referenced) >= 2 and (form != BUCKETS or same.exposed),
        fit_eta=bool(has_ref.any()),
        # the compute communication takes on shared cores: told apart from the co-location
        # slowdown only by links of different speeds
        fit_kappa=bool((rows.colocated > 1).any()) and len(set(link_names)) >= 2,
    )
    if len(obs) <= len(parameters.names):
        raise NotEnoughData(f"{len(obs)} configurations for {len(parameters.names)} parameters")
    return parameters


def _exposed(single: pd.DataFrame, multi: pd.DataFrame, rows: Design) -> bool:
    """Whether some multi-rank configuration's all-reduce, on its referenced link, takes at
    least one rank's whole step at its batch: only there does the bucket form see an extra
    latency per hop on the step's critical path. Where every all-reduce hides behind the
    backward pass, that latency and kappa both only lengthen the step a little, and the fit
    cannot tell them apart (post 003 mini, 1 GbE held out: 16 ms a hop and kappa 0, every
    1 GbE step 10-20% too slow)."""
    one_rank = single.groupby("batch_per_device")["step_time_s"].median()
    if one_rank.empty:
        return False
    network = network_seconds(rows, rows.beta_ref, rows.alpha_ref)
    batches = one_rank.index.to_numpy(dtype=float)
    nearest = [batches[np.abs(batches - b).argmin()] for b in multi["batch_per_device"]]
    alone = one_rank.loc[nearest].to_numpy(dtype=float)
    return bool(np.any(np.isfinite(network) & (network >= alone)))


def fit_model(
    obs: pd.DataFrame,
    links: dict[str, Link],
    form: str,
    timeline: BucketTimeline | None = None,
    *,
    traffic: Traffic,
    known: Mapping[str, Fit] | None = None,
    same: SameRows | None = None,
) -> Fit:
    """Least squares on log step times of the configurations ``obs`` (one strategy and
    model); ``timeline``: its buckets, for the bucket form; ``traffic``: the strategy's;
    ``known``: other forms already fitted to these same rows, whose solutions this form
    starts from instead of fitting them again, and ``same`` the work they share
    (:func:`fit_forms`)."""
    same = same if same is not None else SameRows(obs, links, traffic)
    parameters = choose_parameters(obs, links, form, timeline, traffic, same)
    rows = same.design(parameters.free_links, timeline)
    measured = same.measured
    lower, upper = parameters.bounds()
    residuals = LogResiduals(parameters, rows, measured, (lower, upper))
    best = None
    for start in _starts(obs, parameters, links, timeline, traffic, known or {}, same):
        start = np.clip(start, np.array(lower) + 1e-9, np.array(upper) - 1e-9)
        result = optimize.least_squares(
            residuals,
            start,
            jac=residuals.jacobian,
            bounds=(lower, upper),
            x_scale="jac",
            max_nfev=MAX_EVALUATIONS,
        )
        if best is None or result.cost < best.cost:
            best = result
    assert best is not None
    dof = len(obs) - len(parameters.names)
    residual_var = 2 * best.cost / dof if dof > 0 else math.nan
    covariance = _covariance(best.jac, residual_var)
    return Fit(parameters, best.x, covariance, residual_var, links, len(obs), timeline, traffic)


# scipy's relative step of a forward difference: the square root of float64's epsilon
_RELATIVE_STEP = float(np.finfo(np.float64).eps) ** 0.5


class LogResiduals:
    """The residuals least squares minimises, log T predicted - log T measured, and their
    Jacobian by the forward difference scipy's ``jac="2-point"`` takes (the same steps,
    turned at the bounds alike), every perturbed parameter set priced in one call of the
    model (Parameters.stacked_values) instead of one call each: the same Jacobian to the
    bit, so the same optimiser path, at a fraction of the calls (most of a fit's time)."""

    def __init__(
        self,
        parameters: Parameters,
        rows: Design,
        measured: np.ndarray,
        bounds: tuple[Sequence[float], Sequence[float]],
    ) -> None:
        self.parameters, self.rows, self.measured = parameters, rows, measured
        self.lower, self.upper = (np.asarray(b, dtype=float) for b in bounds)
        self._last: tuple[np.ndarray, np.ndarray] | None = None  # (theta, its residuals)

    def __call__(self, theta: np.ndarray) -> np.ndarray:
        predicted = step_seconds(self.parameters.values(theta), self.rows)
        residuals = np.log(np.maximum(predicted, MIN_STEP)) - self.measured
        self._last = (np.array(theta, dtype=float), residuals)
        return residuals

    def jacobian(self, theta: np.ndarray) -> np.ndarray:
        """d residuals / d theta (rows x parameters), as scipy.optimize's 2-point
        approx_derivative computes it at ``theta`` within the bounds."""
        x0 = np.asarray(theta, dtype=float)
        last = self._last
        f0 = last[1] if last is not None and np.array_equal(last[0], x0) else self(x0)
        step = self._steps(x0)
        predicted = step_seconds(self.parameters.stacked_values(moved_sets(x0, step)), self.rows)
        shifted = np.log(np.maximum(predicted, MIN_STEP)) - self.measured
        transposed = (shifted - f0) / ((x0 + step) - x0)[:, None]  # parameters x rows
        return transposed.T  # scipy's layout (a transposed view), so its algebra is the same

    def _steps(self, x0: np.ndarray) -> np.ndarray:
        """scipy's absolute steps (eps^0.5 max(1, |x|), sign of x, 0 counted positive),
        turned back or shortened where a step would leave the bounds."""
        sign = (x0 >= 0).astype(float) * 2 - 1
        step = _RELATIVE_STEP * sign * np.maximum(1.0, np.abs(x0))
        adjusted = step.copy()
        below, above = x0 - self.lower, self.upper - x0
        moved = x0 + step
        violated = (moved < self.lower) | (moved > self.upper)
        fitting = np.abs(step) <= np.maximum(below, above)
        adjusted[violated & fitting] *= -1
        forward = (above >= below) & ~fitting
        adjusted[forward] = above[forward]
        backward = (above < below) & ~fitting
        adjusted[backward] = -below[backward]
        return adjusted


def _starts(
    obs: pd.DataFrame,
    parameters: Parameters,
    links: dict[str, Link],
    timeline: BucketTimeline | None,
    traffic: Traffic,
    known: Mapping[str, Fit],
    same: SameRows | None = None,
) -> list[np.ndarray]:
    """Starting points: the additive fit's solution (the forms differ only in how the two
    parts combine) and, for the additive fit itself, a few bandwidth guesses."""
    if parameters.form == BUCKETS:
        additive = _start_fit(obs, links, "additive", traffic, known, same)
        named = dict(zip(additive.parameters.names, additive.theta, strict=True))
        return [
            np.array([named.get(n, kappa) for n in parameters.names], dtype=float)
            for kappa in (0.0, 1.0, 5.0)
        ]
    if parameters.form == "pollux":
        additive = _start_fit(obs, links, "additive", traffic, known, same)
        named = dict(zip(additive.parameters.names, additive.theta, strict=True))
        return [np.array([named.get(n, g) for n in parameters.names]) for g in (1.5, 4.0, 9.0)]
    if parameters.form == "max":  # the kinks trap a local search: start near, from g = 10
        try:
            near = _start_fit(obs, links, "pollux", traffic, known, same)
        except NotEnoughData:  # one parameter fewer than pollux: start from additive
            near = _start_fit(obs, links, "additive", traffic, known, same)
        named = dict(zip(near.parameters.names, near.theta, strict=True))
        return [np.array([named[n] for n in parameters.names], dtype=float)]
    single = obs[obs["world_size"] == 1]
    slope, intercept = np.polyfit(single["batch_per_device"], single["step_time_s"], 1)
    base = {
        "log_v0": -math.log(max(slope, 1e-9)),
        "t_c1": max(intercept, 1e-4),
        "sigma": 0.1,
        "alpha0": 1e-4,
    }
    starts = []
    for beta_guess in (1e8, 1e9, 1e10):
        named = dict(base, log_eta=math.log(min(beta_guess / 1e9, 1.0)))
        for name in parameters.free_links:
            named[f"log_beta_{name}"] = math.log(beta_guess)
        starts.append(np.array([named[n] for n in parameters.names], dtype=float))
    return starts


def _start_fit(
    obs: pd.DataFrame,
    links: dict[str, Link],
    form: str,
    traffic: Traffic,
    known: Mapping[str, Fit],
    same: SameRows | None = None,
) -> Fit:
    """The fit of ``form`` another form starts from: ``known``'s (the same rows, fitted
    already; a timeline changes no form but the bucket form), else fitted now."""
    if form in known:
        return known[form]
    return fit_model(obs, links, form, traffic=traffic, known=known, same=same)


# the order that lets each form start from a form fitted before it (see _starts)
NESTING = ("additive", "pollux", "max", BUCKETS)
FitError = (ValueError, np.linalg.LinAlgError)  # NotEnoughData among them


def fit_forms(
    obs: pd.DataFrame,
    links: dict[str, Link],
    forms: Sequence[str],
    timeline: BucketTimeline | None,
    traffic: Traffic,
) -> tuple[dict[str, Fit], dict[str, Exception]]:
    """Every form in ``forms`` fitted to the same rows, ({form: fit}, {form: why not}),
    each in the order of ``forms``. Each form starts from the fits it builds on (additive,
    pollux) fitted once here rather than again inside every form, and the rows' design
    worked out once for all (:class:`SameRows`): the same solutions, about half the work
    of fitting the forms one by one."""
    known: dict[str, Fit] = {}
    failed: dict[str, Exception] = {}
    same = SameRows(obs, links, traffic)
    order = sorted(forms, key=lambda f: NESTING.index(f) if f in NESTING else len(NESTING))
    for form in order:
        try:
            known[form] = fit_model(
                obs, links, form, timeline, traffic=traffic, known=known, same=same
            )
        except FitError as error:
            failed[form] = error
    fitted = {form: known[form] for form in forms if form in known}
    return fitted, {form: failed[form] for form in forms if form in failed}
