"""Models of the field, in code: the throughput law and the break-even batch (the ring
all-reduce is plan.ring).

Throughput law (post 002): a synchronous step on N devices with per-device batch b takes
``T(b) = b / v0 + t_c``: a part proportional to the batch (forward and backward at the
per-device rate v0) and a constant part t_c (gradient all-reduce, optimiser update, launch
overheads).  Global throughput is ``V = N b / T``, which approaches ``N v0``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize


def step_time(batch: float | np.ndarray, v0: float, t_c: float) -> float | np.ndarray:
    return batch / v0 + t_c


def throughput(batch: float | np.ndarray, v0: float, t_c: float, devices: int = 1):
    """Global img/s of ``devices`` devices at per-device ``batch``."""
    return devices * batch / step_time(batch, v0, t_c)


def batch_for_fraction(v0: float, t_c: float, fraction: float = 0.9) -> float:
    """Per-device batch at which throughput reaches ``fraction`` of its ceiling v0.

    From b / (b/v0 + t_c) = f v0: b = f/(1-f) v0 t_c, so b90 = 9 v0 t_c.
    """
    return fraction / (1 - fraction) * v0 * t_c


@dataclass(frozen=True)
class ThroughputFit:
    """Least-squares fit of step time against per-device batch, with standard errors."""

    v0: float
    v0_se: float
    t_c: float
    t_c_se: float
    r2: float
    points: int
    batches: int
    b90: float
    b90_se: float
    slope_t_c_cov: float = math.nan  # covariance of 1/v0 and t_c, for the break-even's interval

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def fit_throughput_law(batch: Sequence[float], seconds_per_step: Sequence[float]) -> ThroughputFit:
    """Fit ``T = b/v0 + t_c``: a straight line whose slope is 1/v0 and intercept t_c.

    Timing noise grows with the step time (a 2% jitter on a 1 s step is 20 ms, on a 0.1 s
    step 2 ms), so the line is fitted by weighted least squares with a relative error model
    (sigma proportional to the measured time, scale estimated from the residuals).  Standard
    errors of v0 and b90 = 9 t_c / slope follow by the delta method with the full covariance.
    """
    x = np.asarray(batch, dtype=float)
    y = np.asarray(seconds_per_step, dtype=float)
    distinct = np.unique(x).size
    if distinct < 2:
        raise ValueError(f"need at least two distinct batch sizes to fit, got {distinct}")
    if x.size < 3:
        raise ValueError(f"need at least three measurements to estimate errors, got {x.size}")
    start = np.polyfit(x, y, 1)
    (slope, intercept), cov = optimize.curve_fit(
        _line, x, y, p0=start, sigma=y, absolute_sigma=False
    )
    if slope <= 0:
        raise ValueError(f"step time does not grow with batch (slope {slope:.3g} s/img)")
    var_slope, var_intercept, cov_si = cov[0, 0], cov[1, 1], cov[0, 1]
    b90 = 9.0 * intercept / slope
    b90_var = 81.0 * (
        var_intercept / slope**2
        + intercept**2 * var_slope / slope**4
        - 2 * intercept * cov_si / slope**3
    )
    residual = y - _line(x, slope, intercept)
    r2 = 1.0 - float(residual @ residual) / float(((y - y.mean()) ** 2).sum())
    return ThroughputFit(
        v0=1.0 / slope,
        v0_se=math.sqrt(var_slope) / slope**2,
        t_c=float(intercept),
        t_c_se=math.sqrt(var_intercept),
        r2=r2,
        points=int(x.size),
        batches=int(distinct),
        b90=float(b90),
        b90_se=math.sqrt(max(b90_var, 0.0)),
        slope_t_c_cov=float(cov_si),
    )


def _line(x: np.ndarray, slope: float, intercept: float) -> np.ndarray:
    return slope * x + intercept


def break_even_global_batch(
    v0_single: float, t_c_single: float, v0_multi: float, t_c_multi: float, devices: int
) -> float:
    """Smallest global batch B at which ``devices`` devices beat one (strong scaling).

    One device: B/v0_1 + t_1.  N devices: B/(N v0_N) + t_N.  N wins when
    B (1/v0_1 - 1/(N v0_N)) > t_N - t_1.  Returns 0 when N always wins and inf when
    it never does.  With v0_1 = v0_N this is v0 (t_N - t_1) N / (N - 1) (post 000's question).
    """
    if devices < 2:
        raise ValueError("break-even needs devices >= 2")
    gain_per_image = 1.0 / v0_single - 1.0 / (devices * v0_multi)
    extra_constant = t_c_multi - t_c_single
    if extra_constant <= 0:
        return 0.0
    if gain_per_image <= 0:
        return math.inf
    return extra_constant / gain_per_image


Z95 = 1.959964  # two-sided 95% quantile of the normal distribution


@dataclass(frozen=True)
class LawEstimate:
    """What a break-even interval needs of one fitted law: slope 1/v0 and intercept t_c,
    their variances and their covariance (from fits_table's columns)."""

    slope: float
    slope_var: float
    t_c: float
    t_c_var: float
    cov: float

    @classmethod
    def from_fit(cls, v0: float, v0_se: float, t_c: float, t_c_se: float, cov: float):
        return cls(1.0 / v0, (v0_se / v0**2) ** 2, t_c, t_c_se**2, cov)


def break_even_ci95(single: LawEstimate, multi: LawEstimate, devices: int) -> float:
    """95% half-width of break_even_global_batch by the delta method: B = (t_N - t_1) / g
    with g = s_1 - s_N / N (s = 1/v0). The two fits are independent; within each the slope
    and intercept covary. NaN where B is 0 or infinite (no interval to give); infinite where
    g's own interval reaches 0 (the data cannot bound B from above)."""
    gain = single.slope - multi.slope / devices
    extra = multi.t_c - single.t_c
    if gain <= 0 or extra <= 0:
        return math.nan
    gain_var = single.slope_var + multi.slope_var / devices**2
    if Z95 * math.sqrt(gain_var) >= gain:
        return math.inf
    even = extra / gain
    variance = (
        single.t_c_var
        + multi.t_c_var
        + even**2 * gain_var
        + 2 * even * single.cov
        + 2 * even * multi.cov / devices
    ) / gain**2
    return Z95 * math.sqrt(max(variance, 0.0))


def intervals_overlap(a: float, a_half: float, b: float, b_half: float) -> bool:
    """Whether two 95% intervals overlap (a missing half-width counts as zero width)."""
    a_half = 0.0 if math.isnan(a_half) else a_half
    b_half = 0.0 if math.isnan(b_half) else b_half
    if math.isinf(a) and math.isinf(b):
        return True
    return abs(a - b) <= a_half + b_half


def ratio_ci95(
    numerator: float, numerator_ci: float, denominator: float, denominator_ci: float
) -> float:
    """Half-width of a ratio's 95% interval from its parts' (first-order error propagation)."""
    if numerator == 0 or denominator == 0:
        return math.nan
    ratio = numerator / denominator
    return abs(ratio) * math.hypot(numerator_ci / numerator, denominator_ci / denominator)
