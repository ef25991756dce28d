"""One device's step-time spread, the straggler term ``j`` of the calibrated law
(laws.calibrated): the relative standard deviation of single steps, with a 95% interval.

Only windows of one step measure it. Step times drift slowly (consecutive steps correlate,
docs/decisions/stragglers-from-one-step-windows.md), so a longer window's spread cannot be
scaled to one step's, and the interval comes from a moving-block bootstrap (the basic
interval, which corrects the spread's downward bias in resamples), keeping the drift inside
each resampled block, not from a formula that assumes independent steps. Where steps drift
strongly it still covers less than 95%; the decision record gives how much less."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# fewer one-step windows than this leave the spread unresolved
MIN_STEPS = 20
# consecutive steps resampled together (the drift seen on a GPU lasts about this long)
BLOCK = 10
RESAMPLES = 2000
NOT_MEASURED = (math.nan, math.nan, math.nan)
# the cells table's columns of (j, low, high)
COLUMNS = ("step_spread", "step_spread_lo", "step_spread_hi")


def relative_spread(steps: np.ndarray) -> float:
    return float(steps.std(ddof=1) / steps.mean())


def step_spread(
    window_seconds: Sequence[float], steps_per_window: int, seed: int = 0
) -> tuple[float, float, float]:
    """(j, low, high): the relative standard deviation of one step and its 95% interval;
    NaNs where the windows are not single steps or too few to tell."""
    steps = np.asarray(window_seconds, dtype=float)
    if steps_per_window != 1 or steps.size < MIN_STEPS or not np.all(steps > 0):
        return NOT_MEASURED
    block = min(BLOCK, steps.size // 2)
    starts = np.arange(steps.size - block + 1)
    per_sample = math.ceil(steps.size / block)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(starts, size=(RESAMPLES, per_sample))
    samples = steps[(chosen[:, :, None] + np.arange(block)).reshape(RESAMPLES, -1)]
    spreads = samples.std(axis=1, ddof=1) / samples.mean(axis=1)
    low, high = np.percentile(spreads, [2.5, 97.5])
    j = relative_spread(steps)
    return j, max(2 * j - high, 0.0), 2 * j - low
