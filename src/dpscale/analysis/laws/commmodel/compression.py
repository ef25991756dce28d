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


def needed_compression(fit: Fit, multi: Design, single: Design) -> NeededCompression:
    """``multi``: the N-rank configuration (one row); ``single``: one rank at its batch."""
    rows = _compressed(multi)
    centre = _efficiencies(fit.values, rows, single)
    ratio = _ratio(centre)
    lo = hi = math.nan
    covariance = fit.covariance
    if np.isfinite(covariance).all() and covariance.size:
        rng = np.random.default_rng(SEED)
        lower, upper = (np.asarray(b, dtype=float) for b in fit.parameters.bounds())
        thetas = rng.multivariate_normal(fit.theta, covariance, SAMPLES, method="svd")
        thetas = np.clip(thetas, lower, upper)
        ratios = np.array(
            [_ratio(_efficiencies(fit.parameters.values(t), rows, single)) for t in thetas]
        )
        lo = float(np.quantile(ratios, 0.025, method="lower"))
        hi = float(np.quantile(ratios, 0.975, method="higher"))
    return NeededCompression(ratio, lo, hi, float(centre[0]), float(centre[-1]))
