"""One pending scheduler re-evaluation at a time in the Snakemake process (issue 19).

With ``--max-jobs-per-timespan`` (default ``100/1s``) Snakemake's scheduler arms a
``threading.Timer`` at the end of every scheduling pass, and each timer wakes the scheduler
for another pass. A pass that a finished job triggers arms one more timer, so every finished
job starts a new chain that re-runs the job selector each second for as long as jobs wait
for a resource: with dpscale's one bench slot, pass k+1 of a study comes (1 + k) times a
second, and the Snakemake process's CPU grows with the cells finished (measured in
docs/measurements/2026-11-23-snakemake-cpu.md).

:func:`coalesce_reevaluations` replaces that method so that a new timer is armed only when
none is pending: the rate limiter still gets a pass within its timespan, and the timer is
a daemon, so Snakemake's exit does not wait for it. Decision: docs/decisions/scheduler-passes.md.
"""

from __future__ import annotations

import threading
from typing import Any

PATCHED = "_dpscale_coalesced"


_LOCK = threading.Lock()


def _coalesced(self: Any, delay: float) -> None:
    """Arm a re-evaluation in ``delay`` seconds unless one is already pending."""
    with _LOCK:
        if getattr(self, "_dpscale_reevaluation_pending", False):
            return
        self._dpscale_reevaluation_pending = True

    def fire() -> None:
        with _LOCK:  # cleared before the pass it starts, which may arm the next one
            self._dpscale_reevaluation_pending = False
        self._open_jobs.release()

    timer = threading.Timer(delay, fire)
    timer.daemon = True
    timer.start()


def coalesce_reevaluations() -> bool:
    """Patch Snakemake's JobScheduler; False (and no change) where its method is gone."""
    from snakemake.scheduling import job_scheduler

    scheduler = getattr(job_scheduler, "JobScheduler", None)
    if scheduler is None or not hasattr(scheduler, "_schedule_reevalutation"):
        return False
    setattr(_coalesced, PATCHED, True)
    scheduler._schedule_reevalutation = _coalesced
    return True
