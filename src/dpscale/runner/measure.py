"""The loop every strategy's ranks run, framework-free: measure, gather, check, write.

A strategy's adapter sets its framework up (init, pin the device, build, wrap, broadcast)
and hands :func:`run_cell` a :class:`~dpscale.runner.rank.Rank`: the handful of framework calls
the loop needs.
The loop then does the same thing for every strategy:

1. collectives mode: time the strategy's all-reduce at each message size by the same
   protocol (runner.timing), buffers created before each size's warm-up;
   synthetic mode: time the training step by the core protocol (runner.timing: warm-up,
   synchronised windows; with ``measure.target_ci``, more windows until every rank agrees
   the interval is narrow enough), then, where the strategy has gradient buckets
   (torch-ddp), a few more steps timed in their parts with each bucket's ready time
   (Rank.bucket_timeline), then the device's dense matrix-multiply peak with the same
   protocol (for model FLOPs utilisation);
   folder mode: as synthetic, each step on the image loader's next batch, then the loader
   alone (no model) by the same protocol, and no bucket timeline;
   training mode: runner.training.run_training;
   in every mode the first collective is under a deadline, and later ones under a step
   watchdog where the framework has no timeout of its own (runner.faults);
2. gather every rank's windows, parameter checksum and device names on rank 0 (a window
   lasts as long as its slowest rank);
3. on rank 0: check that every rank ended with the same parameters (synchronous data
   parallelism must leave them bit-identical; a cell whose ranks diverged is ``failed``),
   and write the cell's result;
4. let the adapter finish (a barrier, so no rank exits before the result is written).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from dpscale.plan.cell import Cell
from dpscale.plan.controls import FULL
from dpscale.plan.result import now_iso
from dpscale.runner import startup
from dpscale.runner.faults import FirstCollectiveDeadline, StepWatchdog, arrivals_folder
from dpscale.runner.rank import Rank
from dpscale.runner.records import (
    write_collectives_result,
    write_synthetic_result,
    write_training_result,
)
from dpscale.runner.support import progress
from dpscale.runner.sysinfo import interpreter
from dpscale.runner.timing import Progress, Step, Sync, last_timed_span, summarise, time_windows
from dpscale.runner.training import TrainingBackend, run_training

T = TypeVar("T")

# The matrix-multiply peak: n x n x n products of the cell's compute type, timed like the
# model (warm-up, then synchronised windows). n is large enough to reach the dense peak of
# a CPU core or a GPU, small enough to take well under a second on one CPU core.
MATMUL_N = {"cpu": 1024, "cuda": 8192}
MATMUL_WARMUP, MATMUL_WINDOWS, MATMUL_PER_WINDOW = 2, 5, 2
MATMUL_DTYPES = {"fp32": "float32", "amp_bf16": "bfloat16", "amp_fp16": "float16"}
# Synthetic cells: extra steps after the timed windows that record when each gradient
# bucket is ready (Rank.bucket_timeline), so the result says how much communication the
# backward pass hides
TIMELINE_STEPS = 3
# Mode folder: the skipped (undecodable) files a result names; it counts them all
SKIPPED_NAMED = 20


class Guards:
    """What keeps a hung rank from hanging its cell (runner.faults): the deadline on the first
    collective, and the step watchdog where the framework has no timeout of its own. None
    of it applies to a cell of one process."""

    def __init__(self, cell: Cell, out: Path, rank: Rank) -> None:
        m, folder = cell.measure, arrivals_folder(out) if rank.size > 1 else None
        self.deadline = self.watchdog = None
        if folder is not None:
            self.deadline = FirstCollectiveDeadline(
                rank.rank, rank.size, m.collective_timeout_s, folder, hang_s=m.timeout_s
            )
        if folder is not None and not rank.times_out_collectives:
            bound_s = 2 * m.collective_timeout_s  # the frameworks' own timeouts' bound
            self.watchdog = StepWatchdog(rank.rank, rank.size, bound_s, folder, m.timeout_s)

    def steps(self, step: Step, sync: Sync, first: bool = True) -> tuple[Step, Sync]:
        """A timed step and sync: the first step under the deadline (``first``), every step
        and sync under the watchdog."""
        deadline = self.deadline if first else None
        watchdog = self.watchdog

        def guarded_step() -> None:
            if deadline is not None and not deadline.arrived:
                deadline.arrive()
            if watchdog is None:
                step()
            else:
                watchdog.step(step)

        def guarded_sync() -> None:
            if watchdog is None:
                sync()
            else:
                watchdog.call(sync)
            if deadline is not None:
                deadline.passed()

        return guarded_step, guarded_sync

    def backend(self, backend: TrainingBackend) -> TrainingBackend:
        return GuardedBackend(backend, self.deadline, self.watchdog)

    def agreement(self, rank: Rank) -> Callable[[bool], bool]:
        """Whether every rank is done measuring (Rank.agree), under the step watchdog."""
        return lambda done: self.call(rank.agree, done)  # [distributed]

    def call(self, call: Callable[..., T], *args: Any) -> T:
        """``call`` under the step watchdog, if any (steps outside the timed windows)."""
        return self.watchdog.call(call, *args) if self.watchdog else call(*args)


class GuardedBackend:
    """A training backend whose first step is under the collective deadline (it has
    finished, collective included, when ``train_step`` returns) and whose steps, syncs and
    reductions are under the step watchdog, if any."""

    def __init__(
        self,
        backend: TrainingBackend,
        deadline: FirstCollectiveDeadline | None,
        watchdog: StepWatchdog | None,
    ) -> None:
        self.backend, self.deadline, self.watchdog = backend, deadline, watchdog

    def _call(self, call: Callable[..., Any], *args: Any) -> Any:
        return self.watchdog.call(call, *args) if self.watchdog else call(*args)

    def planned(self, total_steps: int, warmup_steps: int) -> None:
        self.backend.planned(total_steps, warmup_steps)

    def set_lr(self, lr: float) -> None:
        self.backend.set_lr(lr)

    def train_step(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        deadline = self.deadline if self.deadline and not self.deadline.arrived else None
        if deadline:
            deadline.arrive()
        step = self.backend.train_step
        result = self.watchdog.step(step, images, labels) if self.watchdog else step(images, labels)
        if deadline:
            deadline.passed()
        return result

    def evaluate(self, images: np.ndarray, labels: np.ndarray) -> tuple[float, int]:
        return self.backend.evaluate(images, labels)

    def sync(self) -> None:
        self._call(self.backend.sync)

    def reduce_sum(self, values: list[float]) -> list[float]:
        return self._call(self.backend.reduce_sum, values)

    def reduce_max(self, values: list[float]) -> list[float]:
        return self._call(self.backend.reduce_max, values)


def run_cell(cell: Cell, out: Path, rank: Rank) -> None:
    started_at = now_iso()

    def log(message: str) -> None:
        progress(message, rank.rank)

    log(f"{cell.cell_id}: rank {rank.rank}/{rank.size}, {rank.batch} samples per step")
    mine: dict[str, Any] = {}
    guards = Guards(cell, out, rank)
    if cell.mode == "train":
        backend = guards.backend(rank.training_backend())
        mine["training"] = run_training(cell, backend, rank.rank, rank.size, rank.batch, log)
    elif cell.mode == "collectives":
        mine["collectives"] = time_allreduce(cell, rank, guards, log)
    else:
        folder, control = cell.mode == "folder", cell.control != FULL
        step, sync = guards.steps(*timed_step(cell, rank))
        m = cell.measure
        mine["windows"] = time_windows(
            step,
            sync,
            m.warmup_steps,
            m.windows,
            m.steps_per_window,
            log,
            **m.adaptive_kwargs(processes=rank.size, agree=guards.agreement(rank)),
        )
        mine["span"] = last_timed_span()  # what the launcher's contention verdict covers
        # a control cell's steps exchange nothing: no bucket to time
        timeline = None if control else guards.call(rank.bucket_timeline, TIMELINE_STEPS)
        if timeline is not None:  # [distributed] steps
            mine["timeline"] = timeline
        if folder:
            mine["pipeline"] = time_loader(cell, rank, log)
            mine["folder"] = rank.folder_record()
        mine["matmul"] = matmul_peak(cell, rank)
    mine["startup"] = startup.readings()
    mine["checksums"] = rank.param_checksums()
    mine["devices"] = rank.device_names()
    mine["interpreter"] = interpreter()
    every = rank.gather(mine)
    if rank.rank == 0:
        _write(cell, out, started_at, rank, every)
    rank.finish()


def timed_step(cell: Cell, rank: Rank) -> tuple[Step, Sync]:
    """The step a synthetic, folder or control cell times."""
    if cell.control != FULL:
        return rank.control_step(cell.control)
    return rank.folder_step() if cell.mode == "folder" else rank.synthetic_step()


def time_allreduce(cell: Cell, rank: Rank, guards: Guards, log: Progress) -> dict[str, Any]:
    """This rank's windows per message size, timed by the synthetic cells' protocol; the
    first all-reduce is under the same first-collective deadline as a first step."""
    assert cell.collectives is not None
    m = cell.measure
    windows: dict[str, list[float]] = {}
    span_start: float | None = None
    for index, nbytes in enumerate(cell.collectives.message_sizes()):
        step, sync = guards.steps(*rank.allreduce(nbytes), first=index == 0)
        log(f"all-reduce of {nbytes} bytes")
        windows[str(nbytes)] = time_windows(
            step, sync, m.warmup_steps, m.windows, m.steps_per_window
        )
        span = last_timed_span()
        if span_start is None and span:
            span_start = span[0]
    timed: dict[str, Any] = {"windows": windows}
    traffic = rank.gradient_traffic()
    if traffic is not None:  # one training step's buckets, as training sends them
        step, sync, sends = traffic
        step, sync = guards.steps(step, sync, first=False)
        log(f"one step's gradient traffic: {sends}")
        replay = time_windows(step, sync, m.warmup_steps, m.windows, m.steps_per_window)
        timed["replay"] = {**sends, "windows": replay}
        work = rank.remedy_work()
        if work is not None:  # the remedy's own compute on the same buckets, nothing sent
            log("the remedy's own work on one step's gradients")
            timed["replay"]["work_windows"] = time_windows(
                *work, m.warmup_steps, m.windows, m.steps_per_window
            )
    span = last_timed_span()
    timed["span"] = [span_start, span[1]] if span and span_start else None
    return timed


def loader_warmup(cell: Cell) -> int:
    """Batches the loader-alone timing discards first: the measure's warm-up, and at least
    the batches the workers hold ready (workers x prefetch), which would come at once."""
    settings = cell.image_folder
    ready = settings.workers * settings.prefetch if settings and settings.workers else 0
    return max(cell.measure.warmup_steps, ready + 1)


def time_loader(cell: Cell, rank: Rank, log: Progress) -> dict[str, Any]:
    """Mode folder: this rank's loader alone, no model, timed by the same protocol; no
    collective, so the ranks' loaders run side by side as they did in training."""
    m = cell.measure
    log("the image loader alone, no model")
    warmup = loader_warmup(cell)
    windows = time_windows(*rank.loader_step(), warmup, m.windows, m.steps_per_window)
    return {"windows": windows, "warmup": warmup}


def matmul_peak(cell: Cell, rank: Rank) -> dict[str, Any]:
    """This rank's dense matrix-multiply rate in TFLOP/s (mean over windows, 95% CI)."""
    n, dtype = MATMUL_N[cell.accelerator], MATMUL_DTYPES[cell.precision]
    step, sync = rank.matmul(n, dtype)
    seconds = time_windows(step, sync, MATMUL_WARMUP, MATMUL_WINDOWS, MATMUL_PER_WINDOW)
    rates = [2 * n**3 * MATMUL_PER_WINDOW / s / 1e12 for s in seconds]
    summary = summarise(rates)
    return {"tflop_s": summary.mean, "ci95": summary.ci95, "n": n, "dtype": dtype}


def _write(cell: Cell, out: Path, started_at: str, rank: Rank, every: list[dict]) -> None:
    checksums = [c for r in every for c in r["checksums"]]
    # a control cell's ranks step on their own gradients: their parameters part by design
    agreed = len(set(checksums)) == 1 or cell.control != FULL
    system_extra = {
        **rank.system_extra(),
        **folder_system(every),
        "gpu_names_seen": [name for r in every for name in r["devices"]],
        "cpu_kernels": rank.cpu_kernels(),
        "rank_interpreters": [r["interpreter"] for r in every],
    }
    common: dict[str, Any] = {
        "started_at": started_at,
        "framework": rank.framework,
        "framework_versions": rank.versions(),
        "threads_used": rank.threads_used,
        "trainable_params": rank.trainable_params,
        "forward_flops": rank.forward_flops,
        "rank_param_checksums": checksums,
        "status": "ok" if agreed else "failed",
        "reason": None if agreed else diverged(checksums),
        "startup": startup.phases([r["startup"] for r in every]),
    }
    print("\n".join(startup.mllog_lines(common["startup"])), flush=True)  # the cell's log
    if cell.mode == "train":
        write_training_result(
            cell, out, training=every[0]["training"], system_extra=system_extra, **common
        )
        return
    if cell.mode == "collectives":
        write_collectives_result(
            cell,
            out,
            per_rank=[r["collectives"]["windows"] for r in every],
            replays=[r["collectives"].get("replay") for r in every],
            description=rank.allreduce_description(),
            timed_span=_overall_span([r["collectives"]["span"] for r in every]),
            system_extra=system_extra,
            **common,
        )
        return
    peaks = [r["matmul"] for r in every]
    system_extra["matmul_peak"] = {
        **peaks[0],
        "tflop_s": float(sorted(p["tflop_s"] for p in peaks)[len(peaks) // 2]),
        "per_rank_tflop_s": [p["tflop_s"] for p in peaks],
        "framework": rank.framework,
    }
    write_synthetic_result(
        cell,
        out,
        per_rank_windows=[r["windows"] for r in every],
        timed_span=_overall_span([r.get("span") for r in every]),
        system_extra=system_extra,
        timeline=every[0].get("timeline"),
        pipeline_windows=[r["pipeline"]["windows"] for r in every]
        if cell.mode == "folder"
        else None,
        pipeline_warmup=every[0]["pipeline"]["warmup"] if cell.mode == "folder" else 0,
        **common,
    )


def folder_system(every: list[dict]) -> dict[str, Any]:
    """Mode folder: rank 0's pipeline record, with the files any rank skipped (each
    counted once) and the images each rank read; nothing in other modes."""
    records = [r["folder"] for r in every if "folder" in r]
    if not records:
        return {}
    skipped = sorted({name for record in records for name in record["skipped_files"]})
    record = {
        **records[0],
        "skipped_files": skipped[:SKIPPED_NAMED],
        "skipped_count": len(skipped),
        "images_read": [record["images_read"] for record in records],
    }
    return {"image_folder": record}


def _overall_span(spans: list[list[float] | None]) -> list[float] | None:
    """From the first rank's start to the last rank's end of the timed windows."""
    known = [s for s in spans if s]
    return [min(s[0] for s in known), max(s[1] for s in known)] if known else None


def diverged(checksums: list[str]) -> str:
    groups: dict[str, list[int]] = {}
    for index, checksum in enumerate(checksums):
        groups.setdefault(checksum, []).append(index)
    ranks = "; ".join(f"ranks {ids} {c[:12]}" for c, ids in groups.items())
    return (
        "ranks ended with different parameters (synchronous data parallelism must keep "
        f"them identical): {ranks}"
    )
