"""Grouped split-conformal intervals: the rank rule, no group calibrating itself, coverage
counted only where an interval exists."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpscale.analysis.laws import conformal


def test_the_band_takes_the_conformal_ranks_from_each_end():
    residuals = list(range(-9, 11))  # 20 values, -9..10
    got = conformal.band(residuals, alpha=0.2)
    # rank ceil(21 * 0.9) = 19: the 19th smallest (9) and the 19th largest (-8)
    assert (got.lo, got.hi, got.calibrated_on) == (-8, 9, 20)


def test_too_few_residuals_leave_the_band_not_resolved():
    got = conformal.band([1.0, 2.0, 3.0], alpha=0.2)  # rank ceil(4 * 0.9) = 4 > 3
    assert not got.resolved and math.isnan(got.lo)


def test_no_group_calibrates_its_own_interval():
    groups = ["a"] * 10 + ["b"] * 10
    predicted = [0.0] * 20
    observed = [100.0] * 10 + list(np.linspace(-1, 1, 10))
    held = conformal.leave_one_group_out(groups, predicted, observed, alpha=0.2)
    # a's cases are judged on b's small residuals only: all outside
    assert all(h.inside is False for h in held[:10])
    assert conformal.coverage(held)[1] == 20


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_exchangeable_groups_are_covered_near_the_level(seed):
    rng = np.random.default_rng(seed)
    groups = [f"g{i // 5}" for i in range(200)]
    observed = list(rng.normal(0, 1, 200))
    held = conformal.leave_one_group_out(groups, [0.0] * 200, observed, alpha=0.2)
    inside, judged = conformal.coverage(held)
    assert judged == 200 and 0.65 <= inside / judged <= 0.95


def test_lengths_must_match():
    with pytest.raises(ValueError, match="differ in length"):
        conformal.leave_one_group_out(["a"], [1.0, 2.0], [1.0])
