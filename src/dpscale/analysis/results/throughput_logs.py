"""Throughput logs users already have: Horovod's synthetic benchmark (``Total img/sec on N
GPU(s)``) and tf_cnn_benchmarks (``total images/sec``), each run read into a record with the
interval the log prints and what it means."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from dpscale.analysis.results.log_text import LogError


@dataclass(frozen=True)
class ThroughputRun:
    """One benchmark run of a throughput log: global img/s and the +- the log prints
    (NaN where it prints none), what that +- is, the timed iterations (Horovod's 'Iter #'
    lines, tf_cnn_benchmarks' 'Num batches') and the line the run starts at."""

    model: str
    batch_per_device: int
    world_size: int
    img_s: float
    img_s_pm: float
    img_s_per_device: float
    img_s_per_device_pm: float
    interval: str
    iterations: int
    mode: str
    line: int


# the numbers Horovod's and tf_cnn_benchmarks' scripts print (%d, %.1f): ASCII digits, bounded
INT = "[0-9]{1,9}"
REAL = r"[0-9]{1,15}(?:\.[0-9]{0,15})?"
MODEL = re.compile(r"^Model:\s+(\S+)\s*$")
HVD_BATCH = re.compile(rf"^Batch size:\s+({INT})\s*$")
HVD_DEVICES = re.compile(rf"^Number of ([A-Z]+)s:\s+({INT})\s*$")
HVD_ITER = re.compile(rf"^Iter #\d+:\s+({REAL}) img/sec per ")
HVD_PER_DEVICE = re.compile(rf"^Img/sec per [A-Z]+:\s+({REAL})\s+\+-({REAL})\s*$")
HVD_TOTAL = re.compile(rf"^Total img/sec on ({INT}) [A-Z]+\(s\):\s+({REAL})\s+\+-({REAL})\s*$")
TF_BATCH = re.compile(rf"^Batch size:\s+({INT}) global\s*$")
TF_PER_DEVICE = re.compile(rf"^\s+({INT}) per device\s*$")
TF_MODE = re.compile(r"^Mode:\s+(\S+)")
TF_BATCHES = re.compile(rf"^Num batches:\s+({INT})\b")
TF_TOTAL = re.compile(rf"^total images/sec:\s+({REAL})\s*$")
HVD_INTERVAL = "+-: 1.96 x the standard deviation of the iterations' img/s (as printed)"
TF_INTERVAL = "none: tf_cnn_benchmarks prints no interval for the total"


def _other_kind(lines: list[str], kind: str) -> None:
    """A log of the other throughput benchmark names the kind it is."""
    marks = {"horovod-synthetic": HVD_TOTAL, "tf-cnn-benchmarks": TF_TOTAL}
    for other, mark in marks.items():
        if other != kind and any(mark.match(line) for line in lines):
            raise LogError(f"is a {other} log, not {kind}; allowed: kind {other} for it")


def _run_start(lines: list[str], kind: str) -> list[int]:
    starts = [i for i, line in enumerate(lines) if MODEL.match(line)]
    if not starts:
        _other_kind(lines, kind)
        raise LogError(f"has no {kind} run (no 'Model:' line); allowed: the benchmark's output")
    return starts


def _truncated(start: int, what: str) -> LogError:
    return LogError(
        f"is truncated: the run from line {start + 1} has no '{what}' line (the benchmark "
        "stopped or the file was cut)"
    )


def _positive(start: int, **values: float) -> None:
    """Numbers of a run that mean nothing at 0 (a batch, an img/s) are above 0."""
    for name, value in values.items():
        if not value > 0:
            raise LogError(f"has {name} {value} in the run from line {start + 1}; allowed: above 0")


def _horovod_run(lines: list[str], start: int, end: int) -> ThroughputRun:
    values: dict[str, Any] = {"iterations": 0}
    for line in lines[start:end]:
        if m := HVD_BATCH.match(line):
            values["batch"] = int(m.group(1))
        elif m := HVD_DEVICES.match(line):
            values["devices"] = int(m.group(2))
        elif HVD_ITER.match(line):
            values["iterations"] += 1
        elif m := HVD_PER_DEVICE.match(line):
            values["per_device"] = (float(m.group(1)), float(m.group(2)))
        elif m := HVD_TOTAL.match(line):
            values["total"] = (int(m.group(1)), float(m.group(2)), float(m.group(3)))
    if "total" not in values:
        raise _truncated(start, "Total img/sec on N GPU(s)")
    for key, what in (("batch", "Batch size:"), ("per_device", "Img/sec per GPU:")):
        if key not in values:
            raise LogError(f"has no '{what}' line in the run from line {start + 1}")
    world, img_s, pm = values["total"]
    _positive(start, batch=values["batch"], img_s=img_s, img_s_per_device=values["per_device"][0])
    return ThroughputRun(
        model=MODEL.match(lines[start]).group(1),
        batch_per_device=values["batch"],
        world_size=world,
        img_s=img_s,
        img_s_pm=pm,
        img_s_per_device=values["per_device"][0],
        img_s_per_device_pm=values["per_device"][1],
        interval=HVD_INTERVAL,
        iterations=values["iterations"],
        mode="training",
        line=start + 1,
    )


def _tf_cnn_run(lines: list[str], start: int, end: int) -> ThroughputRun:
    values: dict[str, Any] = {}
    for index in range(start, end):
        line = lines[index]
        if m := TF_BATCH.match(line):
            values["global"] = int(m.group(1))
            following = TF_PER_DEVICE.match(lines[index + 1]) if index + 1 < end else None
            values["per_device"] = int(following.group(1)) if following else None
        elif m := TF_MODE.match(line):
            values["mode"] = m.group(1)
        elif m := TF_BATCHES.match(line):
            values["batches"] = int(m.group(1))
        elif m := TF_TOTAL.match(line):
            values["total"] = float(m.group(1))
    if "total" not in values:
        raise _truncated(start, "total images/sec:")
    if not values.get("per_device"):
        raise LogError(
            f"has no 'Batch size: N global' and 'M per device' lines in the run from line "
            f"{start + 1}"
        )
    if values["global"] % values["per_device"] or values["global"] < values["per_device"]:
        raise LogError(
            f"has 'Batch size: {values['global']} global' and '{values['per_device']} per "
            f"device' in the run from line {start + 1}; allowed: a global batch that is a "
            "whole number of devices' batches"
        )
    world, img_s = values["global"] // values["per_device"], values["total"]
    _positive(start, img_s=img_s)
    return ThroughputRun(
        model=MODEL.match(lines[start]).group(1),
        batch_per_device=values["per_device"],
        world_size=world,
        img_s=img_s,
        img_s_pm=math.nan,
        img_s_per_device=img_s / world,
        img_s_per_device_pm=math.nan,
        interval=TF_INTERVAL,
        iterations=values.get("batches", 0),
        mode=values.get("mode", "training"),
        line=start + 1,
    )


def parse_throughput(lines: list[str], kind: str, ranks: int) -> list[ThroughputRun]:
    """Every run of a Horovod synthetic or tf_cnn_benchmarks log (a run starts at its
    'Model:' line); a LogError if one is cut short or ran on another number of devices."""
    _other_kind(lines, kind)
    starts = _run_start(lines, kind)
    parse = _horovod_run if kind == "horovod-synthetic" else _tf_cnn_run
    runs = [
        parse(lines, start, end)
        for start, end in zip(starts, [*starts[1:], len(lines)], strict=True)
    ]
    for run in runs:
        if run.world_size != ranks:
            raise LogError(
                f"ran on {run.world_size} devices (the run from line {run.line}) but nodes x "
                f"devices_per_node is {ranks}; allowed: the layout the log ran on"
            )
    return runs
