"""The latency-bandwidth fit of measured all-reduce times.

The ring law (plan.ring): ``t(S) = 2(N-1) alpha + 2(N-1)/N S/beta``, alpha the per-step
latency, beta the link bandwidth. Fitted here per strategy, network and layout from the
median per-call times of every message size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from dpscale.plan import ring


@dataclass(frozen=True)
class AlphaBetaFit:
    """The ring model fitted to all-reduce times: alpha (s), beta (bytes/s), each with its
    standard error and 95% interval (t quantile, points - 2 degrees of freedom)."""

    alpha_s: float
    alpha_se: float
    alpha_lo: float
    alpha_hi: float
    beta_bytes_s: float
    beta_lo_bytes_s: float
    beta_hi_bytes_s: float
    inverse_beta_se: float  # standard error of 1/beta (s/byte), the fitted parameter
    r2: float
    points: int
    # why the sizes cannot bound a parameter ("" where they do): reported, never used
    alpha_unresolved: str = ""
    beta_unresolved: str = ""

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)

    @property
    def resolved(self) -> bool:
        return not (self.alpha_unresolved or self.beta_unresolved)


# A term shorter than this share of the time at the size where it weighs most is lost in
# the timing's noise (all-reduce timings repeat within a few percent at best); the fit's own
# residuals measure the ring law's misfit across protocols, not that noise.
SMALLEST_RESOLVED_SHARE = 0.05


def _unresolved(term_share: float, interval_open: bool, noise: float, words: str) -> str:
    """Why a parameter is not resolved: its interval is unbounded, or its term is within the
    noise at the one size where it matters most (``words`` says which size)."""
    if term_share < noise:
        return (
            f"not resolved: {words} (its term is {term_share:.1%} of the time there, "
            f"under {noise:.0%})"
        )
    if interval_open:
        return f"not resolved: its 95% interval is unbounded ({words.split(',')[0]})"
    return ""


def fit_alpha_beta(
    message_bytes: Sequence[float], seconds: Sequence[float], ranks: int
) -> AlphaBetaFit:
    """Fit ``t = 2(N-1) alpha + 2(N-1)/N S/beta`` to all-reduce times of N ranks.

    The model is linear in alpha and 1/beta. Times span orders of magnitude (tens of
    microseconds to seconds), so the fit weighs relative errors (sigma proportional to the
    measured time, scale from the residuals): otherwise the largest messages would decide
    both parameters and the latency would be left to their noise. Both parameters are
    bounded at zero (a negative latency or bandwidth has no meaning). beta's interval is the
    inverse of 1/beta's, so it is asymmetric and open above (inf) when 1/beta's includes 0.
    """
    if ranks < 2:
        raise ValueError(f"an all-reduce needs at least 2 ranks, got {ranks}")
    size = np.asarray(message_bytes, dtype=float)
    time = np.asarray(seconds, dtype=float)
    if size.shape != time.shape:
        raise ValueError("message_bytes and seconds must have the same length")
    keep = np.isfinite(size) & np.isfinite(time) & (time > 0)
    size, time = size[keep], time[keep]
    if np.unique(size).size < 3:
        raise ValueError(f"need at least 3 distinct message sizes, got {np.unique(size).size}")
    from scipy import optimize, stats  # here: importing scipy.stats takes ~1 s

    latency_steps, volume = 2.0 * (ranks - 1), 2.0 * (ranks - 1) / ranks

    def model(s: np.ndarray, alpha: float, inverse_beta: float) -> np.ndarray:
        return latency_steps * alpha + volume * s * inverse_beta

    start = (
        max(time.min() / latency_steps, 1e-12),
        max(time.max() / (volume * size.max()), 1e-18),
    )
    # parameters of very different magnitudes (1e-5 s, 1e-9 s/byte): scale them to ~1
    x_scale = np.array(start)
    (alpha, inverse_beta), cov = optimize.curve_fit(
        model,
        size,
        time,
        p0=start,
        sigma=time,
        absolute_sigma=False,
        bounds=([0.0, 0.0], [np.inf, np.inf]),
        x_scale=x_scale,
    )
    alpha_se, inverse_beta_se = (float(math.sqrt(max(v, 0.0))) for v in np.diag(cov))
    quantile = float(stats.t.ppf(0.975, df=max(size.size - 2, 1)))
    inverse_lo = max(inverse_beta - quantile * inverse_beta_se, 0.0)
    inverse_hi = inverse_beta + quantile * inverse_beta_se
    residual = np.log(time) - np.log(model(size, alpha, inverse_beta))
    log_time = np.log(time)
    # r2 on log times: every size counts, as in the fit
    spread = float(((log_time - log_time.mean()) ** 2).sum())
    r2 = 1.0 - float(residual @ residual) / spread if spread > 0 else math.nan
    # each term where it weighs most: latency at the smallest message, bandwidth at the largest
    noise = SMALLEST_RESOLVED_SHARE
    smallest, largest = float(size.min()), float(size.max())
    latency_share = (
        latency_steps * alpha / float(model(np.array([smallest]), alpha, inverse_beta)[0])
    )
    bandwidth_share = (
        volume * largest * inverse_beta / float(model(np.array([largest]), alpha, inverse_beta)[0])
    )
    alpha_unresolved = _unresolved(
        latency_share, False, noise, f"smallest message {smallest:,.0f} B, time set by bandwidth"
    )
    beta_unresolved = _unresolved(
        bandwidth_share,
        inverse_lo <= 0,
        noise,
        f"largest message {largest:,.0f} B, time set by latency",
    )
    return AlphaBetaFit(
        alpha_s=float(alpha),
        alpha_se=alpha_se,
        alpha_lo=max(float(alpha) - quantile * alpha_se, 0.0),
        alpha_hi=float(alpha) + quantile * alpha_se,
        beta_bytes_s=1.0 / inverse_beta if inverse_beta > 0 else math.inf,
        beta_lo_bytes_s=1.0 / inverse_hi if inverse_hi > 0 else math.inf,
        beta_hi_bytes_s=1.0 / inverse_lo if inverse_lo > 0 else math.inf,
        inverse_beta_se=inverse_beta_se,
        r2=r2,
        points=int(size.size),
        alpha_unresolved=alpha_unresolved,
        beta_unresolved=beta_unresolved,
    )


def ring_seconds(message_bytes: float, ranks: int, fit: AlphaBetaFit) -> float:
    """The fitted ring model's all-reduce time (plan.ring.ring_allreduce_seconds)."""
    return ring.ring_allreduce_seconds(message_bytes, ranks, fit.beta_bytes_s, fit.alpha_s)
