"""The communication model's batched evaluations give, to the bit, what one call per
parameter set or per row gave: the fit's forward-difference Jacobian (scipy's 2-point
scheme), the delta method's gradients, the compression a layout needs at each batch and the
break-even batch under moved parameters. Each replaced a loop of model calls (the scale
study's time, docs/decisions/held-out-cells-at-scale.md); the numbers must not move."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize._numdiff import approx_derivative

from dpscale.analysis.laws import commmodel
from dpscale.analysis.laws.commmodel import compression, fitting, prediction
from dpscale.analysis.laws.commmodel.model import MIN_STEP, step_seconds
from dpscale.plan.model_inputs import configured_links
from dpscale.plan.traffic import RingAllReduce
from helpers.window_rows import window_row

PARAMS = 11_000_000
NETWORKS = configured_links([{"name": "slow", "rate": "1gbit"}, {"name": "fast", "rate": "10gbit"}])
TRAFFIC = RingAllReduce()
LAYOUTS = [(1, 1, "host"), (1, 2, "host"), (2, 1, "slow"), (2, 1, "fast"), (4, 1, "slow")]
BATCHES = [1, 2, 4, 8, 16]


def _obs(seed: int = 3) -> pd.DataFrame:
    """Two windows of every layout and batch: an additive step with log-normal noise."""
    random = np.random.default_rng(seed)
    rows = []
    for nodes, devices, network in LAYOUTS:
        world = nodes * devices
        for batch in BATCHES:
            compute = (1 + 0.15 * (devices - 1)) * batch / 40.0 + 0.02
            rate = {"slow": 0.6e9 / 8, "fast": 0.6e10 / 8, "host": 5e8}[network]
            comm = 0.0 if world == 1 else 2 * (world - 1) / world * 4 * PARAMS / rate
            for window in range(2):
                noisy = (compute + comm) * math.exp(0.03 * random.standard_normal())
                rows.append(window_row(nodes, devices, network, batch, noisy, window))
    return commmodel.observations(pd.DataFrame(rows), {"m": PARAMS})


@pytest.fixture(scope="module")
def fitted() -> dict[str, fitting.Fit]:
    links = commmodel.links_from_config(NETWORKS, None, "torch-ddp")
    fits, failed = commmodel.fit_forms(_obs(), links, ("additive", "max", "pollux"), None, TRAFFIC)
    assert not failed
    return fits


@pytest.mark.parametrize("form", ["additive", "max", "pollux"])
def test_the_fits_jacobian_is_scipys_two_point_difference(fitted, form):
    fit = fitted[form]
    obs = _obs()
    same = fitting.SameRows(obs, fit.links, TRAFFIC)
    parameters = fitting.choose_parameters(obs, fit.links, form, None, TRAFFIC, same)
    lower, upper = (np.asarray(b, dtype=float) for b in parameters.bounds())
    residuals = fitting.LogResiduals(
        parameters, same.design(parameters.free_links, None), same.measured, (lower, upper)
    )
    # the solution, a point inside, and points on a bound (steps turned or shortened there)
    points = [fit.theta, (lower + np.minimum(upper, lower + 5)) / 2, lower.copy(), upper.copy()]
    points[2][1:] = fit.theta[1:]
    points[3][:1] = fit.theta[:1]
    for theta in points:
        theta = np.clip(theta, lower, upper)
        reference = approx_derivative(
            residuals, theta, method="2-point", f0=residuals(theta), bounds=(lower, upper)
        )
        mine = residuals.jacobian(theta)
        assert np.array_equal(mine, reference, equal_nan=True)
        assert mine.strides == reference.strides  # scipy's layout: the same algebra after


@pytest.mark.parametrize("form", ["additive", "pollux"])
def test_the_stacked_gradient_is_the_gradient_one_parameter_at_a_time(fitted, form):
    fit = fitted[form]
    frame = _layout_frame(BATCHES)
    rows = fit.design(frame, emulation=False)

    def log_t(values):
        return np.log(np.maximum(step_seconds(values, rows), MIN_STEP))

    centre = log_t(fit.values)
    stacked = fitting.stacked_jacobian(log_t, fit.parameters, fit.theta, centre)
    one_by_one = jacobian_one_at_a_time(
        lambda t: log_t(fit.parameters.values(t)), fit.theta, centre
    )
    assert np.array_equal(stacked, one_by_one, equal_nan=True)


def jacobian_one_at_a_time(function, theta: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """The loop stacked_jacobian replaced: one parameter moved, one call, at a time."""
    columns = []
    for index in range(theta.size):
        step = 1e-6 * max(1.0, abs(theta[index]))
        moved = theta.copy()
        moved[index] += step
        columns.append((function(moved) - centre) / step)
    return np.column_stack(columns) if columns else np.zeros((centre.size, 0))


def _layout_frame(batches: list[int], nodes: int = 2, network: str = "slow") -> pd.DataFrame:
    """One layout at ``batches``, then one rank at the same batches (as predictions asks)."""
    n = len(batches)
    return pd.DataFrame(
        {
            "nodes": [nodes] * n + [1] * n,
            "network": [network] * n + ["host"] * n,
            "devices_per_node": [1] * 2 * n,
            "world_size": [nodes] * n + [1] * n,
            "batch_per_device": list(batches) * 2,
            "gradient_bytes": 4 * PARAMS,
        }
    )


@pytest.mark.parametrize("form", ["additive", "pollux"])
def test_a_layouts_compressions_at_once_are_those_of_each_batch(fitted, form):
    fit = fitted[form]
    batches = [1, 4, 16, 64, 256]
    rows = fit.design(_layout_frame(batches), emulation=False)
    n = len(batches)
    thetas = compression.sampled_thetas(fit)
    multi, single = rows.take(slice(0, n)), rows.take(slice(n, 2 * n))
    together = compression.needed_compressions(fit, multi, single, thetas)
    for i, need in enumerate(together):
        alone = compression.needed_compression(fit, multi.take([i]), single.take([i]), thetas)
        assert need == alone or _same_with_nan(need, alone)


def _same_with_nan(a, b) -> bool:
    return all(
        x == y or (math.isnan(x) and math.isnan(y))
        for x, y in zip(a.__dict__.values(), b.__dict__.values(), strict=True)
    )


@pytest.mark.parametrize("form", ["additive", "pollux"])
def test_the_break_even_of_moved_parameters_is_each_ones_own(fitted, form):
    fit = fitted[form]
    rows = fit.design(_layout_frame([8]), emulation=False)
    multi, single = rows.take([0]), rows.take([1])
    steps = 1e-6 * np.maximum(1.0, np.abs(fit.theta))
    moved = np.repeat(fit.theta[None, :], fit.theta.size, axis=0)
    moved[np.arange(fit.theta.size), np.arange(fit.theta.size)] += steps
    together = prediction.break_evens(fit.parameters, moved, multi, single)
    alone = [prediction.break_even(fit.parameters.values(t), multi, single) for t in moved]
    assert np.array_equal(together, np.array(alone), equal_nan=True)
