"""A runner's result, one writer per mode: synthetic throughput, collectives, training.

Rank 0 writes it (plan.result: schema-checked, atomic) with the system description and
the ranks' parameter checksums; every writer prints one progress line with the headline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpscale.plan.cell import Cell
from dpscale.plan.remedies import wire_bytes
from dpscale.plan.result import make_result, write_result
from dpscale.plan.ring import algorithm_bandwidth, bus_bandwidth
from dpscale.runner.support import progress
from dpscale.runner.sysinfo import describe_system
from dpscale.runner.timing import (
    ci_reached,
    last_timed_span,
    slowest_rank,
    summarise,
    throughput_measurement,
)


def adaptive_record(cell: Cell, windows: Sequence[float]) -> dict[str, Any]:
    """How adaptive measuring ended: the target, the windows run, whether it was reached
    (on the windows as recorded: the slowest rank's, where every rank voted on its own)."""
    m = cell.measure
    return {
        "target_ci": m.target_ci,
        "max_windows": m.max_windows,
        "windows_run": len(windows),
        "target_reached": ci_reached(windows, m.target_ci),
    }


@dataclass(frozen=True)
class RunnerFacts:
    """What every runner's result says about the run, whatever its mode."""

    framework: str
    framework_versions: dict[str, str]
    threads_used: int
    trainable_params: int
    startup: dict[str, Any] | None = None  # launch to the first window (runner.startup)
    forward_flops: int | None = None  # a zoo model's, as its framework counted them


def _write(
    cell: Cell,
    out: Path,
    facts: RunnerFacts,
    status: str,
    started_at: str,
    reason: str | None,
    system_extra: dict[str, Any] | None,
    **section: dict[str, Any],
) -> None:
    """Writes one result: ``section`` is its mode's part (measurement, training or
    collectives)."""
    result = make_result(
        cell,
        status,
        started_at=started_at,
        reason=reason,
        system=describe_system(facts.framework_versions, facts.threads_used, system_extra),
        trainable_params=facts.trainable_params,
        forward_flops=facts.forward_flops,
        framework=facts.framework,
        startup=facts.startup,
        **section,
    )
    write_result(out, result)


# The loader binds a folder cell when, with no model, it delivers less than this many
# times the images/s training reached: training steps then mostly wait for batches.
LOADER_BINDS_BELOW = 1.2


def pipeline_record(
    per_rank_windows: Sequence[Sequence[float]],
    batches_per_window: int,
    batch: int,
    warmup_batches: int,
    training_img_s: float,
) -> dict[str, Any]:
    """Mode folder: what every rank's loader delivers alone (no model), in images/s over the
    ranks together (each window's rates summed: the ranks' loaders run side by side), and
    which binds the cell: ``loader`` or ``device`` (the training step, communication
    included)."""
    rates = [
        sum(batch * batches_per_window / seconds for seconds in window)
        for window in zip(*per_rank_windows, strict=True)
    ]
    summary = summarise(rates).as_dict()
    return {
        "warmup_batches": warmup_batches,
        "batches_per_window": batches_per_window,
        "per_rank_window_seconds": [list(r) for r in per_rank_windows],
        "img_s": rates,
        "summary": {"img_s": summary},
        "bound_by": "loader" if summary["mean"] < LOADER_BINDS_BELOW * training_img_s else "device",
    }


def write_synthetic_result(
    cell: Cell,
    out: Path,
    *,
    started_at: str,
    per_rank_windows: Sequence[Sequence[float]],
    framework: str,
    framework_versions: dict[str, str],
    threads_used: int,
    trainable_params: int,
    forward_flops: int | None = None,
    system_extra: dict[str, Any] | None = None,
    rank_param_checksums: Sequence[str] | None = None,
    status: str = "ok",
    reason: str | None = None,
    timed_span: Sequence[float] | None = None,
    startup: dict[str, Any] | None = None,
    timeline: dict[str, Any] | None = None,
    pipeline_windows: Sequence[Sequence[float]] | None = None,
    pipeline_warmup: int = 0,
) -> None:
    """``timed_span`` defaults to this process's latest ``time_windows`` span (rank 0's);
    ``timeline``: rank 0's bucket timeline (runner.rank.Rank.bucket_timeline), if any;
    ``pipeline_windows``: mode folder, each rank's loader windows with no model, after
    ``pipeline_warmup`` batches."""
    windows = slowest_rank(per_rank_windows)
    measurement = throughput_measurement(
        windows, cell.measure.steps_per_window, cell.batch_per_device, cell.world_size
    )
    measurement["per_rank_window_seconds"] = [list(r) for r in per_rank_windows]
    measurement["warmup_steps"] = cell.measure.warmup_steps
    span = list(timed_span) if timed_span is not None else last_timed_span()
    if span is not None:
        measurement["timed_span"] = span
    if cell.measure.target_ci is not None:
        measurement["adaptive"] = adaptive_record(cell, windows)
    if rank_param_checksums is not None:
        measurement["rank_param_checksums"] = list(rank_param_checksums)
    if timeline is not None:
        measurement["bucket_timeline"] = timeline
    if pipeline_windows is not None:
        measurement["pipeline"] = pipeline_record(
            pipeline_windows,
            cell.measure.steps_per_window,
            cell.global_batch // len(pipeline_windows),  # each process's loader batch
            pipeline_warmup,
            measurement["summary"]["img_s"]["mean"],
        )
    facts = RunnerFacts(
        framework, framework_versions, threads_used, trainable_params, startup, forward_flops
    )
    _write(cell, out, facts, status, started_at, reason, system_extra, measurement=measurement)
    summary = measurement["summary"]["img_s"]
    progress(f"{cell.cell_id}: {summary['mean']:.1f} +/- {summary['ci95']:.1f} img/s (95% CI)")
    if "pipeline" in measurement:
        alone = measurement["pipeline"]
        progress(
            f"{cell.cell_id}: the loader alone {alone['summary']['img_s']['mean']:.1f} img/s; "
            f"bound by the {alone['bound_by']}"
        )


def collectives_record(
    cell: Cell,
    per_rank: Sequence[dict[str, Sequence[float]]],
    description: dict[str, str],
    timed_span: Sequence[float] | None,
) -> dict[str, Any]:
    """Per message size: each rank's windows, the window times (slowest rank), the per-call
    times and their summary, and the bandwidths at the median per-call time."""
    assert cell.collectives is not None
    calls = cell.measure.steps_per_window
    sizes = []
    for nbytes in cell.collectives.message_sizes():
        per_rank_windows = [list(rank[str(nbytes)]) for rank in per_rank]
        windows = slowest_rank(per_rank_windows)
        per_call = [seconds / calls for seconds in windows]
        summary = summarise(per_call)
        algbw = algorithm_bandwidth(nbytes, summary.median)
        on_wire = wire_bytes(cell.comm, nbytes)
        wire_algbw = algorithm_bandwidth(on_wire, summary.median)
        sizes.append(
            {
                "message_bytes": nbytes,
                "window_seconds": windows,
                "per_rank_window_seconds": per_rank_windows,
                "call_seconds": per_call,
                "summary": summary.as_dict(),
                "algbw_GB_s": algbw / 1e9,
                "busbw_GB_s": bus_bandwidth(algbw, cell.world_size) / 1e9,
                # what the remedy sent (plan.remedies.wire_bytes): the link's own bus bandwidth
                "wire_bytes": on_wire,
                "wire_busbw_GB_s": bus_bandwidth(wire_algbw, cell.world_size) / 1e9,
            }
        )
    record: dict[str, Any] = {
        **description,
        "dtype": "float32",
        "warmup_steps": cell.measure.warmup_steps,
        "calls_per_window": calls,
        "sizes": sizes,
    }
    if timed_span is not None:
        record["timed_span"] = list(timed_span)
    return record


def replay_record(cell: Cell, replays: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One training step's gradient traffic replayed (runner.rank.Rank.gradient_traffic):
    what it sends, each rank's windows, the step times (slowest rank) and their summary."""
    if not replays or replays[0] is None:
        return None
    per_rank = [list(replay["windows"]) for replay in replays if replay]
    steps = _per_step(cell, per_rank)
    sends = {k: v for k, v in replays[0].items() if k not in ("windows", "work_windows")}
    record = {
        **sends,
        "per_rank_window_seconds": per_rank,
        "step_seconds": steps,
        "summary": summarise(steps).as_dict(),
    }
    work = [
        list(replay["work_windows"]) for replay in replays if replay and "work_windows" in replay
    ]
    if work and len(work) == len(per_rank):  # the remedy's own work (Rank.remedy_work)
        record["work_step_seconds"] = _per_step(cell, work)
        record["work_summary"] = summarise(record["work_step_seconds"]).as_dict()
    return record


def _per_step(cell: Cell, per_rank: Sequence[Sequence[float]]) -> list[float]:
    """A synchronous job's seconds per step, window by window: the slowest rank's."""
    return [seconds / cell.measure.steps_per_window for seconds in slowest_rank(per_rank)]


def write_collectives_result(
    cell: Cell,
    out: Path,
    *,
    started_at: str,
    per_rank: Sequence[dict[str, Sequence[float]]],
    description: dict[str, str],
    framework: str,
    replays: Sequence[dict[str, Any] | None] = (),
    framework_versions: dict[str, str],
    threads_used: int,
    trainable_params: int,
    forward_flops: int | None = None,
    timed_span: Sequence[float] | None = None,
    system_extra: dict[str, Any] | None = None,
    rank_param_checksums: Sequence[str] | None = None,
    status: str = "ok",
    reason: str | None = None,
    startup: dict[str, Any] | None = None,
) -> None:
    """A collectives cell's result: ``collectives`` holds the per-size windows, and the
    ranks' parameter checksums after the initial broadcast (no optimiser step ran)."""
    record = collectives_record(cell, per_rank, description, timed_span)
    replay = replay_record(cell, replays)
    if replay is not None:
        record["gradient_replay"] = replay
    if rank_param_checksums is not None:
        record["rank_param_checksums"] = list(rank_param_checksums)
    facts = RunnerFacts(
        framework, framework_versions, threads_used, trainable_params, startup, forward_flops
    )
    _write(cell, out, facts, status, started_at, reason, system_extra, collectives=record)
    largest = record["sizes"][-1]
    progress(
        f"{cell.cell_id}: {largest['message_bytes']} bytes in "
        f"{largest['summary']['median'] * 1e3:.3f} ms, busbw {largest['busbw_GB_s']:.3f} GB/s"
    )


def write_training_result(
    cell: Cell,
    out: Path,
    *,
    started_at: str,
    training: dict[str, Any],
    framework: str,
    framework_versions: dict[str, str],
    threads_used: int,
    trainable_params: int,
    forward_flops: int | None = None,
    rank_param_checksums: Sequence[str],
    system_extra: dict[str, Any] | None = None,
    status: str = "ok",
    reason: str | None = None,
    startup: dict[str, Any] | None = None,
) -> None:
    training = {**training, "rank_param_checksums": list(rank_param_checksums)}
    facts = RunnerFacts(
        framework, framework_versions, threads_used, trainable_params, startup, forward_flops
    )
    _write(cell, out, facts, status, started_at, reason, system_extra, training=training)
    progress(
        f"{cell.cell_id}: final val accuracy {training['final_val_accuracy']:.3f}, "
        f"{training['train_images_per_s']:.1f} train img/s"
    )
