"""A small run's loss breakdown (analysis.results.loss_breakdown) carried to N devices term by
term (docs/decisions/loss-breakdown-prediction.md), each term by its own law:

- **contention** per machine: the ranks that share one machine's cores. While they fit the
  cores it stays as measured at the same ranks per machine; where they outnumber them
  (emulated nodes on one host, more ranks than cores) the compute is time-shared, and the
  local step grows with the ranks per core: ``local(N) = local_cal x share(N) / share_cal``,
  ``share = max(1, ranks x cpus per rank / cores)``;
- **waiting** by the expected slowest of N ranks: the measured waiting over the expected
  largest of the calibration's ranks' standard-normal steps, ``w = j x local x m(N)``, ``j``
  pinned by ``w_cal / (local_cal x m(N_cal))``;
- **exposed exchange** by the link's law: the link-only prediction's exposed share
  (``l(N) - 1``, the engine's step ratio over one device, buckets and overlap included)
  scaled by what the small run measured at its own scale, ``x(N) = g x (l(N) - 1) x one``;
  where the link-only prediction exposes nothing at the calibration's scale, ``g`` stays 1
  (the link) and says so;
- **one device's own exchange** (a 1-rank all-reduce, a parameter server round trip): in
  every layout's step and in one device's; the rank's own CPU work (bucket copies, a 1-rank
  reduction), so it time-shares the cores as the compute does.

The predicted step is ``local(N) + w(N) + x(N) + own exchange``; the efficiency one
device's step over it. Its range spans every corner of the calibration terms' 95% ranges.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from dpscale.analysis.laws.calibrated import expected_max_normal

# below this the link-only prediction exposes no exchange to scale (one step ratio - 1)
NO_EXPOSURE = 1e-3
# the calibration terms a prediction's range spans, low and high
RANGED = ("one", "one_local", "local", "waiting", "exposed")


@dataclass(frozen=True)
class Host:
    """Where a layout's ranks run: ``ranks`` share one machine's ``cpus`` cores, each rank
    keeping ``cpus_per_rank`` busy."""

    ranks: int
    cpus: int
    cpus_per_rank: int = 1

    @property
    def share(self) -> float:
        """How many ranks' worth of compute each core carries (1 where they fit)."""
        return max(1.0, self.ranks * self.cpus_per_rank / self.cpus)


@dataclass(frozen=True)
class TermCalibration:
    """A small run's one layout split into its terms (seconds, each with its 95% half-width
    in ``halves``), and what pins each law: its world size, the link-only step ratio there,
    its host."""

    world: int
    one: float  # one device's step: the efficiency's base
    one_local: float  # one device's step without its own exchange
    local: float  # the layout's local step: compute and contention
    waiting: float
    exposed: float
    link_ratio: float
    host: Host
    halves: Mapping[str, float]
    where: str  # the layout in words

    @property
    def exposure(self) -> float:
        """g: the measured exposed exchange over the link-only prediction's; 1 where the
        link-only prediction exposes none at this scale (nothing pins it)."""
        link_exposed = (self.link_ratio - 1) * self.one
        if link_exposed <= NO_EXPOSURE * self.one:
            return 1.0
        return self.exposed / link_exposed

    @property
    def jitter(self) -> float:
        """j: the waiting per local step per unit of the expected largest normal; never
        below 0 (a barrier cannot save time: a negative waiting is the cells' noise)."""
        return max(self.waiting, 0.0) / (self.local * expected_max_normal(self.world))

    def corners(self) -> list[TermCalibration]:
        """The calibration at every corner of its terms' 95% ranges (low and high each)."""
        spans = [
            (name, (getattr(self, name) - self.halves.get(name, 0.0),
                    getattr(self, name) + self.halves.get(name, 0.0)))
            for name in RANGED
        ]  # fmt: skip
        out = []
        for values in itertools.product(*(span for _, span in spans)):
            changed = dict(zip((name for name, _ in spans), values, strict=True))
            changed["one_local"] = min(changed["one_local"], changed["one"])
            out.append(replace(self, **changed))
        return out


@dataclass(frozen=True)
class TermPrediction:
    """One layout's predicted step, split into its terms (seconds), and its efficiency."""

    world: int
    local: float
    contention: float
    waiting: float
    exposed: float
    own_exchange: float
    step: float
    efficiency: float


def predict_terms(
    calibration: TermCalibration, world: int, link_ratio: float, host: Host
) -> TermPrediction:
    """One layout of ``world`` ranks on ``host``, whose link-only step ratio is
    ``link_ratio``, by each term's law from ``calibration``."""
    shared = host.share / calibration.host.share  # the rank's CPU work, time-shared
    local = calibration.local * shared
    waiting = calibration.jitter * local * expected_max_normal(world) if world > 1 else 0.0
    exposed = calibration.exposure * max(link_ratio - 1, 0.0) * calibration.one
    own = (calibration.one - calibration.one_local) * shared
    step = local + waiting + exposed + own
    contention = local - calibration.one_local
    return TermPrediction(
        world, local, contention, waiting, exposed, own, step, calibration.one / step
    )


def predicted_range(
    calibration: TermCalibration, world: int, link_ratio: float, host: Host
) -> tuple[TermPrediction, float, float]:
    """The prediction at the calibration's values, and the lowest and highest efficiency
    over its corners."""
    point = predict_terms(calibration, world, link_ratio, host)
    efficiencies = [
        predict_terms(corner, world, link_ratio, host).efficiency
        for corner in calibration.corners()
        if corner.local > 0 and corner.one > 0
    ]
    return point, min(efficiencies, default=math.nan), max(efficiencies, default=math.nan)


def from_breakdown(
    row: Mapping[str, Any], link_ratio: float, host: Host, where: str
) -> TermCalibration | None:
    """A calibration from one loss-breakdown row with every control measured (one device's
    local, local, barrier); None where one is missing."""
    needed = ("one_step_s", "one_local_step_s", "local_step_s", "barrier_step_s", "full_step_s")
    if any(not _known(row.get(name)) for name in needed):
        return None
    one, full = float(row["one_step_s"]), float(row["full_step_s"])
    # the terms' half-widths in seconds, from their points' (a term's points are its
    # seconds over the layout's step)
    halves = {
        name: abs(float(row[f"{term}_points_ci95"])) * full / 100
        for name, term in (("local", "contention"), ("waiting", "waiting"),
                           ("exposed", "exposed_comm"))
    }  # fmt: skip
    halves["one"] = halves["one_local"] = 0.0
    return TermCalibration(
        world=int(row["world_size"]),
        one=one,
        one_local=float(row["one_local_step_s"]),
        local=float(row["local_step_s"]),
        waiting=float(row["waiting_s"]),
        exposed=float(row["exposed_comm_s"]),
        link_ratio=link_ratio,
        host=host,
        halves=halves,
        where=where,
    )


def _known(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def basis_words(calibration: TermCalibration) -> str:
    """What the term-by-term prediction stands on, in words: which terms the small run
    measured, and which law carries each."""
    pinned = (
        f"exposed exchange {calibration.exposure:.2f} x the link-only prediction's"
        if calibration.link_ratio - 1 > NO_EXPOSURE
        else "exposed exchange as the link-only prediction prices it (the small run's scale "
        "exposes none to pin it)"
    )
    return (
        f"terms measured on {calibration.where} (control cells): contention carried per "
        f"machine ({calibration.host.ranks} ranks on {calibration.host.cpus} cores there; "
        "time-shared where ranks outnumber cores), waiting by the expected slowest of N "
        f"ranks (j = {calibration.jitter:.3f} of a local step), {pinned}; one device's own "
        "exchange as measured, time-shared as the compute"
    )
