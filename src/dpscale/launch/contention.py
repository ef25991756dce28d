"""What else used the machine's CPUs while a cell measured, and the cell's quality verdict.

A :class:`ContentionSampler` runs in a background thread of the launcher while the cell's
processes run. Every ``interval_s`` (default :data:`SAMPLE_INTERVAL_S`, 0.5 s) it reads:

- ``/proc/stat``: the machine's busy, interrupt, idle and steal jiffies over all CPUs
  (busy = user + nice + system, interrupts = irq + softirq; iowait counts as idle);
- ``/proc/loadavg``: the 1-minute load average;
- the CPU time (utime + stime of ``/proc/<pid>/stat``) of the cell's own process tree: the
  launcher itself (its sampler thread included) and all its descendants. The last value of
  a process that has exited is kept, so its CPU time still counts as the cell's. New
  descendants are found at every sample from the list of ``/proc`` entries: only a process
  not seen before has its ``stat`` read for its parent, which keeps a sample cheap (the
  launcher's CPU, sampler included, is measured by benchmarks/launcher_footprint.py).

Foreign CPU = machine busy minus the cell's own tree, in cores (CPU seconds per wall
second), over the timed part of the run: the samples that bracket
``measurement.timed_span`` (the wall-clock span of the timed windows, recorded by the
runner), or the whole run when a result has no span (training cells). GPU utilisation of
other processes is not sampled (an ``nvidia-smi`` call costs tens of milliseconds of CPU);
on GPU cells the verdict is about the host CPUs only.

Interrupt work (irq + softirq) is charged to no process. On a quiet machine it is about
zero; while a cell measures it is mostly the kernel moving the cell's own traffic (loopback,
veth pairs, tc shaping), so it is not foreign: it is reported as
``interrupt_cpu_cores_mean`` and left out of the verdict (docs/decisions/interrupt-cpu.md).

Only local runs are sampled: in a SLURM job the scheduler gives the cell its own CPUs, and
its ranks are started by SLURM, not by the launcher, so they would look foreign.

Verdict (``quality``), relative to the cores the cell leaves idle,
``spare = CPUs - cpus_used_by_cell`` (processes on this machine, emulated nodes' included,
x threads per process, a folder cell's loader workers beside each):

- ``contaminated``: foreign work took more than :data:`CONTAMINATED_CORES` (0.25) of a core
  from the cell on average (``foreign_cpu_cores_mean - spare``), or the hypervisor stole
  more than :data:`CONTAMINATED_STEAL` (5%) of the CPU time. Such a cell's img/s are not
  the machine's: the fits leave it out.
- ``noisy``: other processes used more than :data:`NOISY_CORES` (0.05) of a core on
  average on *any* CPU, spare ones included (they share caches, memory bandwidth and
  possibly physical cores with the cell's: three repeats of a 1-process torch-ddp cell on 2
  vCPUs gave 43.8, 49.5 and 52.0 img/s beside 0.10, 0.06 and 0.03 foreign cores), or took
  more than :data:`NOISY_PEAK_CORES` (0.5) from the cell in some sample interval, or steal
  was above :data:`NOISY_STEAL` (1%). The numbers are kept, flagged.
- ``ok`` otherwise; ``unknown`` when fewer than two samples cover the span (a very short
  run, or no ``/proc``).

An oversubscribed cell (``measure.oversubscribe``: more processes x threads than CPUs, a
folder cell's loader workers counted) says so in ``system.contention.oversubscribed`` and in
its reason; it is ``contaminated`` when its own ranks used more than
:data:`NETWORK_BOUND_SHARE` of the CPUs (their compute time-shared the cores), else judged
as above: network-bound, its ranks mostly wait on the link.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from dpscale.plan.cell import Cell

SAMPLE_INTERVAL_S = 0.5
CONTAMINATED_CORES = 0.25
CONTAMINATED_STEAL = 0.05
NOISY_CORES = 0.05
NOISY_PEAK_CORES = 0.5
NOISY_STEAL = 0.01
# an oversubscribed cell (more processes x threads than CPUs, measure.oversubscribe) is
# network-bound, and kept, only while its ranks use at most this share of the CPUs: beyond
# it their compute time-shares the cores, so the step is not that of separate machines
NETWORK_BOUND_SHARE = 0.5
QUALITIES = ("ok", "noisy", "contaminated", "unknown")
PROC = Path("/proc")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Sample:
    """One reading; jiffies are machine totals since boot, ``own`` the cell tree's."""

    wall: float
    busy: int
    idle: int
    steal: int
    own: int
    loadavg_1m: float
    interrupts: int = 0


@dataclass(frozen=True)
class MachineTimes:
    busy: int
    idle: int
    steal: int
    cpus: int
    interrupts: int = 0


def read_machine_times(proc: Path = PROC) -> MachineTimes:
    """Aggregate CPU jiffies from ``/proc/stat`` (first line) and the number of CPUs."""
    lines = (proc / "stat").read_text().splitlines()
    fields = [int(v) for v in lines[0].split()[1:]]
    fields += [0] * (8 - len(fields))
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return MachineTimes(user + nice + system, idle + iowait, steal, cpus, irq + softirq)


def read_loadavg(proc: Path = PROC) -> float:
    return float((proc / "loadavg").read_text().split()[0])


def read_pid_stat(pid: int, proc: Path = PROC) -> tuple[int, int] | None:
    """(parent pid, CPU jiffies) of a process, or None once it is gone. The CPU is its own
    (utime + stime) and that of the children it has waited for (cutime + cstime): a child
    that exits between two samples is counted in its parent when reaped."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2 :].split()  # the command name may hold spaces
    return int(rest[1]), sum(int(v) for v in rest[11:15])


def update_parents(parents: dict[int, int], proc: Path = PROC) -> dict[int, int]:
    """pid -> parent pid for every process now running; ``stat`` is read only for pids
    not in ``parents`` (a parent changes only when it exits, to an ancestor: the process
    stays in the tree it was found in)."""
    current = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid in parents:
            current[pid] = parents[pid]
        else:
            stat = read_pid_stat(pid, proc)
            if stat is not None:
                current[pid] = stat[0]
    return current


def descendants(root: int, parents: dict[int, int]) -> set[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    tree, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return tree


@dataclass
class ContentionSampler:
    """Samples the machine and the process tree under ``root`` in a daemon thread."""

    root: int = field(default_factory=os.getpid)
    interval_s: float = SAMPLE_INTERVAL_S
    enabled: bool = True
    proc: Path = PROC
    samples: list[Sample] = field(default_factory=list)
    cpus: int = 0
    _last_cpu: dict[int, int] = field(default_factory=dict)
    _exited_cpu: int = 0
    _parents: dict[int, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="contention", daemon=True)
        self._thread.start()

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10 * self.interval_s + 5)
        self.sample()
        return self.samples

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """Take one reading (the thread calls this; so do start and stop)."""
        known = dict(self._parents)
        self._parents = update_parents(self._parents, self.proc)
        # a child is in its parent's cutime when the parent was tracked at the last sample,
        # whether or not the parent has gone since
        tracked_before = set(self._last_cpu)
        for pid in descendants(self.root, self._parents) | tracked_before:
            stat = read_pid_stat(pid, self.proc)
            if stat is None:  # exited and reaped
                last = self._last_cpu.pop(pid, 0)
                if known.get(pid) not in tracked_before:  # not by a parent of the tree
                    self._exited_cpu += last  # (there its whole CPU is in the parent's)
            else:
                self._last_cpu[pid] = max(stat[1], self._last_cpu.get(pid, 0))
        machine = read_machine_times(self.proc)
        self.cpus = machine.cpus
        self.samples.append(
            Sample(
                wall=time.time(),
                busy=machine.busy,
                idle=machine.idle,
                steal=machine.steal,
                own=self._exited_cpu + sum(self._last_cpu.values()),
                loadavg_1m=read_loadavg(self.proc),
                interrupts=machine.interrupts,
            )
        )


@contextmanager
def sampling(
    interval_s: float = SAMPLE_INTERVAL_S, enabled: bool = True
) -> Iterator[ContentionSampler]:
    """Sample while the block runs (the launcher waits for its runner inside it); a
    sampler that is not ``enabled`` takes no sample and annotates nothing."""
    sampler = ContentionSampler(interval_s=interval_s, enabled=enabled)
    if not enabled:
        yield sampler
        return
    try:
        sampler.start()
    except OSError:  # no /proc: the verdict will be "unknown"
        yield sampler
        return
    try:
        yield sampler
    finally:
        sampler.stop()


def samples_in_span(samples: Sequence[Sample], span: Sequence[float] | None) -> list[Sample]:
    """The samples that bracket ``span``: the last one at or before its start through the
    first one at or after its end (all of them when there is no span)."""
    if not span:
        return list(samples)
    start, end = span
    first = max((i for i, s in enumerate(samples) if s.wall <= start), default=0)
    last = min((i for i, s in enumerate(samples) if s.wall >= end), default=len(samples) - 1)
    return list(samples[first : last + 1])


def foreign_cores(a: Sample, b: Sample) -> float:
    """Cores used by processes outside the cell between two samples."""
    seconds = b.wall - a.wall
    foreign_jiffies = (b.busy - a.busy) - (b.own - a.own)
    return max(foreign_jiffies, 0) / CLOCK_TICKS / seconds if seconds > 0 else 0.0


def summarise_contention(
    samples: Sequence[Sample],
    span: Sequence[float] | None,
    cpus: int,
    cpus_used_by_cell: int,
    interval_s: float = SAMPLE_INTERVAL_S,
) -> dict[str, Any]:
    """``system.contention`` of a result: foreign CPU over the timed span, and more."""
    chosen = samples_in_span(samples, span)
    summary: dict[str, Any] = {
        "interval_s": interval_s,
        "samples": len(chosen),
        "cpus": cpus,
        "cpus_used_by_cell": cpus_used_by_cell,
        "spare_cpus": max(cpus - cpus_used_by_cell, 0),
        "span": "timed windows" if span else "whole run",
        "timed_span": list(span) if span else None,
        "foreign_cpu_cores_mean": None,
        "foreign_cpu_cores_max": None,
        "cell_cpu_cores_mean": None,
        "interrupt_cpu_cores_mean": None,
        "steal_fraction": None,
        "loadavg_1m": None,
    }
    if len(chosen) < 2:
        return summary
    first, last = chosen[0], chosen[-1]
    seconds = last.wall - first.wall
    total = (last.busy + last.idle + last.steal + last.interrupts) - (
        first.busy + first.idle + first.steal + first.interrupts
    )
    summary.update(
        foreign_cpu_cores_mean=foreign_cores(first, last),
        foreign_cpu_cores_max=max(foreign_cores(a, b) for a, b in pairwise(chosen)),
        cell_cpu_cores_mean=(last.own - first.own) / CLOCK_TICKS / seconds if seconds else 0.0,
        interrupt_cpu_cores_mean=(last.interrupts - first.interrupts) / CLOCK_TICKS / seconds
        if seconds
        else 0.0,
        steal_fraction=(last.steal - first.steal) / total if total > 0 else 0.0,
        loadavg_1m=max(s.loadavg_1m for s in chosen),
    )
    return summary


def verdict(contention: dict[str, Any]) -> tuple[str, str]:
    """(quality, reason) from a ``system.contention`` summary; see the module docstring."""
    mean = contention.get("foreign_cpu_cores_mean")
    if mean is None:
        return "unknown", "fewer than two CPU samples cover the timed windows"
    spare = contention["spare_cpus"]
    taken = mean - spare
    peak = contention["foreign_cpu_cores_max"] - spare
    steal = contention["steal_fraction"]
    detail = (
        f"other processes used {mean:.2f} cores on average "
        f"(peak {contention['foreign_cpu_cores_max']:.2f}) "
        f"while the cell measured; {spare} of {contention['cpus']} CPUs were spare; "
        f"steal {steal:.1%}"
    )
    disturbed = taken > CONTAMINATED_CORES or steal > CONTAMINATED_STEAL
    if contention.get("oversubscribed"):
        bound, named = _oversubscription(contention)
        if not bound:
            return "contaminated", f"{named}; {detail}"
        detail = f"{named}; {detail}"
    if disturbed:
        return "contaminated", detail
    if mean > NOISY_CORES or peak > NOISY_PEAK_CORES or steal > NOISY_STEAL:
        return "noisy", detail
    return "ok", detail


def causes(contention: dict[str, Any]) -> dict[str, bool | None]:
    """Which of the two causes of a ``contaminated`` verdict held, apart:
    ``time_shared``, the cell's own ranks time-shared the cores (an oversubscribed cell,
    CPU-bound: the loss breakdown's contention term, measured as such); ``disturbed``, other
    work or the hypervisor took CPU from it. None where the samples cannot tell."""
    if contention.get("foreign_cpu_cores_mean") is None:
        return {"time_shared": None, "disturbed": None}
    taken = contention["foreign_cpu_cores_mean"] - contention["spare_cpus"]
    disturbed = taken > CONTAMINATED_CORES or contention["steal_fraction"] > CONTAMINATED_STEAL
    shared = bool(contention.get("oversubscribed")) and not _oversubscription(contention)[0]
    return {"time_shared": shared, "disturbed": disturbed}


def _oversubscription(contention: dict[str, Any]) -> tuple[bool, str]:
    """(network-bound, the words naming it) of an oversubscribed cell."""
    cpus = contention.get("cpus_allowed") or contention["cpus"]
    own = contention["cell_cpu_cores_mean"] or 0.0
    share = own / cpus if cpus else float("inf")
    bound = share <= NETWORK_BOUND_SHARE
    named = (
        f"oversubscribed: {contention['cpus_used_by_cell']} CPUs wanted on {cpus}; its ranks "
        f"used {own:.2f} cores ({share:.0%} of the CPUs, at most "
        f"{NETWORK_BOUND_SHARE:.0%} counts as network-bound): "
        + ("network-bound" if bound else "CPU-bound, their compute time-shared the cores")
    )
    return bound, named


def cpus_used_by(cell: Cell) -> int:
    """CPUs the cell's measured processes are given on this machine (processes x their
    threads, and a folder cell's loader workers beside each: Cell.cpus_per_rank). Only local
    runs are sampled, where every node of a multi-node cell is an emulated one on this
    machine."""
    return cell.nodes * cell.devices_per_node * cell.cpus_per_rank


def annotate(result: dict[str, Any], sampler: ContentionSampler, cell: Cell) -> str | None:
    """Add ``system.contention``, ``quality`` and ``quality_reason`` to an ok result (in
    place; the launcher writes it).

    Returns the quality, or None when the result is not ok (or the sampler was not
    enabled: in a SLURM job).
    """
    if not sampler.enabled or result.get("status") != "ok":
        return None
    timed = result.get("measurement") or result.get("collectives") or {}
    span = timed.get("timed_span")
    contention = summarise_contention(
        sampler.samples, span, sampler.cpus, cpus_used_by(cell), sampler.interval_s
    )
    allowed = len(cell.interventions.cpus) if cell.interventions.cpus else sampler.cpus
    contention["oversubscribed"] = cpus_used_by(cell) > allowed
    if cell.interventions.cpus:  # config interventions.cpus: the cores the cell may use
        contention["cpus_allowed"] = allowed
    quality, reason = verdict(contention)
    contention.update(causes(contention))
    result["system"]["contention"] = contention
    result["quality"], result["quality_reason"] = quality, reason
    return quality
