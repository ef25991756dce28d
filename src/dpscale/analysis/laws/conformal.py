"""Empirical intervals for a prediction nobody calibrated: how far checked cases fell from
the same kind of prediction, as split conformal intervals grouped by source, so that no
source calibrates its own interval and the coverage is measured, not assumed.

A residual is ``observed - predicted`` (efficiency points for the published cases). The
interval for a new case is ``[predicted + q_lo, predicted + q_hi]`` with ``q_lo``, ``q_hi``
the conformal quantiles (finite-sample rank ceil((n + 1) (1 - alpha / 2)) from each end) of
the residuals of every other source; ``leave_one_group_out`` gives each case the interval
its own source had no part in, and the share of cases inside it is the measured coverage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ALPHA = 0.2  # an 80% interval: a handful of sources cannot support a 95% one


@dataclass(frozen=True)
class Band:
    """Offsets added to a prediction: ``lo`` <= ``hi``; NaN both where too few residuals
    exist for the level (``calibrated_on`` of them)."""

    lo: float
    hi: float
    calibrated_on: int

    @property
    def resolved(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)


def band(residuals: Sequence[float], alpha: float = ALPHA) -> Band:
    """The split-conformal offsets of ``residuals`` at level 1 - alpha (two-sided, alpha/2 in
    each tail); not resolved where the rank falls past the residuals (too few of them)."""
    values = np.sort(np.asarray([r for r in residuals if math.isfinite(r)], dtype=float))
    n = len(values)
    rank = math.ceil((n + 1) * (1 - alpha / 2))
    if n == 0 or rank > n:
        return Band(math.nan, math.nan, n)
    return Band(float(values[n - rank]), float(values[rank - 1]), n)


@dataclass(frozen=True)
class Held:
    """One case's out-of-group interval and whether the observed value fell inside it."""

    group: str
    predicted: float
    observed: float
    band: Band

    @property
    def lo(self) -> float:
        return self.predicted + self.band.lo

    @property
    def hi(self) -> float:
        return self.predicted + self.band.hi

    @property
    def inside(self) -> bool | None:
        if not self.band.resolved:
            return None
        return self.lo <= self.observed <= self.hi


def leave_one_group_out(
    groups: Sequence[str],
    predicted: Sequence[float],
    observed: Sequence[float],
    alpha: float = ALPHA,
) -> list[Held]:
    """Each case's interval from the residuals of every other group's cases."""
    if not len(groups) == len(predicted) == len(observed):
        raise ValueError("groups, predicted and observed differ in length")
    residuals = [o - p for p, o in zip(predicted, observed, strict=True)]
    held = []
    for group, p, o in zip(groups, predicted, observed, strict=True):
        others = [r for g, r in zip(groups, residuals, strict=True) if g != group]
        held.append(Held(group, p, o, band(others, alpha)))
    return held


def coverage(held: Sequence[Held]) -> tuple[int, int]:
    """(inside, judged): cases inside their out-of-group interval, of those that had one."""
    judged = [h.inside for h in held if h.inside is not None]
    return sum(judged), len(judged)
