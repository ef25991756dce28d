"""The step-time model: compute time and the strategy's declared traffic (plan.traffic) of
each configuration, combined by an overlap form."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.laws.commmodel import buckets
from dpscale.analysis.laws.commmodel.buckets import BucketRows, BucketTimeline
from dpscale.analysis.laws.commmodel.inputs import INTRA
from dpscale.plan.link import Link
from dpscale.plan.traffic import Traffic

MIN_STEP = 1e-12  # the shortest step time (s): keeps log T finite
# the form built from the mechanism (commmodel.buckets); the others combine two totals
BUCKETS = "buckets"
_FIXED_G = {"additive": 1.0, BUCKETS: math.nan}


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
    wire_factor: np.ndarray  # bytes through the busiest link per gradient byte (plan.traffic)
    hops: np.ndarray  # latency-bound steps of one bucket's collectives
    buckets: BucketRows  # what the bucket form needs (commmodel.buckets)

    @functools.cached_property
    def link_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(free link or not, index into the free bandwidths, reference or 1) of each row:
        what :func:`link_beta` reads at every evaluation, worked out once per Design."""
        free = self.free_link >= 0
        return (
            free,
            np.maximum(self.free_link, 0),
            np.where(np.isfinite(self.beta_ref), self.beta_ref, 1.0),
        )

    @functools.cached_property
    def fixed_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool, bool]:
        """(bytes through the busiest link, co-located ranks beyond the first, multi-rank
        or not, every row multi-rank, every row one rank) of each row: products and tests
        of the rows alone, which every evaluation of the model otherwise redoes (the same
        operations, so the same numbers)."""
        multi = self.ranks > 1
        return (
            self.wire_factor * self.message,
            self.colocated - 1.0,
            multi,
            bool(multi.all()),
            not multi.any(),
        )

    def varies_in_batch_only(self) -> bool:
        """Whether every row is the first but for its batch (one layout at several batches),
        NaN equal to NaN."""
        same = [
            np.array_equal(array, np.broadcast_to(array[:1], array.shape), equal_nan=True)
            for name, array in [*vars(self).items(), *vars(self.buckets).items()]
            if isinstance(array, np.ndarray) and name != "batch"
        ]
        return all(same)

    def with_batch(self, batch: np.ndarray) -> Design:
        """These rows at ``batch`` (a column or a grid the rows broadcast against): a shallow
        copy, so :attr:`link_terms` and :attr:`fixed_terms` once worked out carry over
        (neither reads the batch); the break-even search asks for thousands."""
        self.link_terms, self.fixed_terms  # noqa: B018 (worked out once, carried by copies)
        moved = copy.copy(self)
        moved.batch = batch
        return moved

    def take(self, index: Any) -> Design:
        """The rows at ``index`` (a slice or a list of positions)."""
        return _map(self, lambda array: array[index])

    def repeat_first(self, size: int) -> Design:
        """The first row, ``size`` times."""
        return _map(self, lambda array: np.repeat(array[:1], size, axis=0))

    def with_buckets(self, **changes: Any) -> Design:
        return dataclasses.replace(self, buckets=dataclasses.replace(self.buckets, **changes))


def _map(rows: Design, function: Any) -> Design:
    fields = {k: getattr(rows, k) for k in Design.__dataclass_fields__ if k != "buckets"}
    mapped = {k: function(v) for k, v in fields.items()}
    inner = {k: function(v) for k, v in rows.buckets.__dict__.items()}
    return Design(**mapped, buckets=BucketRows(**inner))


def design(
    rows: pd.DataFrame,
    links: dict[str, Link],
    free_links: list[str],
    emulation: bool,
    timeline: BucketTimeline | None = None,
    *,
    traffic: Traffic,
) -> Design:
    """``emulation``: co-location as on this machine (emulated nodes share it) instead of
    as on a real cluster. ``timeline``: the buckets of the strategy and model, for the
    bucket form. ``traffic``: what the strategy sends a step, as it declares it."""
    link_names = [
        INTRA if n == 1 else net for n, net in zip(rows["nodes"], rows["network"], strict=True)
    ]
    by_name = {name: links.get(name) or Link(name) for name in dict.fromkeys(link_names)}
    known = [by_name[name] for name in link_names]
    colocated = np.where(
        [emulation and link.emulated for link in known],
        rows["world_size"].to_numpy(),
        rows["devices_per_node"].to_numpy(),
    )
    free_index = {name: i for i, name in enumerate(free_links)}  # the names are distinct
    host = links.get(INTRA)
    host_beta = np.array(
        [
            host.bytes_per_s
            if emulation and link.emulated and host is not None and np.isfinite(host.bytes_per_s)
            else math.inf
            for link in known
        ],
        dtype=float,
    )
    return Design(
        batch=rows["batch_per_device"].to_numpy(dtype=float),
        ranks=rows["world_size"].to_numpy(dtype=float),
        colocated=colocated.astype(float),
        message=rows["gradient_bytes"].to_numpy(dtype=float),
        beta_ref=np.array([link.bytes_per_s for link in known], dtype=float),
        alpha_ref=np.array([link.latency_s for link in known], dtype=float),
        free_link=np.array([free_index.get(n, -1) for n in link_names], dtype=int),
        **traffic_rows(rows, traffic),
        buckets=buckets.timeline_rows(timeline, host_beta),
    )


def traffic_rows(rows: pd.DataFrame, traffic: Traffic) -> dict[str, np.ndarray]:
    """Each row's wire factor and hops from its layout and the strategy's traffic."""
    nodes = rows["nodes"].to_numpy(dtype=float)
    per_node = rows["devices_per_node"].to_numpy(dtype=float)
    return {
        "wire_factor": np.asarray(traffic.wire_factor(nodes, per_node), dtype=float)
        * np.ones_like(nodes),
        "hops": np.asarray(traffic.hops(nodes, per_node), dtype=float) * np.ones_like(nodes),
    }


def network_seconds(rows: Design, beta: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """One step's collectives of all the gradient bytes (plan.traffic.seconds' price)."""
    return rows.fixed_terms[0] / beta + rows.hops * alpha


@dataclass
class Parameters:
    """Which parameters are fitted (the others held at their fixed values)."""

    form: str
    free_links: list[str]
    fit_sigma: bool
    fit_alpha0: bool
    fit_eta: bool
    fit_kappa: bool = False
    names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = ["log_v0", "t_c1"]
        names += ["sigma"] if self.fit_sigma else []
        names += ["alpha0"] if self.fit_alpha0 else []
        names += ["log_eta"] if self.fit_eta and self.form != BUCKETS else []
        names += [f"log_beta_{name}" for name in self.free_links]
        names += ["g"] if self.form == "pollux" else []
        names += ["kappa"] if self.fit_kappa and self.form == BUCKETS else []
        self.names = names

    def values(self, theta: np.ndarray) -> dict[str, Any]:
        named = dict(zip(self.names, theta, strict=True))
        return {
            "form": self.form,
            "kappa": named.get("kappa", 0.0),
            "v0": math.exp(named["log_v0"]),
            "t_c1": named["t_c1"],
            "sigma": named.get("sigma", 0.0),
            "alpha0": named.get("alpha0", 0.0),
            "eta": math.exp(named.get("log_eta", 0.0)),
            "beta_free": np.array(
                [math.exp(named[f"log_beta_{n}"]) for n in self.free_links] or [1.0]
            ),
            "g": named.get("g", _FIXED_G.get(self.form, math.inf)),
        }

    def sampled_values(self, thetas: np.ndarray) -> dict[str, Any]:
        """:meth:`values` of many parameter sets at once (``thetas``: samples x parameters):
        each fitted value a column (samples x 1), so the model's functions price every
        sample against the same rows in one call (samples x rows); fixed values stay
        scalars."""
        columns = {name: thetas[:, [i]] for i, name in enumerate(self.names)}
        beta_free = [np.exp(columns[f"log_beta_{n}"]) for n in self.free_links]
        fixed = self.values(thetas[0])
        return {
            "form": self.form,
            "kappa": columns.get("kappa", fixed["kappa"]),
            "v0": np.exp(columns["log_v0"]),
            "t_c1": columns["t_c1"],
            "sigma": columns.get("sigma", fixed["sigma"]),
            "alpha0": columns.get("alpha0", fixed["alpha0"]),
            "eta": np.exp(columns["log_eta"]) if "log_eta" in columns else fixed["eta"],
            "beta_free": np.hstack(beta_free) if beta_free else fixed["beta_free"],
            "g": columns.get("g", fixed["g"]),
        }

    def stacked_values(self, thetas: np.ndarray) -> dict[str, Any]:
        """:meth:`values` of each row of ``thetas`` (sets x parameters), stacked as
        :meth:`sampled_values` stacks them (a fitted value a column, a fixed one a scalar),
        each number exactly as :meth:`values` gives it (``math.exp``, not ``np.exp``): one
        call of the model then prices every set as a call per set would, to the bit."""
        column = {name: thetas[:, i] for i, name in enumerate(self.names)}

        def exp(name: str) -> np.ndarray:
            return np.array([[math.exp(value)] for value in column[name]], dtype=float)

        fixed = self.values(thetas[0])
        stacked = {key: fixed[key] for key in ("form", "kappa", "sigma", "alpha0", "eta", "g")}
        stacked |= {"v0": exp("log_v0"), "t_c1": column["t_c1"][:, None].copy()}
        for name in ("kappa", "sigma", "alpha0", "g"):
            if name in column:
                stacked[name] = column[name][:, None].copy()
        if "log_eta" in column:
            stacked["eta"] = exp("log_eta")
        betas = [exp(f"log_beta_{name}") for name in self.free_links]
        stacked["beta_free"] = np.hstack(betas) if betas else fixed["beta_free"]
        return stacked

    def bounds(self) -> tuple[list[float], list[float]]:
        table = {
            "log_v0": (math.log(1e-6), math.log(1e9)),
            "t_c1": (0.0, 1e3),
            "sigma": (0.0, 10.0),
            "alpha0": (0.0, 1.0),
            "log_eta": (math.log(1e-4), 0.0),  # a framework cannot beat the line rate
            "g": (1.0, 10.0),
            "kappa": (0.0, 20.0),
        }
        pairs = [table.get(n, (math.log(1e3), math.log(1e14))) for n in self.names]
        return [p[0] for p in pairs], [p[1] for p in pairs]


def combine(compute: np.ndarray, network: np.ndarray, g: float | np.ndarray) -> np.ndarray:
    """(T_comp^g + T_net^g)^(1/g): g = 1 adds, g = inf takes the larger; ``g`` an array
    (one per sampled parameter set, Parameters.sampled_values) takes each its own."""
    if np.ndim(g) > 0:
        return _combine_each(compute, network, np.asarray(g, dtype=float))
    if math.isinf(g):
        return np.maximum(compute, network)
    if g == 1.0:
        return compute + network
    top = np.maximum(np.maximum(compute, network), MIN_STEP)
    return top * ((compute / top) ** g + (network / top) ** g) ** (1.0 / g)


def _combine_each(compute: np.ndarray, network: np.ndarray, g: np.ndarray) -> np.ndarray:
    """:func:`combine` with a ``g`` per sample: each element as the scalar g would give it."""
    top = np.maximum(np.maximum(compute, network), MIN_STEP)
    finite = np.where(np.isfinite(g), g, 1.0)  # inf's elements are taken from max below
    general = top * ((compute / top) ** finite + (network / top) ** finite) ** (1.0 / finite)
    adds = np.where(g == 1.0, compute + network, general)
    return np.where(np.isinf(g), np.maximum(compute, network), adds)


def compute_seconds(values: dict[str, Any], rows: Design) -> np.ndarray:
    """One rank's compute, slowed by the ranks it shares the machine with."""
    slowdown = 1.0 + values["sigma"] * rows.fixed_terms[1]
    return slowdown * rows.batch / values["v0"] + values["t_c1"]


def link_beta(values: dict[str, Any], rows: Design) -> np.ndarray:
    """Each row's link bandwidth: fitted, or the reference scaled by eta."""
    free, index, reference = rows.link_terms
    beta_free = values["beta_free"]
    if np.ndim(beta_free) == 1 and not free.any():  # what np.where would pick, in its shape
        return np.broadcast_arrays(values["eta"] * reference, free)[0]
    return np.where(free, np.take(beta_free, index, axis=-1), values["eta"] * reference)


def parts(values: dict[str, Any], rows: Design) -> tuple[np.ndarray, np.ndarray]:
    """(T_comp, T_net) of each row."""
    network = network_seconds(rows, link_beta(values, rows), rows.alpha_ref + values["alpha0"])
    _, _, multi, every, none = rows.fixed_terms
    if every:  # what np.where would pick, without the copy
        network = np.broadcast_arrays(network, multi)[0]
    else:
        network = np.zeros_like(network) if none else np.where(multi, network, 0.0)
    return compute_seconds(values, rows), network


def bucket_step_seconds(values: dict[str, Any], rows: Design) -> np.ndarray:
    """The bucket form (commmodel.buckets): buckets served in order behind the backward."""
    compute = compute_seconds(values, rows)
    alpha = rows.alpha_ref + values["alpha0"]
    costs = buckets.bucket_costs(
        rows.buckets, rows.message, rows.wire_factor, rows.hops, link_beta(values, rows), alpha
    )
    step = buckets.bucket_step(
        rows.buckets,
        rows.batch,
        compute,
        costs,
        values["kappa"],
        rows.colocated,
        rows.wire_factor * rows.message / 1e9,
    )
    return np.where(rows.ranks > 1, step, compute)


def step_seconds(values: dict[str, Any], rows: Design) -> np.ndarray:
    if values["form"] == BUCKETS:
        return bucket_step_seconds(values, rows)
    compute, network = parts(values, rows)
    return combine(compute, network, values["g"])
