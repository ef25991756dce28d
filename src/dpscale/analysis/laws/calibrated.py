"""Scale-out calibrated from a small measured run: the link-only prediction plus the terms a
link-only model misses, fitted on the run's own multi-device points, carried to N devices.

Everything is a ratio over the one-device step (weak scaling: ``r(n) = step(n) / step(1)``,
efficiency ``1 / r``). The link-only engine gives ``l(n)`` (compute plus the exposed
communication at the link's rate, laws.engine). The calibrated step is

    r(n) = 1 + g (l(n) - 1) + s log2(n) + j m(n)

with three terms (docs/decisions/calibrated-scale-out.md says why these and what pins each):

- ``g`` (dimensionless, >= 0): the exposed communication is g times the link-only one (a
  framework that reaches a fraction of the link, or overlaps less than the buckets allow);
- ``s`` (one-device steps per doubling of devices, >= 0): a per-step cost that grows with the
  ranks (synchronisation, per-collective latency over a tree, the launcher's barrier);
- ``j m(n)``: stragglers, the expected largest of n step times (``m(n)``: the mean of the
  largest of n standard normals) times the one-device step's relative spread ``j``; measured
  on one device, never fitted.

The run's points pin ``g`` and ``s`` by non-negative least squares when they are two or more
at different device counts whose two columns are not parallel; one point cannot split the
excess between ``g`` and ``s``, so the prediction spans both attributions (all of it in
``g``, or the link-only ``g = 1`` and the rest in ``s``) and says the split is not resolved.
Ranges: the fit redone at every corner of the points' measured ranges, with each
attribution where the split is open.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import integrate, optimize

# a column under this (in one-device steps) carries no information about its term
NEGLIGIBLE = 1e-6
# two calibration scales whose columns are this close to parallel cannot split g from s
MIN_CONDITION = 1e-3


@dataclass(frozen=True)
class Point:
    """One measured scale: ``devices``, the link-only ratio ``link_only`` (>= 1) and the
    measured ratio with its 95% range (``lo`` <= ``measured`` <= ``hi``)."""

    devices: int
    link_only: float
    measured: float
    lo: float
    hi: float

    def __post_init__(self) -> None:
        if self.devices < 2:
            raise ValueError(f"devices: {self.devices!r}; allowed: 2 or more (a scale-out)")
        for name in ("link_only", "measured", "lo", "hi"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: {value!r} is not a finite number > 0")
        if not self.lo <= self.measured <= self.hi:
            raise ValueError(f"the range {self.lo}-{self.hi} does not hold {self.measured}")

    @classmethod
    def from_efficiency(
        cls, devices: int, link_only_eff: float, eff: float, lo: float | None = None, hi=None
    ) -> Point:
        """A point from efficiencies (fractions): the range's ends swap (a higher
        efficiency is a shorter step)."""
        low = eff if hi is None else hi
        high = eff if lo is None else lo
        return cls(devices, 1 / link_only_eff, 1 / eff, 1 / low, 1 / high)


@dataclass(frozen=True)
class Terms:
    """One fit: ``g`` and ``s`` as above, ``j`` the stragglers' relative spread."""

    g: float
    s: float
    j: float = 0.0

    def ratio(self, devices: int, link_only: float) -> float:
        return (
            1
            + self.g * (link_only - 1)
            + self.s * math.log2(devices)
            + self.j * expected_max_normal(devices)
        )


@dataclass(frozen=True)
class Calibration:
    """The fits a run allows: ``point`` (the central one) and ``spread`` (one per corner of
    the measured ranges and per open attribution); ``unresolved`` names the terms the run
    could not pin, ``words`` says what the fit stands on."""

    point: Terms
    spread: tuple[Terms, ...]
    unresolved: tuple[str, ...]
    words: str


@dataclass(frozen=True)
class Predicted:
    """A calibrated ratio at one scale with its range, and the efficiency (1 / ratio)."""

    devices: int
    ratio: float
    lo: float
    hi: float

    @property
    def efficiency(self) -> tuple[float, float, float]:
        """(point, low, high) efficiency as fractions."""
        return 1 / self.ratio, 1 / self.hi, 1 / self.lo


@lru_cache(maxsize=4096)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] (0 for one): how far the slowest of n ranks'
    step times lies above their mean, in standard deviations."""
    if n <= 1:
        return 0.0

    def density(x: float) -> float:
        from scipy import stats  # here: importing scipy.stats takes ~0.5 s of each job

        return x * n * stats.norm.pdf(x) * stats.norm.cdf(x) ** (n - 1)

    value, _ = integrate.quad(density, -12, 12, limit=200)
    return float(value)


def _excess(point: Point, j: float, measured: float) -> float:
    """The step beyond compute and stragglers that the fitted terms must explain."""
    return measured - 1 - j * expected_max_normal(point.devices)


def _columns(point: Point) -> tuple[float, float]:
    return point.link_only - 1, math.log2(point.devices)


def _splits(points: Sequence[Point]) -> bool:
    """Whether the points can pin g and s apart: two scales with non-parallel columns, each
    column carrying information."""
    design = np.array([_columns(p) for p in points])
    if len({p.devices for p in points}) < 2 or np.any(design.max(axis=0) < NEGLIGIBLE):
        return False
    singular = np.linalg.svd(design / np.linalg.norm(design, axis=0), compute_uv=False)
    return bool(singular[-1] / singular[0] > MIN_CONDITION)


def _fit_both(points: Sequence[Point], values: Sequence[float], j: float) -> Terms:
    design = np.array([_columns(p) for p in points])
    target = np.array([_excess(p, j, v) for p, v in zip(points, values, strict=True)])
    (g, s), _ = optimize.nnls(design, target)
    return Terms(float(g), float(s), j)


def _attributions(points: Sequence[Point], values: Sequence[float], j: float) -> list[Terms]:
    """One scale (or parallel columns): all the excess in g, or g = 1 and the rest in s
    (each clipped at zero, where the measured step is shorter than the link-only one)."""
    comm = sum(_columns(p)[0] for p in points)
    sync = sum(_columns(p)[1] for p in points)
    excess = sum(_excess(p, j, v) for p, v in zip(points, values, strict=True))
    fits = []
    if comm > NEGLIGIBLE:
        fits.append(Terms(max(excess / comm, 0.0), 0.0, j))
    rest = excess - comm
    fits.append(Terms(1.0, max(rest / sync, 0.0), j))
    if rest < 0 and comm > NEGLIGIBLE:  # faster than link-only: the comm term alone shrinks
        fits[-1] = Terms(max(excess / comm, 0.0), 0.0, j)
    return fits


def _open_term(points: Sequence[Point]) -> str:
    if max(_columns(p)[0] for p in points) < NEGLIGIBLE:
        return "g: no exposed communication at the calibrated scales (link-only g = 1 assumed)"
    return "the split of the excess between g and s (one scale)"


def calibrate(
    points: Sequence[Point], j: float = 0.0, j_range: tuple[float, float] | None = None
) -> Calibration:
    """The terms ``points`` pin (see the module's docstring); ``j`` is the one-device step's
    relative standard deviation (0 where it is unknown: the stragglers then sit in g and s),
    ``j_range`` its 95% interval, whose ends the range's fits take too."""
    if not points:
        raise ValueError("calibrate: no multi-device point to calibrate on")
    both = _splits(points)
    corners = list(itertools.product(*[(p.lo, p.measured, p.hi) for p in points]))
    spreads = sorted({j, *(j_range or ())})
    spread: list[Terms] = []
    for values, each in itertools.product(corners, spreads):
        spread += [_fit_both(points, values, each)] if both else _attributions(points, values, each)
    centre = [p.measured for p in points]
    fitted = [_fit_both(points, centre, j)] if both else _attributions(points, centre, j)
    point = Terms(float(np.mean([t.g for t in fitted])), float(np.mean([t.s for t in fitted])), j)
    unresolved = () if both else (_open_term(points),)
    scales = ", ".join(str(n) for n in sorted({p.devices for p in points}))
    words = (
        f"calibrated on {len(points)} measured point(s) at {scales} devices; "
        + ("g and s fitted" if both else "g and s not split, the range spans both")
        + (
            f"; stragglers from the one-device step's spread ({_percent(j, j_range)})"
            if j
            else "; stragglers not measured apart (in g and s)"
        )
    )
    return Calibration(point, tuple(spread), unresolved, words)


def _percent(j: float, j_range: tuple[float, float] | None) -> str:
    if j_range is None:
        return f"{100 * j:.1f}%"
    return f"{100 * j:.1f}%, {100 * j_range[0]:.1f}-{100 * j_range[1]:.1f}%"


def predict(calibration: Calibration, devices: int, link_only: float) -> Predicted:
    """The calibrated ratio at ``devices`` with its range over every fit the run allows."""
    values = [t.ratio(devices, link_only) for t in calibration.spread]
    point = calibration.point.ratio(devices, link_only)
    return Predicted(devices, point, min(values + [point]), max(values + [point]))


def hold_baseline(points: Sequence[Point]) -> float:
    """Arithmetic baseline: the largest calibrated scale's ratio holds at any scale."""
    return max(points, key=lambda p: p.devices).measured


def repeat_baseline(points: Sequence[Point], devices: int) -> float:
    """Arithmetic baseline: the last drop in efficiency repeats per doubling of devices
    (from one device, efficiency 1, where the run has one multi-device scale); an infinite
    ratio once the drops use the efficiency up."""
    ordered = sorted(points, key=lambda p: p.devices)
    last = ordered[-1]
    before_n, before_eff = (1, 1.0)
    if len(ordered) > 1:
        before_n, before_eff = ordered[-2].devices, 1 / ordered[-2].measured
    per_doubling = (before_eff - 1 / last.measured) / math.log2(last.devices / before_n)
    eff = 1 / last.measured - per_doubling * math.log2(devices / last.devices)
    return 1 / eff if eff > 0 else math.inf
