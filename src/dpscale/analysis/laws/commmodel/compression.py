"""The compression a network needs: by how much a remedy must shrink the bytes each step
sends for a layout to reach 90% scaling efficiency, from the fitted model.

Zhang et al. ("Is Network the Bottleneck of Distributed Training?", 2020) found that a
10 Gbit/s network needs only 2-5x gradient compression for near-linear scale-out, and
100 Gbit/s none; this is the same question asked of the model fitted here. Efficiency is weak
scaling: one rank's step time over the N-rank step time at the same per-device batch. The
interval comes from the fit's parameter covariance, by sampling (seeded, so a table made
twice reads the same).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dpscale.analysis.laws.commmodel.fitting import Fit
from dpscale.analysis.laws.commmodel.model import MIN_STEP, Design, step_seconds

TARGET_EFFICIENCY = 0.9
RATIOS = np.geomspace(1.0, 1e4, 401)  # 1x to 10,000x, 2.3% apart
SAMPLES = 300
SEED = 0


@dataclass(frozen=True)
class NeededCompression:
    ratio: float  # 1: none needed; inf: out of reach even with nothing to send
    lo: float  # 95% interval over the fit's parameters (NaN: not estimable)
    hi: float
    efficiency_uncompressed: float
    efficiency_nothing_sent: float  # the ceiling: latency and compute alone


def _compressed(multi: Design) -> Design:
    """``multi`` once per ratio of RATIOS, its message shrunk by it, then with no bytes (last):
    built once per prediction, since every sampled parameter set prices the same rows."""
    messages = np.append(multi.message[0] / RATIOS, 0.0)
    return dataclasses.replace(multi.repeat_first(messages.size), message=messages)


def _efficiencies(values: dict, rows: Design, single: Design) -> np.ndarray:
    """Efficiency at each of ``rows`` (_compressed) against one rank at its batch."""
    one = np.maximum(step_seconds(values, single), MIN_STEP)[0]
    return one / np.maximum(step_seconds(values, rows), MIN_STEP)


def _ratio(efficiency: np.ndarray) -> float:
    """The smallest ratio of RATIOS reaching the target (log-interpolated), 1 or inf."""
    grid = efficiency[:-1]
    if grid[0] >= TARGET_EFFICIENCY:
        return 1.0
    reached = np.nonzero(grid >= TARGET_EFFICIENCY)[0]
    if reached.size == 0:
        return math.inf
    i = int(reached[0])
    low, high = np.log(RATIOS[i - 1]), np.log(RATIOS[i])
    share = (TARGET_EFFICIENCY - grid[i - 1]) / (grid[i] - grid[i - 1])
    return float(np.exp(low + share * (high - low)))


def _first_reached(efficiency: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Per sample (rows of ``efficiency``, at the RATIOS indices ``columns``, consecutive
    after the first): the ratio where it first reaches the target, log-interpolated from
    the column before as :func:`_ratio` does; 1 where the first column does, inf where none
    does."""
    reached = efficiency >= TARGET_EFFICIENCY
    at = np.argmax(reached, axis=1)
    rows = np.arange(efficiency.shape[0])
    before = np.maximum(at - 1, 0)
    low, high = np.log(RATIOS[columns[rows, before]]), np.log(RATIOS[columns[rows, at]])
    with np.errstate(divide="ignore", invalid="ignore"):  # rows without a crossing: unused
        share = (TARGET_EFFICIENCY - efficiency[rows, before]) / (
            efficiency[rows, at] - efficiency[rows, before]
        )
        between = np.exp(low + share * (high - low))
    found = np.where(reached.any(axis=1), between, math.inf)
    return np.where(reached[:, 0] & (columns[:, 0] == 0), 1.0, found)


# RATIOS searched every COARSE-th first, then the stretch of COARSE before the first one
# that reaches the target, in full: efficiency never falls as fewer bytes are sent (every
# term of the model grows with the bytes), so the first crossing lies in that stretch
COARSE = 20
assert (RATIOS.size - 1) % COARSE == 0  # the coarse search ends on the last ratio


def _sampled_ratios(fit: Fit, thetas: np.ndarray, multi: Design, single: Design) -> np.ndarray:
    """:func:`_ratio` under each sampled parameter set (``thetas``: samples x parameters),
    every sample priced in one call of the model (Parameters.sampled_values) on the
    coarse ratios, then once more on its own stretch of fine ones."""
    return _ratios_under(fit.parameters.sampled_values(thetas), thetas.shape[0], multi, single)


def _ratios_under(values: dict, samples: int, multi: Design, single: Design) -> np.ndarray:
    """:func:`_sampled_ratios` of ``samples`` parameter sets already as values (columns of
    ``samples`` rows); ``multi`` and ``single``: one row each, or one row with a column of
    ``samples`` batches (:func:`needed_compressions`)."""
    one = np.maximum(step_seconds(values, single), MIN_STEP)  # samples x 1

    def efficiency(columns: np.ndarray) -> np.ndarray:
        # the one row's other arrays broadcast against the samples x columns messages
        rows = dataclasses.replace(multi, message=multi.message[0] / RATIOS[columns])
        step = np.maximum(step_seconds(values, rows), MIN_STEP)  # samples x columns
        return np.broadcast_to(one / step, columns.shape)

    coarse = np.tile(np.arange(0, RATIOS.size, COARSE), (samples, 1))
    found = efficiency(coarse) >= TARGET_EFFICIENCY
    first = coarse[np.arange(samples), np.argmax(found, axis=1)]
    start = np.maximum(first - COARSE, 0)
    fine = start[:, None] + np.arange(COARSE + 1)
    ratios = _first_reached(efficiency(fine), fine)
    return np.where(found.any(axis=1), ratios, math.inf)


def sampled_thetas(fit: Fit) -> np.ndarray | None:
    """SAMPLES parameter sets drawn from the fit's covariance (seeded, within the bounds),
    or None where the covariance is not all known: the same draws for every configuration
    a fit prices, so they are drawn once per fit."""
    covariance = fit.covariance
    if not (np.isfinite(covariance).all() and covariance.size):
        return None
    rng = np.random.default_rng(SEED)
    lower, upper = (np.asarray(b, dtype=float) for b in fit.parameters.bounds())
    thetas = rng.multivariate_normal(fit.theta, covariance, SAMPLES, method="svd")
    return np.clip(thetas, lower, upper)


def needed_compression(
    fit: Fit, multi: Design, single: Design, thetas: np.ndarray | None = None
) -> NeededCompression:
    """``multi``: the N-rank configuration (one row); ``single``: one rank at its batch;
    ``thetas``: :func:`sampled_thetas` of ``fit`` where the caller drew them (else drawn
    here)."""
    rows = _compressed(multi)
    centre = _efficiencies(fit.values, rows, single)
    ratio = _ratio(centre)
    draws = thetas if thetas is not None else sampled_thetas(fit)
    lo = hi = math.nan
    if draws is not None:
        ratios = _sampled_ratios(fit, draws, multi, single)
        lo = float(np.quantile(ratios, 0.025, method="lower"))
        hi = float(np.quantile(ratios, 0.975, method="higher"))
    return NeededCompression(ratio, lo, hi, float(centre[0]), float(centre[-1]))


def needed_compressions(
    fit: Fit, multi: Design, single: Design, thetas: np.ndarray | None = None
) -> list[NeededCompression]:
    """:func:`needed_compression` of each row of ``multi`` against the same row of
    ``single``, all priced together where the rows differ in their batch alone (one
    layout's batches, prediction._prediction_rows): each batch a row of one column of
    batches, against the ratios or the samples, as the model broadcasts a row; the same
    numbers as a call per row, at a few calls in all instead of a few per row."""
    count = multi.batch.size
    if not (multi.varies_in_batch_only() and single.varies_in_batch_only()):
        return [
            needed_compression(fit, multi.take([i]), single.take([i]), thetas) for i in range(count)
        ]
    first, alone = multi.take([0]), single.take([0])
    column = multi.batch[:, None]  # batches x 1
    rows = dataclasses.replace(first, batch=column, message=np.append(first.message[0] / RATIOS, 0))
    centre = _efficiencies_each(
        fit.values, rows, dataclasses.replace(alone, batch=single.batch[:, None])
    )
    draws = thetas if thetas is not None else sampled_thetas(fit)
    lo = hi = np.full(count, math.nan)
    if draws is not None:
        samples = draws.shape[0]
        values = _tiled(fit.parameters.sampled_values(draws), count)  # batch-major
        each = dataclasses.replace(first, batch=np.repeat(multi.batch, samples)[:, None])
        one = dataclasses.replace(alone, batch=np.repeat(single.batch, samples)[:, None])
        ratios = _ratios_under(values, count * samples, each, one).reshape(count, samples)
        lo = np.quantile(ratios, 0.025, axis=1, method="lower")
        hi = np.quantile(ratios, 0.975, axis=1, method="higher")
    return [
        NeededCompression(
            _ratio(centre[i]), float(lo[i]), float(hi[i]), float(centre[i, 0]), float(centre[i, -1])
        )
        for i in range(count)
    ]


def _efficiencies_each(values: dict, rows: Design, single: Design) -> np.ndarray:
    """:func:`_efficiencies` of each batch of a column (``rows``: one row, its batch a
    column, its messages the ratios'), batches x ratios."""
    one = np.maximum(step_seconds(values, single), MIN_STEP)  # batches x 1
    return one / np.maximum(step_seconds(values, rows), MIN_STEP)


def _tiled(values: dict, times: int) -> dict:
    """Sampled values (Parameters.sampled_values) repeated ``times`` over, the samples
    again after the last: a sample's columns for each of ``times`` batches."""
    return {
        key: np.tile(value, (times, 1))
        if isinstance(value, np.ndarray) and value.ndim == 2
        else value
        for key, value in values.items()
    }
