"""The loop every strategy's ranks run, framework-free: measure, gather, check, write.

A strategy's adapter sets its framework up (init, pin the device, build, wrap, broadcast)
and hands :func:`run_cell` a :class:`Rank`: the handful of framework calls the loop needs.
The loop then does the same thing for every strategy:

1. collectives mode: time the strategy's all-reduce at each message size by the same
   protocol (runner.timing), buffers created before each size's warm-up;
   synthetic mode: time the training step by the core protocol (runner.timing: warm-up,
   synchronised windows; the first step under a deadline, runner.faults), then the device's
   dense matrix-multiply peak with the same protocol (for model FLOPs utilisation);
   training mode: runner.training.run_training;
2. gather every rank's windows, parameter checksum and device names on rank 0 (a window
   lasts as long as its slowest rank);
3. on rank 0: check that every rank ended with the same parameters (synchronous data
   parallelism must leave them bit-identical; a cell whose ranks diverged is ``failed``),
   and write the cell's result;
4. let the adapter finish (a barrier, so no rank exits before the result is written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from dpscale.plan.cell import Cell
from dpscale.plan.result import now_iso
from dpscale.runner.faults import arrivals_folder, first_collective_deadline
from dpscale.runner.records import (
    write_collectives_result,
    write_synthetic_result,
    write_training_result,
)
from dpscale.runner.support import progress
from dpscale.runner.timing import Progress, Step, Sync, last_timed_span, summarise, time_windows
from dpscale.runner.training import TrainingBackend, run_training

# The matrix-multiply peak: n x n x n products of the cell's compute type, timed like the
# model (warm-up, then synchronised windows). n is large enough to reach the dense peak of
# a CPU core or a GPU, small enough to take well under a second on one CPU core.
MATMUL_N = {"cpu": 1024, "cuda": 8192}
MATMUL_WARMUP, MATMUL_WINDOWS, MATMUL_PER_WINDOW = 2, 5, 2
MATMUL_DTYPES = {"fp32": "float32", "amp_bf16": "bfloat16", "amp_fp16": "float16"}


class Rank(Protocol):
    """One rank of a strategy, as the core's loop drives it; the adapter implements it."""

    framework: str
    rank: int  # 0 .. size-1; rank 0 writes the result
    size: int  # processes of the cell (1 for strategies that drive every device from one)
    batch: int  # samples this process feeds per step (per-device batch x its devices)
    trainable_params: int
    threads_used: int

    def synthetic_step(self) -> tuple[Step, Sync]:
        """One optimiser step on random data created once on the device, and a function
        that waits until the device has finished all queued work."""

    def training_backend(self) -> TrainingBackend: ...

    def matmul(self, n: int, dtype: str) -> tuple[Step, Sync]:
        """One dense n x n x n product on this rank's device (operands created once)."""

    def allreduce(self, nbytes: int) -> tuple[Step, Sync]:
        """One sum all-reduce of ``nbytes`` bytes of float32 over every rank, through the
        strategy's own communication path (buffers created once, here, outside any timing);
        collectives mode only, multi-process strategies only."""

    def allreduce_description(self) -> dict[str, str]:
        """What :meth:`allreduce` calls: ``op`` and ``backend`` (e.g. gloo, nccl, ps-lite)."""

    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` in rank order (needed on rank 0 only)."""

    def param_checksums(self) -> list[str]:
        """sha256 of the trainable parameters of each model replica this process holds."""

    def device_names(self) -> list[str]:
        """The accelerator names this rank's framework reports (empty on CPU)."""

    def versions(self) -> dict[str, str]: ...

    def system_extra(self) -> dict[str, Any]:
        """What else the result's system description should say about this strategy."""

    def finish(self) -> None:
        """After rank 0 has written the result: the last collective, teardown."""


def guard_first_collective(
    step: Step, sync: Sync, rank: Rank, cell: Cell, out: Path
) -> tuple[Step, Sync]:
    """The first call under the cell's collective deadline (runner.faults): a rank that never
    arrives fails the cell instead of hanging it."""
    m = cell.measure
    return first_collective_deadline(
        step,
        sync,
        rank.rank,
        rank.size,
        m.collective_timeout_s,
        arrivals_folder(out),
        hang_s=m.timeout_s,
    )


def run_cell(cell: Cell, out: Path, rank: Rank) -> None:
    started_at = now_iso()

    def log(message: str) -> None:
        progress(message, rank.rank)

    log(f"{cell.cell_id}: rank {rank.rank}/{rank.size}, {rank.batch} samples per step")
    mine: dict[str, Any] = {}
    if cell.mode == "train":
        backend = rank.training_backend()
        mine["training"] = run_training(cell, backend, rank.rank, rank.size, rank.batch, log)
    elif cell.mode == "collectives":
        mine["collectives"] = time_allreduce(cell, out, rank, log)
    else:
        step, sync = rank.synthetic_step()
        m = cell.measure
        if rank.size > 1:
            step, sync = guard_first_collective(step, sync, rank, cell, out)
        mine["windows"] = time_windows(
            step,
            sync,
            m.warmup_steps,
            m.windows,
            m.steps_per_window,
            log,
            **m.adaptive_kwargs(processes=rank.size),  # several ranks would have to agree
        )
        mine["span"] = last_timed_span()  # what the launcher's contention verdict covers
        mine["matmul"] = matmul_peak(cell, rank)
    mine["checksums"] = rank.param_checksums()
    mine["devices"] = rank.device_names()
    every = rank.gather(mine)
    if rank.rank == 0:
        _write(cell, out, started_at, rank, every)
    rank.finish()


def time_allreduce(cell: Cell, out: Path, rank: Rank, log: Progress) -> dict[str, Any]:
    """This rank's windows per message size, timed by the synthetic cells' protocol; the
    first all-reduce is under the same first-collective deadline as a first step."""
    assert cell.collectives is not None
    m = cell.measure
    windows: dict[str, list[float]] = {}
    span_start: float | None = None
    for index, nbytes in enumerate(cell.collectives.message_sizes()):
        step, sync = rank.allreduce(nbytes)
        if index == 0:
            step, sync = guard_first_collective(step, sync, rank, cell, out)
        log(f"all-reduce of {nbytes} bytes")
        windows[str(nbytes)] = time_windows(
            step, sync, m.warmup_steps, m.windows, m.steps_per_window
        )
        span = last_timed_span()
        if span_start is None and span:
            span_start = span[0]
    span = last_timed_span()
    return {"windows": windows, "span": [span_start, span[1]] if span and span_start else None}


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
    system_extra = {
        **rank.system_extra(),
        "gpu_names_seen": [name for r in every for name in r["devices"]],
    }
    common: dict[str, Any] = {
        "started_at": started_at,
        "framework": rank.framework,
        "framework_versions": rank.versions(),
        "threads_used": rank.threads_used,
        "trainable_params": rank.trainable_params,
        "rank_param_checksums": checksums,
        "status": "ok" if len(set(checksums)) == 1 else "failed",
        "reason": None if len(set(checksums)) == 1 else diverged(checksums),
    }
    if cell.mode == "train":
        write_training_result(cell, out, training=every[0]["training"], **common)
        return
    if cell.mode == "collectives":
        write_collectives_result(
            cell,
            out,
            per_rank=[r["collectives"]["windows"] for r in every],
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
        **common,
    )


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
