"""A communication model of a data-parallel step, fitted to the measured cells and used to
predict configurations that were not measured.

Step time of a configuration with N ranks, per-device batch b, c ranks sharing one machine:

    T_comp = (1 + sigma (c - 1)) b / v0 + t_c1        (the 1-rank throughput law, slowed
                                                       when ranks share cores and memory)
    T_net  = 2(N-1)/N S / beta + 2(N-1)(alpha_ref + alpha0)   (ring all-reduce of the fp32
                                                       gradients, S bytes; 0 for N = 1)
    T      = (T_comp^g + T_net^g)^(1/g)               (the overlap form)

The link between the ranks is the intra-node one for cells on one node and the study's
network otherwise. Its bandwidth is eta x a reference: the collective benchmark's fitted
beta (``comm_fits.csv``) when there is one, else the configured rate (``rate``, bit/s / 8);
``eta`` (one efficiency per strategy and model) says how much of it the framework's gradient
all-reduce gets while training. A link with neither (the intra-node one without a collective
benchmark, a real ``interface`` network) gets its own fitted bandwidth. ``alpha_ref`` is the
benchmark's latency or the configured ``delay``; ``alpha0`` is a fitted per-hop software
latency. Parameters no measurement informs are held fixed (as Pollux does): ``sigma`` = 0
without co-located ranks, ``alpha0`` = 0 unless two different (N, reference bandwidth) pairs
separate it from ``eta``, ``eta`` = 1 without a link that has a reference. At most seven
parameters: v0, t_c1, sigma, alpha0, eta, one bandwidth per unrated link, g. ``sigma`` is
there because on a CPU two ranks of one machine share its cores' caches and memory bandwidth
(and, on this one, the cores with the network emulation): the 1-rank v0 overstates their
rate. Its 95% interval says whether the data demand it (an interval that holds 0: they do
not); on GPUs, one device per rank, it should come out near 0.

Overlap. Three forms are fitted: ``additive`` (g = 1: the all-reduce waits for the backward
pass), ``max`` (g -> infinity: it hides completely behind compute) and ``pollux``
(g fitted in [1, 10], Pollux's (OSDI'21) interpolation between the two). The form with the
smallest median absolute error on held-out configurations (leave one configuration out)
is the one used for predictions; a tie goes to the form with fewer parameters. Choosing by
held-out error, not by the fit's residuals, keeps the extra parameter g from winning by
fitting noise: on a 2-core CPU, PyTorch's DDP overlaps its bucketed all-reduce with the
backward pass only as far as the cores are free, so which form wins is the data's answer.

Fits minimise squared errors of log step times of configuration means (each configuration
is one point: windows of one cell are not independent), so every configuration weighs the
same whatever its step time. Intervals: the fit's covariance s^2 (J^T J)^-1, propagated to
each prediction by the delta method on log T, with the residual scatter s^2 added (a
prediction interval, 95%, normal on the log scale).

On this machine emulated nodes are network namespaces of one 2-core computer, so their
ranks share the machine as much as two ranks on one node do: c = world size on emulated
(rated) networks, devices per node elsewhere. Predictions are for real clusters, where
only the ranks of one node share it: c = devices per node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize

from dpscale.plan import ring

FORMS = ("additive", "max", "pollux")
HOST = "host"  # the network column of one-node cells (and of a cluster's own network)
INTRA = "intra-node"  # the link of one-node cells: their ranks talk inside the machine
UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "us": 1e-6, "ms": 1e-3}
Z95 = 1.959963984540054
MIN_STEP = 1e-12
# The max form's kinks make the optimiser crawl; 200 steps from each start are plenty for
# the smooth forms and enough for max (each start lands on its piece's minimum).
MAX_EVALUATIONS = 200

OBS_COLUMNS = [
    "strategy",
    "model",
    "nodes",
    "network",
    "devices_per_node",
    "world_size",
    "batch_per_device",
]
VALIDATION_COLUMNS = [
    "scheme",
    "overlap",
    "chosen",
    "strategy",
    "model",
    "network",
    "nodes",
    "devices_per_node",
    "world_size",
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
    "worst",
    "status",
]
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
PREDICTION_COLUMNS = [
    "strategy",
    "model",
    "overlap",
    "network",
    "basis",
    "bandwidth_Gbit_s",
    "latency_us",
    "nodes",
    "devices_per_node",
    "world_size",
    "batch_per_device",
    "measured",
    "step_time_s",
    "step_time_lo_s",
    "step_time_hi_s",
    "img_s",
    "img_s_lo",
    "img_s_hi",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "break_even_global_batch",
    "status",
    "reason",
]


def safe_exp(value: float) -> float:
    """exp that gives inf (an unbounded interval) instead of raising OverflowError."""
    if math.isnan(value):
        return math.nan
    return math.exp(value) if value < 700 else math.inf


def parse_quantity(text: str, field_name: str) -> float:
    """``10gbit`` -> 1e10 (bit/s), ``50us`` -> 5e-5 (s); ValueError naming the field."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([a-z]+)", str(text))
    if not match or match.group(2) not in UNITS:
        raise ValueError(
            f"{field_name}: {text!r} is not a quantity; allowed: a number with one of "
            f"{sorted(UNITS)} (e.g. 10gbit, 50us)"
        )
    return float(match.group(1)) * UNITS[match.group(2)]


@dataclass(frozen=True)
class Link:
    """What the model knows of one link before fitting: a reference bandwidth (bytes/s,
    NaN when none: the bandwidth is then fitted) and a reference latency (s)."""

    name: str
    beta_ref: float
    alpha_ref: float
    emulated: bool
    source: str


def links_from_config(
    networks: Sequence[Any], comm_fits: pd.DataFrame | None, strategy: str
) -> dict[str, Link]:
    """The study's links for one strategy: the intra-node link and each network."""
    links = {INTRA: _link_from_comm_fits(HOST, comm_fits, strategy, intra=True)}
    for entry in networks:
        if entry == HOST or not isinstance(entry, dict):  # multi-node cells on a real network
            links[HOST] = _link_from_comm_fits(HOST, comm_fits, strategy, intra=False)
            continue
        name = entry["name"]
        measured = _link_from_comm_fits(name, comm_fits, strategy, intra=False)
        emulated = "rate" in entry
        if not math.isnan(measured.beta_ref):
            links[name] = Link(name, measured.beta_ref, measured.alpha_ref, emulated, "comm_fits")
        elif emulated:
            rate = parse_quantity(entry["rate"], f"networks.{name}.rate") / 8
            delay = (
                parse_quantity(entry["delay"], f"networks.{name}.delay")
                if "delay" in entry
                else 0.0
            )
            links[name] = Link(name, rate, delay, True, "configured rate")
        else:
            links[name] = Link(name, math.nan, 0.0, False, "fitted")
    return links


def _link_from_comm_fits(
    name: str, comm_fits: pd.DataFrame | None, strategy: str, intra: bool
) -> Link:
    unknown = Link(INTRA if intra else name, math.nan, 0.0, False, "fitted")
    if comm_fits is None or comm_fits.empty:
        return unknown
    rows = comm_fits[
        (comm_fits["strategy"] == strategy)
        & (comm_fits["network"] == name)
        & (comm_fits["status"] == "ok")
        & ((comm_fits["nodes"] == 1) if intra else (comm_fits["nodes"] > 1))
    ]
    rows = rows[np.isfinite(rows["beta_GB_s"].astype(float)) & (rows["beta_GB_s"] > 0)]
    if rows.empty:
        return unknown
    beta = float(rows["beta_GB_s"].median()) * 1e9
    alpha = float(rows["alpha_s"].clip(lower=0).median())
    return Link(unknown.name, beta, alpha, False, "comm_fits")


def observations(windows: pd.DataFrame, trainable_params: dict[str, int]) -> pd.DataFrame:
    """One row per measured configuration (repeats pooled): mean step time over its timed
    windows, contaminated cells left out, synthetic mode only."""
    frame = windows[windows["mode"] == "synthetic"] if "mode" in windows else windows
    if "quality" in frame:
        frame = frame[frame["quality"].fillna("") != "contaminated"]
    columns = [*OBS_COLUMNS, "step_time_s", "windows", "gradient_bytes"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame = frame[np.isfinite(frame["step_time_s"]) & (frame["step_time_s"] > 0)]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    grouped = frame.groupby(OBS_COLUMNS, sort=True)["step_time_s"]
    table = grouped.agg(step_time_s="mean", windows="size").reset_index()
    table["gradient_bytes"] = [
        ring.gradient_bytes(int(trainable_params.get(m, 0))) for m in table["model"]
    ]
    return table.reindex(columns=columns)


# -- the model -------------------------------------------------------------------------


@dataclass
class Design:
    """The rows the model is evaluated on, as arrays."""

    batch: np.ndarray
    ranks: np.ndarray
    colocated: np.ndarray
    message: np.ndarray
    beta_ref: np.ndarray
    alpha_ref: np.ndarray
    free_link: np.ndarray  # index into the free bandwidths, -1 for a link with a reference


def design(
    rows: pd.DataFrame, links: dict[str, Link], free_links: list[str], emulation: bool
) -> Design:
    """``emulation``: co-location as on this machine (emulated nodes share it) instead of
    as on a real cluster."""
    link_names = [
        INTRA if n == 1 else net for n, net in zip(rows["nodes"], rows["network"], strict=True)
    ]
    known = [links.get(name, Link(name, math.nan, 0.0, False, "fitted")) for name in link_names]
    colocated = np.where(
        [emulation and link.emulated for link in known],
        rows["world_size"].to_numpy(),
        rows["devices_per_node"].to_numpy(),
    )
    return Design(
        batch=rows["batch_per_device"].to_numpy(dtype=float),
        ranks=rows["world_size"].to_numpy(dtype=float),
        colocated=colocated.astype(float),
        message=rows["gradient_bytes"].to_numpy(dtype=float),
        beta_ref=np.array([link.beta_ref for link in known], dtype=float),
        alpha_ref=np.array([link.alpha_ref for link in known], dtype=float),
        free_link=np.array(
            [free_links.index(n) if n in free_links else -1 for n in link_names], dtype=int
        ),
    )


@dataclass
class Parameters:
    """Which parameters are fitted (the others held at their fixed values)."""

    form: str
    free_links: list[str]
    fit_sigma: bool
    fit_alpha0: bool
    fit_eta: bool
    names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = ["log_v0", "t_c1"]
        names += ["sigma"] if self.fit_sigma else []
        names += ["alpha0"] if self.fit_alpha0 else []
        names += ["log_eta"] if self.fit_eta else []
        names += [f"log_beta_{name}" for name in self.free_links]
        names += ["g"] if self.form == "pollux" else []
        self.names = names

    def values(self, theta: np.ndarray) -> dict[str, Any]:
        named = dict(zip(self.names, theta, strict=True))
        return {
            "v0": math.exp(named["log_v0"]),
            "t_c1": named["t_c1"],
            "sigma": named.get("sigma", 0.0),
            "alpha0": named.get("alpha0", 0.0),
            "eta": math.exp(named.get("log_eta", 0.0)),
            "beta_free": np.array(
                [math.exp(named[f"log_beta_{n}"]) for n in self.free_links] or [1.0]
            ),
            "g": named.get("g", 1.0 if self.form == "additive" else math.inf),
        }

    def bounds(self) -> tuple[list[float], list[float]]:
        table = {
            "log_v0": (math.log(1e-6), math.log(1e9)),
            "t_c1": (0.0, 1e3),
            "sigma": (0.0, 10.0),
            "alpha0": (0.0, 1.0),
            "log_eta": (math.log(1e-4), 0.0),  # a framework cannot beat the line rate
            "g": (1.0, 10.0),
        }
        pairs = [table.get(n, (math.log(1e3), math.log(1e14))) for n in self.names]
        return [p[0] for p in pairs], [p[1] for p in pairs]


def combine(compute: np.ndarray, network: np.ndarray, g: float) -> np.ndarray:
    """(T_comp^g + T_net^g)^(1/g): g = 1 adds, g = inf takes the larger."""
    if math.isinf(g):
        return np.maximum(compute, network)
    if g == 1.0:
        return compute + network
    top = np.maximum(np.maximum(compute, network), MIN_STEP)
    return top * ((compute / top) ** g + (network / top) ** g) ** (1.0 / g)


def parts(values: dict[str, Any], rows: Design) -> tuple[np.ndarray, np.ndarray]:
    """(T_comp, T_net) of each row."""
    slowdown = 1.0 + values["sigma"] * (rows.colocated - 1.0)
    compute = slowdown * rows.batch / values["v0"] + values["t_c1"]
    beta = np.where(
        rows.free_link >= 0,
        values["beta_free"][np.maximum(rows.free_link, 0)],
        values["eta"] * np.where(np.isfinite(rows.beta_ref), rows.beta_ref, 1.0),
    )
    ranks = rows.ranks
    network = ring.ring_allreduce_seconds(
        rows.message, ranks, beta, rows.alpha_ref + values["alpha0"]
    )
    return compute, np.where(ranks > 1, network, 0.0)


def step_seconds(values: dict[str, Any], rows: Design) -> np.ndarray:
    compute, network = parts(values, rows)
    return combine(compute, network, values["g"])


# -- fitting ---------------------------------------------------------------------------


@dataclass
class Fit:
    parameters: Parameters
    theta: np.ndarray
    covariance: np.ndarray
    residual_var: float
    links: dict[str, Link]
    configurations: int

    @property
    def values(self) -> dict[str, Any]:
        return self.parameters.values(self.theta)

    def log_prediction(self, rows: Design) -> tuple[np.ndarray, np.ndarray]:
        """log T and its prediction-interval variance (parameters + residual scatter)."""

        def log_t(theta: np.ndarray) -> np.ndarray:
            return np.log(np.maximum(step_seconds(self.parameters.values(theta), rows), MIN_STEP))

        centre = log_t(self.theta)
        gradient = _jacobian(log_t, self.theta, centre)
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


def _jacobian(
    function: Callable[[np.ndarray], np.ndarray], theta: np.ndarray, centre: np.ndarray
) -> np.ndarray:
    columns = []
    for index in range(theta.size):
        step = 1e-6 * max(1.0, abs(theta[index]))
        moved = theta.copy()
        moved[index] += step
        columns.append((function(moved) - centre) / step)
    return np.column_stack(columns) if columns else np.zeros((centre.size, 0))


class NotEnoughData(ValueError):
    """The configurations cannot determine the model's parameters."""


def choose_parameters(obs: pd.DataFrame, links: dict[str, Link], form: str) -> Parameters:
    """Fit only what the configurations inform; raise NotEnoughData when they cannot."""
    single = obs[obs["world_size"] == 1]
    multi = obs[obs["world_size"] > 1]
    if single["batch_per_device"].nunique() < 2:
        raise NotEnoughData("needs 1-rank cells at two batch sizes or more")
    if multi.empty:
        raise NotEnoughData("no multi-rank cell measured")
    rows = design(multi, links, [], emulation=True)
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
        fit_alpha0=len(referenced) >= 2,
        fit_eta=bool(has_ref.any()),
    )
    if len(obs) <= len(parameters.names):
        raise NotEnoughData(f"{len(obs)} configurations for {len(parameters.names)} parameters")
    return parameters


def fit_model(obs: pd.DataFrame, links: dict[str, Link], form: str) -> Fit:
    """Least squares on log step times of the configurations ``obs`` (one strategy and
    model)."""
    parameters = choose_parameters(obs, links, form)
    rows = design(obs, links, parameters.free_links, emulation=True)
    measured = np.log(obs["step_time_s"].to_numpy(dtype=float))

    def residuals(theta: np.ndarray) -> np.ndarray:
        predicted = step_seconds(parameters.values(theta), rows)
        return np.log(np.maximum(predicted, MIN_STEP)) - measured

    lower, upper = parameters.bounds()
    best = None
    for start in _starts(obs, parameters, links):
        start = np.clip(start, np.array(lower) + 1e-9, np.array(upper) - 1e-9)
        result = optimize.least_squares(
            residuals, start, bounds=(lower, upper), x_scale="jac", max_nfev=MAX_EVALUATIONS
        )
        if best is None or result.cost < best.cost:
            best = result
    assert best is not None
    dof = len(obs) - len(parameters.names)
    residual_var = 2 * best.cost / dof if dof > 0 else math.nan
    covariance = _covariance(best.jac, residual_var)
    return Fit(parameters, best.x, covariance, residual_var, links, len(obs))


def _starts(obs: pd.DataFrame, parameters: Parameters, links: dict[str, Link]) -> list[np.ndarray]:
    """Starting points: the additive fit's solution (the forms differ only in how the two
    parts combine) and, for the additive fit itself, a few bandwidth guesses."""
    if parameters.form == "pollux":
        additive = fit_model(obs, links, "additive")
        named = dict(zip(additive.parameters.names, additive.theta, strict=True))
        return [np.array([named.get(n, g) for n in parameters.names]) for g in (1.5, 4.0, 9.0)]
    if parameters.form == "max":  # the kinks trap a local search: start near, from g = 10
        try:
            near = fit_model(obs, links, "pollux")
        except NotEnoughData:  # one parameter fewer than pollux: start from additive
            near = fit_model(obs, links, "additive")
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


# -- validation ------------------------------------------------------------------------


def held_out_predictions(
    obs: pd.DataFrame, links: dict[str, Link], form: str, scheme: str
) -> pd.DataFrame:
    """Each multi-rank configuration (``loo``) or network (``lono``) predicted from a model
    fitted without it."""
    multi = obs[obs["world_size"] > 1]
    if scheme == "leave one cell out":
        groups = [(multi.index[[i]], None) for i in range(len(multi))]
    else:
        groups = [
            (multi.index[multi["network"] == net], net)
            for net in sorted(multi.loc[multi["nodes"] > 1, "network"].unique())
        ]
    rows = []
    for held, network in groups:
        rows.extend(_predict_held_out(obs, held, links, form, scheme, network))
    return pd.DataFrame(rows).reindex(columns=VALIDATION_COLUMNS)


def _predict_held_out(
    obs: pd.DataFrame,
    held: pd.Index,
    links: dict[str, Link],
    form: str,
    scheme: str,
    network: str | None,
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
            fitted = fit_model(train, links, form)
        except (ValueError, np.linalg.LinAlgError) as error:  # NotEnoughData among them
            reason = f"not enough data without it: {error}"
    if reason is not None:
        return [dict(b, status="not predicted", reason=reason) for b in base]
    centre, variance = fitted.log_prediction(
        design(test, links, fitted.parameters.free_links, emulation=True)
    )
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
        if link is not None and np.isfinite(link.beta_ref):
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
                f"{row['nodes']}x{row['devices_per_node']} {row['network']} "
                f"b{row['batch_per_device']}: {row['relative_error']:+.0%}"
            )
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "predicted_cells": len(ok),
                "median_abs_relative_error": float(errors.median()) if len(ok) else math.nan,
                "within_10pct": int((errors <= 0.10).sum()),
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
    for _, layout in multi.groupby(["nodes", "network", "devices_per_node"], sort=True):
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


# -- the whole analysis ------------------------------------------------------------------


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
    window_cv: float = math.nan


def fit_group(
    obs: pd.DataFrame,
    links: dict[str, Link],
    strategy: str,
    model: str,
    forms: Sequence[str] = FORMS,
    validate: bool = True,
) -> tuple[GroupModel, pd.DataFrame]:
    """Every overlap form fitted to all configurations and validated (``validate``: else
    the first form that fits is chosen); the chosen one."""
    fitted: dict[str, Fit] = {}
    loo_error: dict[str, float] = {}
    validations = []
    reason = None
    for form in forms:
        try:
            fitted[form] = fit_model(obs, links, form)
        except NotEnoughData as error:
            reason = f"not enough data: {error}"
            continue
        except (ValueError, np.linalg.LinAlgError) as error:  # a fit that cannot start
            reason = f"{form} not fitted: {error}"
            continue
        if not validate:
            continue
        loo = held_out_predictions(obs, links, form, "leave one cell out")
        lono = pd.DataFrame(columns=VALIDATION_COLUMNS)
        if obs.loc[obs["nodes"] > 1, "network"].nunique() >= 2:  # links between nodes
            lono = held_out_predictions(obs, links, form, "leave one network out")
        validations += [loo, lono]
        errors = loo.loc[loo["status"] == "ok", "relative_error"].abs()
        loo_error[form] = float(errors.median()) if len(errors) else math.nan
    chosen = _choose(loo_error, list(fitted)) if fitted else None
    validation = _concat(validations, VALIDATION_COLUMNS)
    validation["chosen"] = validation["overlap"] == chosen
    return GroupModel(strategy, model, obs, links, fitted, loo_error, chosen, reason), validation


def _choose(loo_error: dict[str, float], fitted: list[str]) -> str:
    """Smallest held-out median error; within 1e-3 of it, the form with fewer parameters
    (without held-out errors: the first form fitted, additive by default)."""
    finite = {k: v for k, v in loo_error.items() if np.isfinite(v)}
    if not finite:
        return fitted[0]
    best = min(finite.values())
    for form in FORMS:  # ordered by parameter count
        if form in finite and finite[form] <= best + 1e-3:
            return form
    raise AssertionError("unreachable")


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
    networks: Sequence[Any],
    comm_fits: pd.DataFrame | None = None,
    forms: Sequence[str] = FORMS,
    validate: bool = True,
) -> tuple[list[GroupModel], pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(models, parameters, validation, summary) for every strategy and model measured."""
    obs_all = observations(windows, trainable_params)
    everything = observations(windows.assign(quality="ok"), trainable_params)
    scatter = window_cv(windows)
    groups, parameters, validations = [], [], []
    for (strategy, model), measured in everything.groupby(["strategy", "model"], sort=True):
        mine = (obs_all["strategy"] == strategy) & (obs_all["model"] == model)
        obs = obs_all[mine].reset_index(drop=True)
        links = links_from_config(networks, comm_fits, strategy)
        group, validation = fit_group(obs, links, strategy, model, forms, validate)
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


# -- predictions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PredictedNetwork:
    name: str
    bandwidth_bit_s: float
    latency_s: float
    basis: str


def predicted_networks(predict: dict[str, Any], links: dict[str, Link]) -> list[PredictedNetwork]:
    """The config's ``predict.networks`` and the study's own links that have a reference
    (their bandwidth taken as the model sees it)."""
    out = []
    for index, entry in enumerate(predict.get("networks") or []):
        field_name = f"predict.networks[{index}]"
        bandwidth = parse_quantity(entry["bandwidth"], f"{field_name}.bandwidth")
        latency = (
            parse_quantity(entry["latency"], f"{field_name}.latency")
            if entry.get("latency")
            else 0.0
        )
        out.append(PredictedNetwork(entry["name"], bandwidth, latency, "predict.networks"))
    for link in links.values():
        if link.name != INTRA and np.isfinite(link.beta_ref):
            out.append(
                PredictedNetwork(
                    link.name, link.beta_ref * 8, link.alpha_ref, f"study ({link.source})"
                )
            )
    return out


def predictions(
    groups: list[GroupModel],
    predict: dict[str, Any],
    default_devices: Sequence[int],
    default_batches: Sequence[int],
) -> pd.DataFrame:
    rows = []
    nodes_list = list(predict.get("nodes") or [1, 2, 4, 8])
    devices_list = list(predict.get("devices_per_node") or default_devices)
    batches = list(predict.get("batch_per_device") or default_batches)
    for group in groups:
        if group.chosen is None:
            continue
        fit = group.fits[group.chosen]
        message = float(group.obs["gradient_bytes"].iloc[0])
        measured = set(map(tuple, group.obs[OBS_COLUMNS].astype(str).to_numpy()))
        for index, network in enumerate(predicted_networks(predict, group.links)):
            links = dict(group.links)
            links[network.name] = Link(
                network.name, network.bandwidth_bit_s / 8, network.latency_s, False, network.basis
            )
            for nodes in nodes_list:
                for devices in devices_list:
                    if nodes == 1 and devices == 1:
                        continue
                    name = INTRA if nodes == 1 else network.name
                    if nodes == 1 and index > 0:
                        continue  # one-node rows do not depend on the network: list them once
                    rows += _prediction_rows(
                        fit, group, links, name, network, nodes, devices, batches, message, measured
                    )
    return pd.DataFrame(rows).reindex(columns=PREDICTION_COLUMNS)


def _prediction_rows(
    fit: Fit,
    group: GroupModel,
    links: dict[str, Link],
    link_name: str,
    network: PredictedNetwork,
    nodes: int,
    devices: int,
    batches: Sequence[int],
    message: float,
    measured: set[tuple[str, ...]],
) -> list[dict[str, Any]]:
    world = nodes * devices
    frame = pd.DataFrame(
        {
            "strategy": group.strategy,
            "model": group.model,
            "nodes": [nodes] * len(batches) + [1] * len(batches),
            "network": [network.name] * len(batches) + [HOST] * len(batches),
            "devices_per_node": [devices] * len(batches) + [1] * len(batches),
            "world_size": [world] * len(batches) + [1] * len(batches),
            "batch_per_device": list(batches) * 2,
            "gradient_bytes": message,
        }
    )
    base = {
        "strategy": group.strategy,
        "model": group.model,
        "overlap": group.chosen,
        "network": HOST if nodes == 1 else network.name,
        "basis": f"{INTRA} ({group.links[INTRA].source})" if nodes == 1 else network.basis,
        "bandwidth_Gbit_s": math.nan if nodes == 1 else network.bandwidth_bit_s / 1e9,
        "latency_us": math.nan if nodes == 1 else round(network.latency_s * 1e6, 3),
        "nodes": nodes,
        "devices_per_node": devices,
        "world_size": world,
    }
    link = links.get(link_name)
    if link_name not in fit.parameters.free_links and (
        link is None or not np.isfinite(link.beta_ref)
    ):
        return [
            dict(
                base,
                batch_per_device=b,
                status="not predicted",
                reason=f"link {link_name!r} was not measured",
            )
            for b in batches
        ]
    rows = design(frame, links, fit.parameters.free_links, emulation=False)
    centre, variance = fit.log_prediction(rows)
    n = len(batches)
    speed_log, speed_var = _log_speedup(fit, rows, n)
    values = fit.values
    even = break_even(values, _row(rows, 0), _row(rows, n))  # the same at every batch
    out = []
    for i, batch in enumerate(batches):
        half = Z95 * math.sqrt(variance[i]) if np.isfinite(variance[i]) else math.nan
        s_half = Z95 * math.sqrt(speed_var[i]) if np.isfinite(speed_var[i]) else math.nan
        step = safe_exp(centre[i])
        key = (
            group.strategy,
            group.model,
            str(nodes),
            base["network"],
            str(devices),
            str(world),
            str(batch),
        )
        out.append(
            dict(
                base,
                batch_per_device=batch,
                measured=key in measured,
                step_time_s=step,
                step_time_lo_s=safe_exp(centre[i] - half),
                step_time_hi_s=safe_exp(centre[i] + half),
                img_s=world * batch / step,
                img_s_lo=world * batch / safe_exp(centre[i] + half),
                img_s_hi=world * batch / safe_exp(centre[i] - half),
                speedup=safe_exp(speed_log[i]),
                speedup_lo=safe_exp(speed_log[i] - s_half),
                speedup_hi=safe_exp(speed_log[i] + s_half),
                break_even_global_batch=even,
                status="ok",
                reason=None,
            )
        )
    return out


def _log_speedup(fit: Fit, rows: Design, n: int) -> tuple[np.ndarray, np.ndarray]:
    """log(N T_1 / T_N) at each batch and its variance (parameters only: the residual
    scatter of a ratio of two predictions of one model largely cancels)."""
    world = rows.ranks[:n]

    def log_speedup(theta: np.ndarray) -> np.ndarray:
        t = np.maximum(step_seconds(fit.parameters.values(theta), rows), MIN_STEP)
        return np.log(world) + np.log(t[n:]) - np.log(t[:n])

    centre = log_speedup(fit.theta)
    gradient = _jacobian(log_speedup, fit.theta, centre)
    return centre, propagate(gradient, fit.covariance)


def _row(rows: Design, index: int) -> Design:
    return Design(**{k: getattr(rows, k)[index : index + 1] for k in rows.__dataclass_fields__})


def break_even(values: dict[str, Any], multi: Design, single: Design) -> float:
    """Smallest global batch B at which the N-rank configuration finishes a step sooner
    than one rank (strong scaling): T_N(B/N) < T_1(B). 0: always; inf: never (up to 1e8)."""
    ranks = float(multi.ranks[0])

    def gain(global_batch: np.ndarray) -> np.ndarray:
        size = global_batch.size
        m = Design(
            **{k: np.repeat(getattr(multi, k)[:1], size) for k in multi.__dataclass_fields__}
        )
        one = Design(
            **{k: np.repeat(getattr(single, k)[:1], size) for k in single.__dataclass_fields__}
        )
        m.batch, one.batch = global_batch / ranks, global_batch
        return step_seconds(values, one) - step_seconds(values, m)

    grid = np.geomspace(ranks * 1e-3, 1e8, 400)
    gains = gain(grid)
    if gains[0] > 0:
        return 0.0
    winning = np.nonzero(gains > 0)[0]
    if winning.size == 0:
        return math.inf
    first = int(winning[0])
    return float(
        optimize.brentq(lambda b: float(gain(np.array([b]))[0]), grid[first - 1], grid[first])
    )


def model_curves(group: GroupModel, batches: np.ndarray) -> pd.DataFrame:
    """The chosen model's img/s over ``batches`` for every measured layout (as measured,
    on this machine), for the throughput figure."""
    if group.chosen is None:
        return pd.DataFrame()
    fit = group.fits[group.chosen]
    layouts = group.obs[
        ["nodes", "network", "devices_per_node", "world_size", "gradient_bytes"]
    ].drop_duplicates()
    frames = []
    for layout in layouts.itertuples(index=False):
        frame = pd.DataFrame({**layout._asdict(), "batch_per_device": batches})
        step = step_seconds(
            fit.values, design(frame, group.links, fit.parameters.free_links, emulation=True)
        )
        frame["img_s"] = frame["world_size"] * batches / step
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def summary_lines(groups: list[GroupModel], summary: pd.DataFrame) -> list[str]:
    """One sentence per strategy, model and validation scheme (the chosen form), against
    the 10% target; or why there is no model."""
    lines = []
    for group in groups:
        name = f"{group.strategy} {group.model}"
        if group.chosen is None:
            lines.append(f"{name}: no model ({group.reason or 'not enough data'}).")
            continue
        rows = summary[
            (summary["strategy"] == group.strategy)
            & (summary["model"] == group.model)
            & (summary["overlap"] == group.chosen)
        ]
        others = ", ".join(
            f"{form} {error:.1%}"
            for form, error in group.loo_error.items()
            if form != group.chosen and np.isfinite(error)
        )
        for row in rows.itertuples(index=False):
            if row.status != "ok":
                lines.append(f"{name}, {row.scheme}: not enough data.")
                continue
            verdict = "meets" if row.median_abs_relative_error <= 0.10 else "misses"
            lines.append(
                f"{name}, {row.scheme} ({group.chosen} overlap): median |error| "
                f"{row.median_abs_relative_error:.1%} over {row.predicted_cells} configurations, "
                f"{verdict} the 10% target; {row.within_10pct} within 10%; worst {row.worst}."
            )
        if others:
            lines.append(f"{name}: other overlap forms, leave one cell out: {others}.")
        lines += _noise_floor_line(name, group, summary)
    return lines or ["not enough data: no strategy has 1-rank and multi-rank cells."]


def _noise_floor_line(name: str, group: GroupModel, summary: pd.DataFrame) -> list[str]:
    rows = summary[
        (summary["strategy"] == group.strategy)
        & (summary["model"] == group.model)
        & (summary["scheme"] == BASELINE)
        & (summary["status"] == "ok")
    ]
    if rows.empty:
        return []
    return [
        f"{name}: noise floor: a straight line per layout through its other batches "
        f"(2 parameters per layout) predicts a held-out cell with median |error| "
        f"{rows['median_abs_relative_error'].iloc[0]:.1%}; the windows of one cell scatter by "
        f"{group.window_cv:.1%} (median coefficient of variation)."
    ]
