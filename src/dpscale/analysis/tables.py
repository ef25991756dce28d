"""Tidy tables from cell results: cells, windows, fits, scaling, break-even, bucket timelines."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd

from dpscale.analysis import fits
from dpscale.analysis.again import with_second_measurements
from dpscale.analysis.collectives import comm_key
from dpscale.analysis.rows import no_remedy
from dpscale.plan import ring
from dpscale.plan.columns import (
    DEVICES_PER_NODE,
    FIT_GROUP,
    NETWORK,
    NODES,
    PLACEMENT,
    POINT,
    RUN,
    SYSTEM_HOST,
    WORLD_SIZE,
)
from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.remedies import NO_REMEDY
from dpscale.plan.result import STARTUP_PHASES, read_result

SCALING_COLUMNS = [
    *POINT,
    "img_s",
    "img_s_ci95",
    "baseline_img_s",
    "speedup",
    "speedup_ci95",
    "efficiency",
    "efficiency_ci95",
    "scaling",
]
BREAK_EVEN_COLUMNS = [
    *FIT_GROUP,
    "t_c_1",
    "t_c_n",
    "extra_constant_s",
    "break_even_global_batch",
    "break_even_global_batch_ci95",
    "gradient_bytes",
    "effective_bus_bandwidth_GB_s",
]


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
    columns["windows"] = len((measurement or {}).get("window_seconds", []))
    return columns


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
        # drift probes measure like synthetic cells but are no points of the study's laws
        "mode": "drift" if cell.get("drift_probe") else cell["mode"],
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
        "status": result["status"],
        "reason": result["reason"],
        **_quality_columns(result),
        **_summary_columns(result.get("measurement")),
        **_startup_columns(result),
        "trainable_params": info["trainable_params"],
        "train_flops_per_sample": info["train_flops_per_sample"],
        SYSTEM_HOST: system.get(SYSTEM_HOST),
        "cpu_model": system.get("cpu_model"),
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


def with_comm(table: pd.DataFrame) -> pd.DataFrame:
    """A table from before the comm dimension (or built by hand) reads as comm ``none``."""
    return table if "comm" in table.columns else table.assign(comm=NO_REMEDY)


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


def matmul_peak(system: dict[str, Any]) -> dict[str, Any]:
    """The device's measured dense matmul peak (system.matmul_peak), {} when not measured."""
    peak = system.get("matmul_peak") or {}
    return peak if peak.get("tflop_s") else {}


def mfu_columns(system: dict[str, Any], achieved_tflop_s: float, world_size: int) -> dict[str, Any]:
    """Model FLOPs utilisation: achieved training TFLOP/s per device over the device's measured
    matmul peak. ``achieved_tflop_s`` is global (all devices), hence the division by world size;
    NaN without a measured peak."""
    peak = matmul_peak(system)
    tflop_s = float(peak["tflop_s"]) if peak else math.nan
    return {
        "peak_tflop_s": tflop_s,
        "peak_tflop_s_ci95": float(peak.get("ci95", math.nan)) if peak else math.nan,
        "peak_dtype": peak.get("dtype"),
        "mfu": achieved_tflop_s / world_size / tflop_s,
    }


def add_fit_mfu(fit_table: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """MFU at the throughput ceiling: v0 (per device) x training FLOPs per sample over the
    measured peak of the group's cells (their median); NaN without a measured peak."""
    cells = with_comm(cells)
    table = fit_table.copy()
    table["peak_tflop_s"] = math.nan
    table["mfu_ceiling"] = math.nan
    if table.empty or cells.empty or "peak_tflop_s" not in cells.columns:
        return table
    per_group = cells.groupby(FIT_GROUP).agg(
        peak_tflop_s=("peak_tflop_s", "median"), flops=("train_flops_per_sample", "first")
    )
    for index, row in table.iterrows():
        key = tuple(row[k] for k in FIT_GROUP)
        if key not in per_group.index:
            continue
        peak, flops = per_group.loc[key, "peak_tflop_s"], per_group.loc[key, "flops"]
        table.loc[index, "peak_tflop_s"] = peak
        table.loc[index, "mfu_ceiling"] = row["v0"] * flops / 1e12 / peak
    return table


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


# One row per (cell, gradient bucket) of a bucket timeline (result measurement.bucket_timeline):
# the step's parts and the bucket's ready time, medians over the timeline's steps
TIMELINE_CELL = ["cell_id", *RUN, *PLACEMENT, "batch_per_device", "comm"]
TIMELINE_COLUMNS = [
    *TIMELINE_CELL,
    "steps",
    "forward_s",
    "backward_s",
    "optimizer_s",
    "bucket",
    "bucket_bytes",
    "bucket_parameters",
    "ready_s",
    "ready_lo_s",
    "ready_hi_s",
    "last_ready_s",
    "exposed_s",
]


TIMELINE_PARTS = ("forward_s", "backward_s", "optimizer_s")


def _timeline_step_columns(timeline: dict[str, Any]) -> dict[str, Any]:
    """A cell's step parts (medians over steps), its last bucket's ready time, and the
    communication left after it (backward - last ready, at least 0, median over steps)."""
    last = np.asarray(timeline["buckets"][-1]["ready_s"], dtype=float)
    backward = np.asarray(timeline["backward_s"], dtype=float)
    return {
        "steps": timeline["steps"],
        **{part: float(np.median(timeline[part])) for part in TIMELINE_PARTS},
        "last_ready_s": float(np.median(last)),
        "exposed_s": float(np.median(np.maximum(backward - last, 0.0))),
    }


def _timeline_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    timeline = (result.get("measurement") or {}).get("bucket_timeline")
    if result["status"] != "ok" or not timeline:
        return []
    row = cell_row(result)
    base = {k: row[k] for k in TIMELINE_CELL}
    steps = _timeline_step_columns(timeline)
    return [
        {
            **base,
            **steps,
            "bucket": bucket["index"],
            "bucket_bytes": bucket["bytes"],
            "bucket_parameters": bucket["parameters"],
            "ready_s": float(np.median(bucket["ready_s"])),
            "ready_lo_s": float(min(bucket["ready_s"])),
            "ready_hi_s": float(max(bucket["ready_s"])),
        }
        for bucket in timeline["buckets"]
    ]


def bucket_timeline_table(results: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per (cell, gradient bucket) of the ok cells with a bucket timeline (torch-ddp
    synthetic cells): when each bucket is ready in backward, and how much of backward is
    left after the last one (``exposed_s``: communication the backward pass did not hide)."""
    rows = [row for result in results for row in _timeline_rows(result)]
    return pd.DataFrame(rows, columns=TIMELINE_COLUMNS)


def fits_table(windows: pd.DataFrame) -> pd.DataFrame:
    """One throughput-law fit per (strategy, model, mode, layout), over every timed window
    except those of contaminated cells (other work took CPU from them); ``excluded_points``
    counts the windows left out. Drift probes' windows trace the machine, not the law."""
    windows = with_comm(windows)
    rows = []
    if "mode" in windows:
        windows = windows[windows["mode"] != "drift"]
    quality = windows["quality"] if "quality" in windows else pd.Series("", index=windows.index)
    windows = windows.assign(contaminated=quality.eq("contaminated"))
    for key, everything in windows.groupby(FIT_GROUP, sort=True):
        row: dict[str, Any] = dict(zip(FIT_GROUP, key, strict=True))
        group = everything[~everything["contaminated"]]
        row["excluded_points"] = int(everything["contaminated"].sum())
        try:
            fit = fits.fit_throughput_law(group["batch_per_device"], group["step_time_s"])
        except ValueError as error:
            row.update(status="not fitted", reason=str(error))
        else:
            row.update(status="ok", reason=None, **fit.as_dict())
            row["ceiling_img_s"] = fit.v0 * row["world_size"]
        rows.append(row)
    columns = [
        *FIT_GROUP,
        "status",
        "reason",
        "v0",
        "v0_se",
        "t_c",
        "t_c_se",
        "r2",
        "points",
        "batches",
        "b90",
        "b90_se",
        "slope_t_c_cov",
        "ceiling_img_s",
        "excluded_points",
    ]
    return pd.DataFrame(rows).reindex(columns=columns)


REPEATABILITY_COLUMNS = [
    *POINT,
    "repeats",
    "img_s_mean",
    "img_s_sd",
    "img_s_cv",
    "qualities",
]


def repeatability_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Run-to-run variation: per configuration measured ``measure.repeats`` > 1 times (ok
    throughput cells), the mean, sd and coefficient of variation of the repeats' mean img/s."""
    cells = with_comm(cells)
    if cells.empty:
        return pd.DataFrame(columns=REPEATABILITY_COLUMNS)
    ok = cells[(cells["status"] == "ok") & (cells["mode"] == "synthetic")]
    rows = []
    for key, group in ok.groupby(POINT, sort=True):
        if len(group) < 2:
            continue
        rates = group["img_s_mean"].astype(float)
        quality = group["quality"] if "quality" in group else pd.Series(dtype=object)
        rows.append(
            {
                **dict(zip(POINT, key, strict=True)),
                "repeats": len(group),
                "img_s_mean": rates.mean(),
                "img_s_sd": rates.std(ddof=1),
                "img_s_cv": rates.std(ddof=1) / rates.mean(),
                "qualities": ";".join(str(q) for q in quality.fillna("unknown")),
            }
        )
    return pd.DataFrame(rows).reindex(columns=REPEATABILITY_COLUMNS)


def point_means(cells: pd.DataFrame) -> pd.DataFrame:
    """Mean img/s per configuration over repeats (ok throughput cells), with a 95% half-width."""
    cells = with_comm(cells)
    ok = cells[(cells["status"] == "ok") & (cells["mode"] == "synthetic")]
    if ok.empty:
        return pd.DataFrame(columns=[*POINT, "img_s", "img_s_ci95"])
    grouped = ok.groupby(POINT, sort=True)
    means = grouped.agg(
        img_s=("img_s_mean", "mean"),
        img_s_ci95=("img_s_ci95", lambda s: float(np.sqrt((s**2).sum())) / len(s)),
    )
    return means.reset_index()


def scaling_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Weak-scaling speedup and efficiency against the 1-device cell of the same strategy,
    model and mode at the same per-device batch."""
    points = point_means(cells)
    base = points[points["world_size"] == 1].set_index(
        ["strategy", "model", "mode", "batch_per_device"]
    )
    rows = []
    for row in points.itertuples(index=False):
        key = (row.strategy, row.model, row.mode, row.batch_per_device)
        if key not in base.index:
            continue
        ref = base.loc[key]
        speedup = row.img_s / ref["img_s"]
        speedup_ci95 = fits.ratio_ci95(row.img_s, row.img_s_ci95, ref["img_s"], ref["img_s_ci95"])
        rows.append(
            {
                **row._asdict(),
                "baseline_img_s": ref["img_s"],
                "speedup": speedup,
                "speedup_ci95": speedup_ci95,
                "efficiency": speedup / row.world_size,
                "efficiency_ci95": speedup_ci95 / row.world_size,
                "scaling": "weak (per-device batch fixed)",
            }
        )
    return pd.DataFrame(rows).reindex(columns=SCALING_COLUMNS)


def _law(fit: Any) -> fits.LawEstimate:
    """A fits.csv row as the break-even interval reads it (a table written before the
    covariance column counts it as zero)."""
    cov = fit.get("slope_t_c_cov", math.nan)
    return fits.LawEstimate.from_fit(
        fit["v0"], fit["v0_se"], fit["t_c"], fit["t_c_se"], 0.0 if pd.isna(cov) else cov
    )


def break_even_table(fit_table: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Global batch from which N devices beat one (strong scaling), from the fitted laws,
    and the ring all-reduce bandwidth that would explain the extra constant time."""
    ok = fit_table[fit_table["status"] == "ok"]
    params = (
        cells.groupby("model")["trainable_params"].first()
        if not cells.empty
        else pd.Series(dtype=int)
    )
    rows = []
    for (strategy, model, mode), group in ok.groupby(["strategy", "model", "mode"]):
        single = group[group["world_size"] == 1]
        if single.empty:
            continue
        one = single.iloc[0]
        for multi in group[group["world_size"] > 1].itertuples(index=False):
            message = ring.gradient_bytes(int(params.get(model, 0)))
            rows.append(
                {
                    "strategy": strategy,
                    "model": model,
                    "mode": mode,
                    "nodes": multi.nodes,
                    "network": multi.network,
                    "comm": multi.comm,
                    "devices_per_node": multi.devices_per_node,
                    "world_size": multi.world_size,
                    "t_c_1": one["t_c"],
                    "t_c_n": multi.t_c,
                    "extra_constant_s": multi.t_c - one["t_c"],
                    "break_even_global_batch": fits.break_even_global_batch(
                        one["v0"], one["t_c"], multi.v0, multi.t_c, multi.world_size
                    ),
                    "break_even_global_batch_ci95": fits.break_even_ci95(
                        _law(one), _law(multi._asdict()), multi.world_size
                    ),
                    "gradient_bytes": message,
                    "effective_bus_bandwidth_GB_s": ring.effective_bandwidth(
                        message, multi.world_size, multi.t_c - one["t_c"]
                    )
                    / 1e9,
                }
            )
    return pd.DataFrame(rows).reindex(columns=BREAK_EVEN_COLUMNS)


TIMELINE_SUMMARY_COLUMNS = [
    "cell_id",
    NODES,
    NETWORK,
    WORLD_SIZE,
    "batch_per_device",
    "comm",
    "forward_s",
    "backward_s",
    "optimizer_s",
    "buckets_ready",
    "last_ready_s",
    "compute_vs_one",
    "exposed_s",
    "replay_s",
    "hidden_s",
]
# what a cell computes before its last bucket is ready: forward, then backward up to it
COMPUTE_PARTS = ("forward_s", "last_ready_s")


def timeline_summary(timeline: pd.DataFrame, replay: pd.DataFrame) -> pd.DataFrame:
    """One row per cell of bucket_timeline.csv: its step's parts, when each bucket was
    ready, the communication the backward pass left exposed, and, where the collectives
    cell replayed the same traffic on the same link and ranks (gradient_replay.csv), the
    all-reduce time alone and the share of it hidden (replay - exposed)."""
    if timeline.empty:
        return pd.DataFrame(columns=TIMELINE_SUMMARY_COLUMNS)
    rows = [_timeline_cell(cell) for _, cell in timeline.groupby("cell_id", sort=False)]
    frame = pd.DataFrame(rows)
    keys = ["strategy", NODES, DEVICES_PER_NODE, NETWORK, "comm"]
    if not replay.empty and set(keys) <= set(replay.columns):
        alone = replay[replay["quality"].fillna("ok") != "contaminated"]
        alone = alone.groupby(keys, as_index=False)["step_s"].median()
        frame = frame.merge(alone.rename(columns={"step_s": "replay_s"}), on=keys, how="left")
    frame["replay_s"] = frame.get("replay_s", math.nan)
    frame["hidden_s"] = np.where(
        frame["world_size"] > 1, frame["replay_s"] - frame["exposed_s"], math.nan
    )
    frame["compute_vs_one"] = compute_vs_one(timeline)
    return frame.reindex(columns=TIMELINE_SUMMARY_COLUMNS)


def compute_vs_one(timeline: pd.DataFrame) -> list[float]:
    """Per cell (in the order of ``timeline``'s cells), forward + backward up to the last
    bucket against one process's at the same strategy, model and batch (no remedy): above 1
    where ranks on one machine slow each other's compute (or a remedy's hook adds work)."""
    keys = ["strategy", "model", "batch_per_device"]
    cells = timeline.drop_duplicates("cell_id")
    cells = cells.assign(compute=cells[list(COMPUTE_PARTS)].sum(axis=1))
    one = cells[(cells["world_size"] == 1) & no_remedy(cells["comm"])]
    base = one.groupby(keys, as_index=False)["compute"].median().rename(columns={"compute": "one"})
    merged = cells.merge(base, on=keys, how="left")  # keeps the cells' order
    return list(merged["compute"] / merged["one"])


def _timeline_cell(cell: pd.DataFrame) -> dict[str, Any]:
    first = cell.iloc[0]
    ready = "; ".join(
        f"{size / 1e6:.1f} MB at {at * 1e3:.0f} ms"
        for size, at in zip(cell["bucket_bytes"], cell["ready_s"], strict=True)
    )
    return {
        **{k: first[k] for k in TIMELINE_CELL if k != "model"},
        **{k: first[k] for k in ("forward_s", "backward_s", "optimizer_s", "last_ready_s")},
        "buckets_ready": ready,
        "exposed_s": first["exposed_s"] if first["world_size"] > 1 else math.nan,
    }
