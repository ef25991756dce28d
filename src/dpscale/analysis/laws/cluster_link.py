"""A cluster's inter-node network, read from its nccl-tests ``all_reduce_perf`` log: the
collective time of each gradient bucket, and where each number came from.

One pricing rule at every rank count: within the log's sizes, its own time, carried to
another rank count by the ring law (plan.ring) fitted to the log (alpha_beta) as a ratio, so
the law and the log agree at the log's own count and a larger count never prices a message
cheaper (docs/decisions/one-pricing-across-scales.md); beyond its sizes, the fitted law
itself. The basis says which; where the law is needed and its fit left alpha or beta not
resolved, there is no number there (NaN, and why). A log whose bus bandwidth exceeds the
link's nominal rate did not run a plain ring over that link (a tree, NVLS, or the nodes' own
fabric carrying part of it): its measured times are still what that cluster does, and the
curve says which it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dpscale.analysis.laws.alpha_beta import AlphaBetaFit, fit_alpha_beta, ring_seconds
from dpscale.analysis.results.import_logs import AllReduceLog
from dpscale.plan import ring
from dpscale.plan.link import Link

MEASURED = "measured"
# a bus bandwidth this far above the nominal rate is not a ring over that link: nccl-tests
# prints GB/s to two decimals and a link's nominal rate is rounded, so equal is not above
ABOVE_RATE_TOLERANCE = 0.05
NOT_CHECKED = "not checked (no nominal rate given)"
NOT_PLAIN_RING = "the log is not a plain ring over this link"
GB = 1e9  # nccl-tests' GB/s are 1e9 bytes/s


@dataclass(frozen=True)
class CollectiveTime:
    """One all-reduce's seconds, its 95% range where one is justified (NaN where not: the
    log prints one average per size), and the basis of the number in a few words; where the
    fitted law is needed and its fit left alpha or beta not resolved, no number (NaN) and
    ``unresolved`` says why and what would resolve it."""

    seconds: float
    lo: float
    hi: float
    basis: str
    unresolved: str = ""

    @property
    def resolved(self) -> bool:
        return not self.unresolved


# what would resolve a parameter the log's sizes leave open, in all_reduce_perf's options
RESOLVES = {
    "alpha": "sizes down to where latency sets the time (all_reduce_perf -b 8)",
    "beta": "sizes up to where bandwidth sets the time (all_reduce_perf -e 1G)",
}


def _check_request(message_bytes: float, ranks: int) -> None:
    """An all-reduce needs a message and at least two ranks."""
    if not message_bytes > 0:
        raise ValueError(f"message_bytes must be > 0, got {message_bytes}")
    if ranks < 2:
        raise ValueError(f"ranks must be >= 2 for an all-reduce, got {ranks}")


def _nominal_bytes_s(nominal: Link | float | None) -> float:
    """The link's nominal rate in bytes/s; NaN where none is given or the Link's is unknown."""
    if nominal is None:
        return math.nan
    rate = nominal.bytes_per_s if isinstance(nominal, Link) else float(nominal)
    return rate if math.isfinite(rate) and rate > 0 else math.nan


def _measured(log: AllReduceLog) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Sizes ascending and their times in seconds; rows of size or time 0 dropped (nothing to
    interpolate in log space), a size logged twice keeps the median of its times."""
    by_size: dict[int, list[float]] = {}
    for row in log.rows:
        if row.message_bytes > 0 and row.time_us > 0:
            by_size.setdefault(row.message_bytes, []).append(row.time_us * 1e-6)
    sizes = tuple(sorted(by_size))
    return sizes, tuple(float(np.median(by_size[size])) for size in sizes)


@dataclass(frozen=True)
class CollectiveCurve:
    """A log's all-reduce times at the rank count it ran at, the ring law fitted to them
    (None where the log has fewer than 3 sizes), the peak bus bandwidth and the link's
    nominal rate (NaN: not given)."""

    sizes: tuple[int, ...]  # bytes, ascending
    times_s: tuple[float, ...]
    ranks: int
    fit: AlphaBetaFit | None
    peak_busbw_bytes_s: float
    nominal_bytes_s: float
    placement: str

    @classmethod
    def from_log(
        cls, log: AllReduceLog, ranks: int, nominal: Link | float | None = None
    ) -> CollectiveCurve:
        """The curve of a parsed log run at ``ranks``; ``nominal``: the link's rate (a Link,
        or bytes/s) that its bus bandwidth is checked against."""
        if ranks < 2:
            raise ValueError(f"ranks must be >= 2 for an all-reduce, got {ranks}")
        if log.ranks_listed is not None and log.ranks_listed != ranks:
            raise ValueError(f"ranks: the log lists {log.ranks_listed} ranks, not {ranks}")
        sizes, times = _measured(log)
        if not sizes:
            raise ValueError("log: no row with a size and a time above 0")
        fit = fit_alpha_beta(sizes, times, ranks) if len(sizes) >= 3 else None
        peak = max(row.busbw_GB_s for row in log.rows) * GB
        return cls(sizes, times, ranks, fit, peak, _nominal_bytes_s(nominal), log.placement)

    @property
    def plain_ring(self) -> bool | None:
        """False where the peak bus bandwidth is above the nominal rate; None: not checked."""
        if math.isnan(self.nominal_bytes_s):
            return None
        return self.peak_busbw_bytes_s <= self.nominal_bytes_s * (1 + ABOVE_RATE_TOLERANCE)

    @property
    def algorithm(self) -> str:
        """What the log's bus bandwidth says of the algorithm, in words a report prints."""
        if self.plain_ring is None:
            return NOT_CHECKED
        busbw = f"busbw {self.peak_busbw_bytes_s / GB:.3g} GB/s"
        rate = f"the link's {self.nominal_bytes_s / GB:.3g} GB/s"
        if self.plain_ring:
            return f"{busbw} within {rate}: consistent with a ring over this link"
        return f"{busbw} above {rate}: not a plain ring over this link; the measured times are used"

    def seconds(self, message_bytes: float, ranks: int) -> CollectiveTime:
        """One all-reduce of ``message_bytes`` over ``ranks``: within the log's sizes, its
        own time (log-log interpolation between its two nearest sizes), scaled to other rank
        counts by the ring law fitted to it, so every rank count is priced from the same
        measured point (docs/decisions/one-pricing-across-scales.md); beyond its sizes the
        fitted ring law; no number (``unresolved``) where that law is needed and its fit
        left alpha or beta not resolved."""
        _check_request(message_bytes, ranks)
        within = self.sizes[0] <= message_bytes <= self.sizes[-1]
        if within and ranks == self.ranks:
            return CollectiveTime(self._interpolated(message_bytes), math.nan, math.nan, MEASURED)
        if within:
            return self._scaled(message_bytes, ranks)
        if ranks == self.ranks:
            return self._ring(
                message_bytes, ranks, "ring law beyond the log's sizes (fitted on the log)"
            )
        return self._ring(
            message_bytes, ranks, f"ring law at {ranks} ranks (log measured {self.ranks})"
        )

    def _interpolated(self, message_bytes: float) -> float:
        """The measured time, linear in log(size)-log(time) between the bracketing sizes;
        the logged time itself at a logged size."""
        index = int(np.searchsorted(self.sizes, message_bytes))
        if index < len(self.sizes) and self.sizes[index] == message_bytes:
            return self.times_s[index]
        log_time = np.interp(np.log(message_bytes), np.log(self.sizes), np.log(self.times_s))
        return float(np.exp(log_time))

    def _fitted(self, message_bytes: float, ranks: int) -> AlphaBetaFit:
        """The ring law fitted to the log; a ValueError where it has too few sizes for one."""
        if self.fit is None:
            raise ValueError(
                f"message_bytes/ranks: {message_bytes:,.0f} B at {ranks} ranks is outside the "
                f"log, and its {len(self.sizes)} size(s) are too few to fit the ring law (3)"
            )
        return self.fit

    def _basis(self, words: str) -> str:
        return words + (f"; {NOT_PLAIN_RING}" if self.plain_ring is False else "")

    def _scaled(self, message_bytes: float, ranks: int) -> CollectiveTime:
        """The log's own time at its rank count times the fitted ring law's ratio between
        ``ranks`` and that count: the law only carries the measured point to another
        count, so both agree at the log's own. The range is the ratio's over the corners of
        alpha's and beta's 95% intervals (the measured time has none)."""
        fit = self._fitted(message_bytes, ranks)
        basis = self._basis(
            f"ring law at {ranks} ranks (log measured {self.ranks}), scaled from the log's "
            f"time at {self.ranks}"
        )
        if not fit.resolved:
            return self._not_resolved(ranks, basis, fit)
        measured = self._interpolated(message_bytes)
        corners = [
            rank_ratio(message_bytes, self.ranks, ranks, alpha, beta)
            for alpha in (fit.alpha_lo, fit.alpha_hi)
            for beta in (fit.beta_lo_bytes_s, fit.beta_hi_bytes_s)
        ]
        point = rank_ratio(message_bytes, self.ranks, ranks, fit.alpha_s, fit.beta_bytes_s)
        return CollectiveTime(
            measured * point, measured * min(corners), measured * max(corners), basis
        )

    def _ring(self, message_bytes: float, ranks: int, words: str) -> CollectiveTime:
        """The ring law with the log's fitted alpha and beta; the range is the law at the
        ends of both parameters' 95% intervals (slowest: alpha_hi with beta_lo)."""
        fit = self._fitted(message_bytes, ranks)
        basis = self._basis(words)
        if not fit.resolved:
            return self._not_resolved(ranks, basis, fit)
        lo = ring.ring_allreduce_seconds(message_bytes, ranks, fit.beta_hi_bytes_s, fit.alpha_lo)
        hi = ring.ring_allreduce_seconds(message_bytes, ranks, fit.beta_lo_bytes_s, fit.alpha_hi)
        seconds = ring_seconds(message_bytes, ranks, fit)
        return CollectiveTime(float(seconds), float(lo), float(hi), basis)

    def _not_resolved(self, ranks: int, basis: str, fit: AlphaBetaFit) -> CollectiveTime:
        """No time where the law is needed and its fit left a parameter open: the law
        stands on both (docs/decisions/not-resolved-predictions.md)."""
        open_ = [
            (name, why)
            for name, why in (("alpha", fit.alpha_unresolved), ("beta", fit.beta_unresolved))
            if why
        ]
        why = "; ".join(f"{name} {reason}" for name, reason in open_)
        resolves = "would resolve it: a log with " + " and ".join(RESOLVES[n] for n, _ in open_)
        if ranks != self.ranks:
            resolves += f", or a log at {ranks} ranks spanning the sizes (its times need no law)"
        unresolved = f"{basis}; {why}; {resolves}"
        return CollectiveTime(math.nan, math.nan, math.nan, f"{basis}; {why}", unresolved)


def rank_ratio(
    message_bytes: float, ranks_from: int, ranks_to: int, alpha: float, beta: float
) -> float:
    """The ring law's all-reduce time at ``ranks_to`` over its time at ``ranks_from``, one
    message, alpha taken as at least 0 (latency never shortens a time). It grows with
    ``ranks_to``: more ranks never price a message cheaper."""
    latency = max(alpha, 0.0)
    before = ring.ring_allreduce_seconds(message_bytes, ranks_from, beta, latency)
    after = ring.ring_allreduce_seconds(message_bytes, ranks_to, beta, latency)
    if before > 0:
        return float(after / before)
    # no latency and an unbounded beta: both terms vanish; the bandwidth term's ratio stands
    return float(ring.ring_factor(ranks_to) / ring.ring_factor(ranks_from))


@dataclass(frozen=True)
class BucketCosts:
    """Each gradient bucket's all-reduce at one rank count: one row of the bucket model's
    costs matrix (commmodel.buckets), with the basis of each number."""

    times: tuple[CollectiveTime, ...]

    @property
    def seconds(self) -> np.ndarray:
        return np.array([time.seconds for time in self.times], dtype=float)

    @property
    def bases(self) -> tuple[str, ...]:
        return tuple(time.basis for time in self.times)


def bucket_costs(curve: CollectiveCurve, bucket_bytes: Sequence[float], ranks: int) -> BucketCosts:
    """The all-reduce of every bucket (bytes, in the model's bucket order) over ``ranks``."""
    return BucketCosts(tuple(curve.seconds(float(size), ranks) for size in bucket_bytes))
