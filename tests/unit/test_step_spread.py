"""One device's step spread (the calibrated law's stragglers): only one-step windows measure
it, and its interval, from blocks of consecutive steps, widens where steps drift."""

from __future__ import annotations

import math

import numpy as np

from dpscale.analysis.results.step_spread import step_spread


def steps(n: int, spread: float, drift: float = 0.0, seed: int = 1) -> np.ndarray:
    """``n`` step times of mean 0.05 s: independent noise of relative sd ``spread``, or an
    AR(1) series of the same marginal sd whose neighbours correlate by ``drift``."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=n)
    series = np.empty(n)
    series[0] = noise[0]
    for i in range(1, n):
        series[i] = drift * series[i - 1] + math.sqrt(1 - drift**2) * noise[i]
    return 0.05 * (1 + spread * series)


def test_independent_steps_mostly_hold_their_spread_inside_the_interval():
    covered = 0
    for seed in range(40):
        j, lo, hi = step_spread(steps(150, 0.03, seed=seed), 1)
        assert lo <= j <= hi
        covered += lo <= 0.03 <= hi
    assert covered >= 30  # 95% nominal; about 86% measured at 150 steps (decision record)


def test_drifting_steps_get_a_wider_interval_than_independent_ones():
    widths = {}
    for drift in (0.0, 0.9):
        ends = [step_spread(steps(150, 0.03, drift, seed), 1)[1:] for seed in range(10)]
        widths[drift] = np.mean([hi - lo for lo, hi in ends])
    assert widths[0.9] > 1.5 * widths[0.0]


def test_windows_of_several_steps_or_too_few_steps_leave_it_unmeasured():
    assert all(math.isnan(v) for v in step_spread(steps(400, 0.03), 10))
    assert all(math.isnan(v) for v in step_spread(steps(10, 0.03), 1))
    assert all(math.isnan(v) for v in step_spread([0.05] * 30 + [0.0], 1))


def test_the_same_steps_give_the_same_interval():
    assert step_spread(steps(100, 0.05), 1) == step_spread(steps(100, 0.05), 1)
