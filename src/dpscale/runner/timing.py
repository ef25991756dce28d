"""The measurement protocol every runner uses, and the statistics of its windows.

Protocol: ``warmup_steps`` untimed steps, a device synchronisation, then ``windows``
timed windows of ``steps_per_window`` steps each.  The clock is read only after the
device has been synchronised, so queued asynchronous work is inside the window it
belongs to.  In multi-process strategies each rank times its windows and the slowest
rank's time is the window's time (a synchronous step is as slow as its slowest rank).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dpscale.runner import startup

Step = Callable[[], None]
Sync = Callable[[], None]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Summary:
    """Summary of one sample of measurements; ``ci95`` is the half-width of the
    Student-t 95% confidence interval of the mean."""

    n: int
    mean: float
    ci95: float
    sd: float
    median: float
    p10: float
    p90: float
    cv: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "n": self.n,
            "mean": self.mean,
            "ci95": self.ci95,
            "sd": self.sd,
            "median": self.median,
            "p10": self.p10,
            "p90": self.p90,
            "cv": self.cv,
        }


def summarise(values: Sequence[float]) -> Summary:
    sample = np.asarray(values, dtype=float)
    if sample.size == 0:
        raise ValueError("cannot summarise an empty sample")
    mean = float(sample.mean())
    sd = float(sample.std(ddof=1)) if sample.size > 1 else 0.0
    ci95 = _t_half_width(sd, sample.size)
    return Summary(
        n=int(sample.size),
        mean=mean,
        ci95=ci95,
        sd=sd,
        median=float(np.median(sample)),
        p10=float(np.percentile(sample, 10)),
        p90=float(np.percentile(sample, 90)),
        cv=sd / mean if mean else math.nan,
    )


def _t_half_width(sd: float, n: int) -> float:
    if n < 2:
        return math.nan
    return t_quantile_975(n - 1) * sd / math.sqrt(n)


def t_central_probability(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with ``df`` degrees of freedom (Abramowitz and Stegun
    26.7.3-4: finite sums for whole ``df``; the runner side needs no scipy)."""
    theta = math.atan(t / math.sqrt(df))
    cos2, term, total = math.cos(theta) ** 2, 1.0, 1.0
    start = 2 if df % 2 else 1  # odd df: 1, 2/3 cos^2, ...; even: 1, 1/2 cos^2, ...
    for k in range(start, df - 1, 2):
        term *= cos2 * k / (k + 1)
        total += term
    if df % 2 == 0:
        return math.sin(theta) * total
    if df == 1:
        return 2 * theta / math.pi
    return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t (the 95% interval's factor), by bisection."""
    low, high = 0.0, 1000.0
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if t_central_probability(mid, df) < 0.95 else (low, mid)
    return (low + high) / 2


Agree = Callable[[bool], bool]

_last_span: list[float] | None = None


def last_timed_span() -> list[float] | None:
    """``[start, end]`` (``time.time()``) of the timed windows of this process's latest
    :func:`time_windows` call: what the launcher's contention sampler is restricted to."""
    return list(_last_span) if _last_span else None


def ci_reached(durations: Sequence[float], target_ci: float) -> bool:
    """Whether the 95% CI half-width of the mean window rate is within ``target_ci`` x mean."""
    if len(durations) < 2:
        return False
    summary = summarise([1.0 / seconds for seconds in durations])
    return summary.ci95 <= target_ci * summary.mean


def _window_budget(
    windows: int, target_ci: float | None, max_windows: int | None, world_size: int, agree
) -> int:
    if target_ci is None:
        return windows
    if target_ci <= 0:
        raise ValueError("target_ci must be > 0")
    if world_size > 1 and agree is None:
        raise ValueError(
            "target_ci with several ranks needs an agree callback (every rank must run the "
            "same number of windows: ranks step in lockstep through collectives)"
        )
    return max(windows, max_windows or windows)


def time_windows(
    step: Step,
    sync: Sync,
    warmup_steps: int,
    windows: int,
    steps_per_window: int,
    progress: Progress | None = None,
    *,
    target_ci: float | None = None,
    max_windows: int | None = None,
    world_size: int = 1,
    agree: Agree | None = None,
) -> list[float]:
    """Run the protocol and return each window's wall time in seconds (this process).

    Adaptive measuring (``target_ci`` set): after the first ``windows`` windows, keep timing
    until the 95% CI half-width of the mean window rate is within ``target_ci`` x the mean,
    or ``max_windows`` windows. With several ranks the decision must be the same on every
    rank, so ``agree(done_here)`` must return whether *every* rank is done (an allreduce of
    the flag with min, or of "not done" with max); without it, several ranks are an error.
    """
    global _last_span
    if warmup_steps < 1 or windows < 1 or steps_per_window < 1:
        raise ValueError("warmup_steps, windows and steps_per_window must all be >= 1")
    budget = _window_budget(windows, target_ci, max_windows, world_size, agree)
    step()  # the first step (tracing, compilation) is a start-up phase of its own
    sync()
    startup.mark("first_step")
    for _ in range(warmup_steps - 1):
        step()
    sync()
    durations: list[float] = []
    span_start = time.time()
    startup.mark("window", at=span_start)
    while len(durations) < budget:
        start = time.perf_counter()
        for _ in range(steps_per_window):
            step()
        sync()
        durations.append(time.perf_counter() - start)
        if progress is not None:
            progress(f"window {len(durations)}/{budget}: {durations[-1]:.3f} s")
        if target_ci is not None and len(durations) >= windows:
            done = ci_reached(durations, target_ci)
            if agree(done) if agree is not None else done:
                break
    _last_span = [span_start, time.time()]
    return durations


def slowest_rank(per_rank_durations: Sequence[Sequence[float]]) -> list[float]:
    """Window times of a synchronous job: the maximum over ranks, window by window."""
    return [max(window) for window in zip(*per_rank_durations, strict=True)]


def throughput_measurement(
    window_seconds: Sequence[float],
    steps_per_window: int,
    batch_per_device: int,
    world_size: int,
) -> dict:
    """Per-window global and per-device img/s and step time, with their summaries."""
    images_per_window = steps_per_window * batch_per_device * world_size
    global_rate = [images_per_window / seconds for seconds in window_seconds]
    per_device = [rate / world_size for rate in global_rate]
    step_time = [seconds / steps_per_window for seconds in window_seconds]
    return {
        "window_seconds": list(window_seconds),
        "steps_per_window": steps_per_window,
        "images_per_window": images_per_window,
        "img_s": global_rate,
        "summary": {
            "img_s": summarise(global_rate).as_dict(),
            "img_s_per_device": summarise(per_device).as_dict(),
            "step_time_s": summarise(step_time).as_dict(),
        },
    }
