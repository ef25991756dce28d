"""Logs users already have, read into records: nccl-tests' ``all_reduce_perf`` table,
Horovod's synthetic benchmarks (``Total img/sec on N GPU(s)``) and tf_cnn_benchmarks
(``total images/sec``). The standard library and dpscale.plan only: the workflow reads
every configured log when it starts, so a bad one stops it with one line before any job
(analysis.results.imports makes the tables)."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpscale.plan import ring
from dpscale.plan.errors import ConfigError

# data-parallel training reduces its gradients in place (DDP's buckets, dpscale's own
# collectives cells), so that is the column taken unless an entry says otherwise
DEFAULT_PLACEMENT = "in-place"
# mpirun --tag-output / srun --label put the rank before every line
RANK_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: )")


class LogError(ValueError):
    """A log that cannot be imported; the message is one line saying what is wrong."""


@dataclass(frozen=True)
class AllReduceRow:
    """One message size of an all_reduce_perf table, in the placement the import takes."""

    message_bytes: int
    dtype: str
    redop: str
    time_us: float
    algbw_GB_s: float
    busbw_GB_s: float


@dataclass(frozen=True)
class AllReduceLog:
    test: str  # the test the log names, or "all_reduce_perf (not named in the log)"
    ranks_listed: int | None  # ranks in its '#  Rank' lines
    placement: str
    validated: bool  # False where #wrong reads N/A (run with -c 0)
    rows: tuple[AllReduceRow, ...]


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


def read_lines(path: str | Path) -> list[str]:
    """The log's lines without rank prefixes; a missing or empty file is a LogError."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise LogError(f"cannot be read: {error.strerror}") from None
    if not text.strip():
        raise LogError("is empty")
    return [RANK_PREFIX.sub("", line).rstrip() for line in text.splitlines()]


# -- nccl-tests ---------------------------------------------------------------------------

NAMED_TEST = re.compile(r"# Collective test (?:starting|concluded): (\S+)")
PERF_BINARY = re.compile(r"\b([a-z_]+_perf)(?:_mpi)?\b")
RANK_LINE = re.compile(r"^#\s+Rank\s+(\d+)\b")
OUT_OF_BOUNDS = re.compile(r"^# Out of bounds values\s*:\s*(\d+)")
FOOTER = re.compile(r"^# (?:Out of bounds values|Avg bus bandwidth)")


def _is_header(line: str) -> bool:
    words = line.lstrip("#").split()
    return line.startswith("#") and words[:3] == ["size", "count", "type"]


def named_tests(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, test) for every test the log names: its banner, or a command line."""
    found = []
    for number, line in enumerate(lines, 1):
        banner = NAMED_TEST.search(line)
        if banner:
            found.append((number, banner.group(1)))
        elif not line.startswith("#"):
            found += [(number, name) for name in PERF_BINARY.findall(line)]
    return found


def _check_test(lines: list[str]) -> str:
    for number, name in named_tests(lines):
        if name != "all_reduce_perf":
            article = "an" if name[0] in "aeiou" else "a"
            raise LogError(f"is {article} {name} log (line {number}); allowed: all_reduce_perf")
    return "all_reduce_perf" if named_tests(lines) else "all_reduce_perf (not named in the log)"


def _header(lines: list[str]) -> int:
    headers = [i for i, line in enumerate(lines) if _is_header(line)]
    if not headers:
        raise LogError(
            "has no nccl-tests table (no '#  size  count  type  redop ...' header line); "
            "allowed: the output of all_reduce_perf"
        )
    if len(headers) > 1:
        numbers = ", ".join(str(i + 1) for i in headers)
        raise LogError(f"holds {len(headers)} tables (lines {numbers}); allowed: one run per file")
    return headers[0]


def _footer(lines: list[str], header: int) -> int | None:
    return next(
        (i for i in range(header + 1, len(lines)) if FOOTER.match(lines[i])),
        None,
    )


def _blocks(columns: list[str]) -> list[int]:
    """Where each placement's columns start (time, algbw, busbw, #wrong): out-of-place, then
    in-place."""
    starts = [i for i, name in enumerate(columns) if name in ("time", "cputime")]
    if len(starts) != 2 or columns[starts[0] + 3] not in ("#wrong", "error"):
        raise LogError(
            f"has an unknown table layout {' '.join(columns)!r}; allowed: nccl-tests 2.x"
        )
    return starts


def _wrong(value: str, kind: str) -> bool:
    """A #wrong count above 0 (the old 'error' column holds a rounding error, not a count)."""
    if kind != "#wrong" or value == "N/A":
        return False
    try:
        return float(value) != 0
    except ValueError:
        raise LogError(f"has #wrong {value!r}, not a number") from None


def _rows(
    lines: list[str], header: int, footer: int, placement: str
) -> tuple[list[AllReduceRow], bool]:
    columns = lines[header].lstrip("#").split()
    starts = _blocks(columns)
    start = starts[0] if placement == "out-of-place" else starts[1]
    width = starts[1] + 4
    rows, wrong, unvalidated = [], [], False
    for number in range(header + 1, footer):
        words = lines[number].split()
        if lines[number].startswith("#") or not words or not words[0].isdigit():
            continue  # the units line, or other output (NCCL INFO, warnings)
        if len(words) < width:
            raise LogError(f"is truncated at line {number + 1}: {lines[number].strip()!r}")
        for block in starts:
            if _wrong(words[block + 3], columns[block + 3]):
                wrong.append((number + 1, words[0], words[block + 3]))
            unvalidated |= words[block + 3] == "N/A"
        try:
            time_us, algbw, busbw = (float(words[start + k]) for k in range(3))
        except ValueError:
            raise LogError(
                f"has no number at line {number + 1}: {words[start : start + 3]}"
            ) from None
        rows.append(AllReduceRow(int(words[0]), words[2], words[3], time_us, algbw, busbw))
    if wrong:
        line, size, count = wrong[0]
        raise LogError(
            f"has {len(wrong)} result(s) with #wrong > 0 (first: line {line}, size {size}, "
            f"#wrong {count}): nccl-tests found wrong sums; allowed: #wrong 0 or N/A"
        )
    return rows, not unvalidated


def _check_footer(lines: list[str], footer: int) -> None:
    for line in lines[footer:]:
        found = OUT_OF_BOUNDS.match(line)
        if found and int(found.group(1)):
            raise LogError(
                f"says '{line.strip()}': nccl-tests found wrong results; allowed: "
                "'Out of bounds values : 0 OK'"
            )


def _check_ranks(lines: list[str], ranks: int) -> int | None:
    """The ranks the log lists ('#  Rank  3 Group ...'), if it lists them, are the entry's."""
    listed = {int(m.group(1)) for line in lines if (m := RANK_LINE.match(line))}
    if listed and len(listed) != ranks:
        raise LogError(
            f"lists {len(listed)} ranks ('#  Rank' lines) but nodes x devices_per_node is "
            f"{ranks}; allowed: the layout the log ran on"
        )
    return len(listed) or None


def _check_all_reduce(rows: list[AllReduceRow], ranks: int) -> None:
    """The rows reduce, and their busbw is the all-reduce's for this many ranks."""
    if any(row.redop == "none" for row in rows):
        raise LogError("has rows with redop 'none' (no reduction); allowed: all_reduce_perf")
    # nccl-tests' busbw is algbw x 2(N-1)/N for an all-reduce of N ranks (and another factor
    # for other collectives): rows whose algbw is large enough to read it within 1%
    ratios = [row.busbw_GB_s / row.algbw_GB_s for row in rows if row.algbw_GB_s >= 1.0]
    expected = ring.ring_factor(ranks)
    if ratios and abs(statistics.median(ratios) / expected - 1) > 0.03:
        raise LogError(
            f"has busbw/algbw {statistics.median(ratios):.3f} where an all-reduce over "
            f"nodes x devices_per_node = {ranks} ranks gives {expected:.3f}; allowed: an "
            "all_reduce_perf log of that many ranks"
        )


def parse_all_reduce(
    lines: list[str], ranks: int, placement: str = DEFAULT_PLACEMENT
) -> AllReduceLog:
    """An all_reduce_perf table: one row per size in ``placement``; a LogError if the log
    is another test, cut short, wrong (#wrong > 0) or of another rank count."""
    test = _check_test(lines)
    header = _header(lines)
    footer = _footer(lines, header)
    rows, validated = _rows(lines, header, footer or len(lines), placement)
    if footer is None:
        raise LogError(
            "is truncated: no '# Avg bus bandwidth' line after the table (the run stopped or "
            "the file was cut)"
        )
    if not rows:
        raise LogError("has no data rows between the table's header and its footer")
    _check_footer(lines, footer)
    listed = _check_ranks(lines, ranks)
    _check_all_reduce(rows, ranks)
    return AllReduceLog(test, listed, placement, validated, tuple(rows))


# -- throughput logs ----------------------------------------------------------------------

MODEL = re.compile(r"^Model:\s+(\S+)\s*$")
HVD_BATCH = re.compile(r"^Batch size:\s+(\d+)\s*$")
HVD_DEVICES = re.compile(r"^Number of ([A-Z]+)s:\s+(\d+)\s*$")
HVD_ITER = re.compile(r"^Iter #\d+:\s+([0-9.]+) img/sec per ")
HVD_PER_DEVICE = re.compile(r"^Img/sec per [A-Z]+:\s+([0-9.]+)\s+\+-([0-9.]+)\s*$")
HVD_TOTAL = re.compile(r"^Total img/sec on (\d+) [A-Z]+\(s\):\s+([0-9.]+)\s+\+-([0-9.]+)\s*$")
TF_BATCH = re.compile(r"^Batch size:\s+(\d+) global\s*$")
TF_PER_DEVICE = re.compile(r"^\s+(\d+) per device\s*$")
TF_MODE = re.compile(r"^Mode:\s+(\S+)")
TF_BATCHES = re.compile(r"^Num batches:\s+(\d+)")
TF_TOTAL = re.compile(r"^total images/sec:\s+([0-9.]+)\s*$")
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
    world, img_s = values["global"] // values["per_device"], values["total"]
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


# -- one entry of config imports ----------------------------------------------------------


def read_entry(entry: dict[str, Any]) -> AllReduceLog | list[ThroughputRun]:
    """One ``imports`` entry's log, parsed as its kind says."""
    lines = read_lines(entry["path"])
    ranks = entry["nodes"] * entry["devices_per_node"]
    if entry["kind"] == "nccl-tests":
        return parse_all_reduce(lines, ranks, entry.get("placement") or DEFAULT_PLACEMENT)
    return parse_throughput(lines, entry["kind"], ranks)


def check_imports(entries: list[dict[str, Any]]) -> None:
    """Every configured log parses (at plan time, before any job); else a ConfigError of one
    line naming the entry, the file and what is wrong."""
    for index, entry in enumerate(entries):
        try:
            read_entry(entry)
        except LogError as error:
            raise ConfigError(f"imports[{index}].path: {entry['path']!r} {error}") from None
