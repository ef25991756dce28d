"""Tidy tables from cell results: loading them, one row per cell, per timed window, per system."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd

from dpscale.analysis.results.again import with_second_measurements
from dpscale.analysis.results.collectives import comm_key
from dpscale.analysis.results.mfu import mfu_columns
from dpscale.analysis.results import step_spread
from dpscale.plan import controls
from dpscale.plan.columns import POINT, SYSTEM_HOST
from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.result import STARTUP_PHASES, read_result


def load_results(
    paths: Iterable[str | Path], again: Iterable[str | Path] = ()
) -> list[dict[str, Any]]:
    """The readable results, each cell measured again (``again``: its second results) as the
    better of its two; each unreadable file (truncated by an old crash, edited by hand, or
    not a result) is left out with one line on stderr naming it and the cure."""
    return with_second_measurements(_readable(paths), _readable(again))


def _readable(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    results = []
    for path in paths:
        try:
            results.append(read_result(path))
        except (OSError, ValueError, jsonschema.ValidationError) as error:
            detail = error.message if isinstance(error, jsonschema.ValidationError) else error
            print(
                f"[dpscale] left out {path}: not a readable result ({str(detail)[:200]}); "
                f"measure it again: snakemake --forcerun {path}",
                file=sys.stderr,
            )
    return results


def _summary_columns(measurement: dict[str, Any] | None) -> dict[str, float]:
    columns: dict[str, float] = {}
    names = {"img_s": "img_s", "img_s_per_device": "img_s_per_device", "step_time_s": "step_time_s"}
    for key, prefix in names.items():
        summary = (measurement or {}).get("summary", {}).get(key, {})
        for stat in ("mean", "ci95", "median", "p10", "p90", "cv"):
            columns[f"{prefix}_{stat}"] = summary.get(stat, math.nan)
    windows = (measurement or {}).get("window_seconds", [])
    columns["windows"] = len(windows)
    steps = (measurement or {}).get("steps_per_window", math.nan)
    columns["steps_per_window"] = steps
    # one step's relative spread (the calibrated law's stragglers), from one-step windows only
    spread = step_spread.step_spread(windows, steps)
    columns.update(zip(step_spread.COLUMNS, spread, strict=True))
    columns.update(fastest_rank(measurement or {}))
    return columns


def fastest_rank(measurement: dict[str, Any]) -> dict[str, float]:
    """The step of the rank whose windows are fastest on average, with its 95% half-width:
    a control cell's ranks do not wait for each other, so the fastest rank's step is the
    compute with what ranks sharing a machine cost each other (plan.controls); the cell's
    own step is its slowest rank's. One rank: the cell's step."""
    per_rank = measurement.get("per_rank_window_seconds") or []
    steps = measurement.get("steps_per_window")
    if not per_rank or not steps or any(len(windows) < 2 for windows in per_rank):
        return {"fastest_rank_step_s_mean": math.nan, "fastest_rank_step_s_ci95": math.nan}
    means = [sum(windows) / len(windows) / steps for windows in per_rank]
    fastest = per_rank[means.index(min(means))]
    mean, half = mean_ci95([seconds / steps for seconds in fastest])
    return {"fastest_rank_step_s_mean": mean, "fastest_rank_step_s_ci95": half}


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the half-width of its Student-t 95% interval (NaN for one value)."""
    from scipy import stats  # only where a table needs it: each job's imports cost CPU

    sample = np.asarray(values, dtype=float)
    if sample.size < 2:
        return float(sample.mean()), math.nan
    spread = sample.std(ddof=1) / math.sqrt(sample.size)
    return float(sample.mean()), float(stats.t.ppf(0.975, sample.size - 1) * spread)


def _pipeline_columns(result: dict[str, Any]) -> dict[str, Any]:
    """Mode folder: the loader alone (measurement.pipeline: its img/s and which binds) and the
    input pipeline that read the folder (system.image_folder); NaN and empty elsewhere."""
    pipeline = (result.get("measurement") or {}).get("pipeline") or {}
    folder = (result.get("system") or {}).get("image_folder") or {}
    summary = pipeline.get("summary", {}).get("img_s", {})
    return {
        "pipeline_img_s_mean": summary.get("mean", math.nan),
        "pipeline_img_s_ci95": summary.get("ci95", math.nan),
        "bound_by": pipeline.get("bound_by", ""),
        "input_pipeline": folder.get("pipeline", ""),
        "images_skipped": folder.get("skipped_count", math.nan),
    }


def _startup_columns(result: dict[str, Any]) -> dict[str, Any]:
    """Launch to the first timed window (runner.startup): the total, each phase, and a
    SLURM job's queue wait; NaN for a cell that did not run."""
    startup = result.get("startup") or {}
    phases = startup.get("phases_s") or {}
    wait = startup.get("queue_wait_s")
    return {
        "startup_s": startup.get("to_first_window_s", math.nan),
        **{f"startup_{phase}_s": phases.get(phase, math.nan) for phase in STARTUP_PHASES},
        "queue_wait_s": math.nan if wait is None else wait,
    }


def _quality_columns(result: dict[str, Any]) -> dict[str, Any]:
    """The launcher's verdict on the machine's quiet (dpscale.launch.contention), and the
    launcher's own wall time."""
    contention = result["system"].get("contention") or {}
    launcher = result["system"].get("launcher") or {}
    again = result.get("measured_again") or {}
    return {
        "launcher_wall_s": launcher.get("wall_s", math.nan),
        "quality": result.get("quality"),
        "quality_reason": result.get("quality_reason"),
        "measured_again": bool(again),
        "first_quality": again.get("first_quality"),
        "kept": again.get("kept"),
        **{
            key: contention.get(key, math.nan)
            for key in (
                "foreign_cpu_cores_mean",
                "foreign_cpu_cores_max",
                "cell_cpu_cores_mean",
                "oversubscribed",
                "time_shared",
                "disturbed",
                "interrupt_cpu_cores_mean",
                "steal_fraction",
                "loadavg_1m",
            )
        },
    }


def cell_row(result: dict[str, Any]) -> dict[str, Any]:
    cell = result["cell"]
    model = cell["model"]
    system = result["system"]
    info = result["model_info"]
    row = {
        "cell_id": cell["cell_id"],
        "study": cell["study"],
        "strategy": cell["strategy"],
        "framework": result.get("framework"),
        "model": model["key"],
        "model_name": model["name"],
        "stem": model["stem"],
        "image_size": model["image_size"],
        "classes": model["classes"],
        # drift probes and control cells measure like synthetic cells but are no points of
        # the study's laws: modes of their own (drift, control-local, control-barrier)
        "mode": table_mode(cell),
        "nodes": cell["nodes"],
        "network": (cell.get("network") or {}).get("name", HOST_NETWORK),
        "comm": comm_key(cell),
        **_comm_columns(system),
        "devices_per_node": cell["devices_per_node"],
        "world_size": cell["world_size"],
        "batch_per_device": cell["batch_per_device"],
        "global_batch": cell["global_batch"],
        "repeat": cell["repeat"],
        "accelerator": cell["accelerator"],
        "precision": cell["precision"],
        "memory_format": cell["memory_format"],
        "threads_per_device": cell["threads_per_device"],
        # where its ranks ran: emulated nodes all share the launching machine's cores
        "emulated": (cell.get("network") or {}).get("rate") is not None,
        "cpus_usable": system.get("cpus_usable", math.nan),
        "status": result["status"],
        "reason": result["reason"],
        **_quality_columns(result),
        **_summary_columns(result.get("measurement")),
        **_startup_columns(result),
        **_pipeline_columns(result),
        # a zoo model's counts are null where no framework built it (plan.result.model_info)
        "trainable_params": _known(info["trainable_params"]),
        "train_flops_per_sample": _known(info["train_flops_per_sample"]),
        SYSTEM_HOST: system.get(SYSTEM_HOST),
        "cpu_model": system.get("cpu_model"),
        # absent from results written before it was recorded: unknown, not "none"
        "cpu_vector_extensions": _joined(system.get("cpu_vector_extensions")),
        "cpu_kernels": kernels_words(system.get("cpu_kernels")),
        "cpu_onednn": (system.get("cpu_kernels") or {}).get("onednn"),
        "gpus": ";".join(g.get("name", "") for g in system.get("gpus", [])),
        # what a SLURM job got (system.allocation, written by dpscale.launch)
        "slurm_job_id": (system.get("scheduler") or {}).get("SLURM_JOB_ID"),
        "slurm_nodes": ";".join((system.get("allocation") or {}).get("nodes", [])),
        "gpus_per_node_seen": ";".join(
            str(n) for n in (system.get("allocation") or {}).get("gpus_per_node_seen", [])
        ),
        "gpu_names_seen": ";".join(system.get("gpu_names_seen", [])),
        "framework_versions": json.dumps(system.get("framework_versions", {}), sort_keys=True),
        **_interpreter_columns(system),
        "env_file_sha256": system.get("env_file_sha256"),
        "env_freeze_sha256": system.get("env_freeze_sha256"),
        "dpscale_commit": system.get("dpscale_commit"),
        "started_at": result["started_at"],
    }
    row["achieved_tflop_s"] = row["img_s_mean"] * row["train_flops_per_sample"] / 1e12
    row.update(mfu_columns(system, row["achieved_tflop_s"], row["world_size"]))
    return row


def table_mode(cell: dict[str, Any]) -> str:
    """A result's cell's mode as the tables name it: ``drift`` for a drift probe,
    ``control-<control>`` for a control cell, else its mode."""
    if cell.get("drift_probe"):
        return "drift"
    control = cell.get("control", controls.FULL)
    return controls.mode_key(control) if control != controls.FULL else cell["mode"]


def kernels_words(kernels: dict[str, Any] | None) -> str | None:
    """A result's ``system.cpu_kernels`` in words, e.g. "oneDNN 3.12.0, AVX512 (torch's
    default)" or "Eigen (TensorFlow's default on this CPU)"; None where not recorded."""
    if not kernels:
        return None
    parts = [kernels.get("library", "?")]
    if kernels.get("version"):
        parts[0] += f" {kernels['version']}"
    parts += [kernels[key] for key in ("isa", "blas") if kernels.get(key)]
    words = ", ".join(str(part) for part in parts)
    return f"{words} ({kernels['why']})" if kernels.get("why") else words


def _joined(names: list[str] | None) -> str | None:
    """A list a result records as one space-separated cell; None where it was not recorded."""
    return None if names is None else " ".join(names)


def _known(count: int | None) -> float:
    """A count of model_info as a number of the table, NaN where it is null."""
    return float("nan") if count is None else count


def _comm_columns(system: dict[str, Any]) -> dict[str, Any]:
    """What the runner applied of the cell's remedy (system.comm)."""
    applied = system.get("comm") or {}
    return {"comm_hook": applied.get("hook"), "wire_ratio": applied.get("wire_ratio", math.nan)}


# The columns of the report's page of every cell (cells.csv has them all)
CELL_COLUMNS = [
    "strategy",
    "model",
    "cell_id",
    "comm",
    "status",
    "reason",
    "quality",
    "foreign_cpu_cores_mean",
    "first_quality",
    "kept",
    "world_size",
    "batch_per_device",
    "global_batch",
    "img_s_mean",
    "img_s_ci95",
    "img_s_median",
    "img_s_p10",
    "img_s_p90",
    "img_s_cv",
    "img_s_per_device_mean",
    "step_time_s_mean",
    "achieved_tflop_s",
    "peak_tflop_s",
    "mfu",
    SYSTEM_HOST,
]


def cell_columns(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells as the report's page shows them."""
    return cells.reindex(columns=CELL_COLUMNS)


def _interpreter_columns(system: dict[str, Any]) -> dict[str, Any]:
    """What ran the cell (system.interpreter): the interpreter command dpscale was given,
    built or configured, and the container the rank processes ran in."""
    ran = system.get("interpreter") or {}
    launched = ran.get("launched_as") or {}
    container = ran.get("container") or {}
    return {
        "interpreter": " ".join(launched.get("command", [])) or system.get("python_executable"),
        "interpreter_source": launched.get("source"),
        "container_runtime": container.get("runtime"),
        "container_image": container.get("image"),
        "container_digest": container.get("digest"),
    }


SYSTEM_COLUMNS = [
    "strategy",
    SYSTEM_HOST,
    "cpu_model",
    "cpu_vector_extensions",
    "cpu_kernels",
    "gpus",
    "interpreter",
    "interpreter_source",
    "container_runtime",
    "container_image",
    "container_digest",
    "framework_versions",
    "env_file_sha256",
    "env_freeze_sha256",
    "dpscale_commit",
]


def systems_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per system the cells ran on (host, interpreter, container, framework
    versions), with how many measured cells ran there."""
    measured = cells[cells["status"] != "skipped"].reindex(columns=SYSTEM_COLUMNS)
    if measured.empty:
        return pd.DataFrame(columns=[*SYSTEM_COLUMNS, "cells"])
    for column in ("env_file_sha256", "env_freeze_sha256", "dpscale_commit"):  # as git shows
        measured[column] = (
            measured[column]
            .astype("string")
            .str.replace(r"^([0-9a-f]{12})[0-9a-f]+", r"\1", regex=True)
        )
    grouped = measured.astype("string").fillna("").groupby(SYSTEM_COLUMNS, sort=True).size()
    return grouped.rename("cells").reset_index()


def cells_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame([cell_row(r) for r in results])
    if table.empty:
        return table
    return table.sort_values(POINT + ["repeat"]).reset_index(drop=True)


def windows_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for result in results:
        measurement = result.get("measurement")
        if result["status"] != "ok" or not measurement:
            continue
        keep = POINT + ["cell_id", "repeat", "quality"]
        base = {k: v for k, v in cell_row(result).items() if k in keep}
        steps = measurement["steps_per_window"]
        for index, (seconds, rate) in enumerate(
            zip(measurement["window_seconds"], measurement["img_s"], strict=True)
        ):
            rows.append(
                {
                    **base,
                    "window": index,
                    "window_seconds": seconds,
                    "step_time_s": seconds / steps,
                    "img_s": rate,
                }
            )
    columns = [
        "cell_id",
        *POINT,
        "repeat",
        "quality",
        "window",
        "window_seconds",
        "step_time_s",
        "img_s",
    ]
    return pd.DataFrame(rows, columns=columns)
