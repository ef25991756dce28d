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
from typing import Any

from dpscale.analysis.results.log_text import LogError, quoted, read_lines
from dpscale.analysis.results.throughput_logs import ThroughputRun, parse_throughput
from dpscale.plan import ring
from dpscale.plan.errors import ConfigError

# data-parallel training reduces its gradients in place (DDP's buckets, dpscale's own
# collectives cells), so that is the column taken unless an entry says otherwise
DEFAULT_PLACEMENT = "in-place"


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


# -- nccl-tests ---------------------------------------------------------------------------

NAMED_TEST = re.compile(r"# Collective test (?:starting|concluded): ([A-Za-z0-9_]+)")
PERF_BINARY = re.compile(r"\b([a-z_]+_perf)(?:_mpi)?\b")
RANK_LINE = re.compile(r"^#\s+Rank\s+([0-9]{1,9})\b")
OUT_OF_BOUNDS = re.compile(r"^# Out of bounds values\s*:\s*([0-9]+)")
FOOTER = re.compile(r"^# (?:Out of bounds values|Avg bus bandwidth)")
# a table row starts with a number (its size); other lines (NCCL INFO, MPI's warnings) do not
ROW_START = re.compile(r"^(?:[+-]?\.?\d|[+-]?(?:nan|inf))", re.IGNORECASE)
# the numbers nccl-tests prints (printf %f, %g): ASCII digits, a short exponent
NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
WHOLE = re.compile(r"[0-9]{1,18}")
# a type or op name as nccl-tests prints them (float, bfloat16, f8e4m3; sum, avg, mulsum):
# a lower-case word, not a closed list, so a later version's new names still read
NAME = re.compile(r"[a-z][a-z0-9_]{0,15}")
ROOT = re.compile(r"-?[0-9]{1,9}")
DECIMAL = re.compile(r"[0-9]+\.?[0-9]*|\.[0-9]+")  # printf %f: time, algbw, busbw
# all_reduce_perf -e is bounded by a device's memory: a petabyte is no device's message
MAX_MESSAGE_BYTES = 2**50
MAX_TIME_US = 3.6e9  # an hour per call: no all-reduce nccl-tests times
# a block's columns after its time, as nccl-tests 2.x names them ("error" before 2.11)
BLOCK = ("algbw", "busbw")
SLACK = 1e-6  # relative: floating point around nccl-tests' own rounding


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
    named = named_tests(lines)
    for number, name in named:
        if name != "all_reduce_perf":
            article = "an" if name[0] in "aeiou" else "a"
            raise LogError(
                f"is {article} {quoted(name)[1:-1]} log (line {number}); allowed: all_reduce_perf"
            )
    return "all_reduce_perf" if named else "all_reduce_perf (not named in the log)"


def _header(lines: list[str]) -> int:
    headers = [i for i, line in enumerate(lines) if _is_header(line)]
    if not headers:
        raise LogError(
            "has no nccl-tests table (no '#  size  count  type  redop ...' header line); "
            "allowed: the output of all_reduce_perf"
        )
    if len(headers) > 1:
        numbers = ", ".join(str(i + 1) for i in headers[:5]) + (", ..." if len(headers) > 5 else "")
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
    if (
        len(starts) != 2
        or starts[1] + 4 != len(columns)
        or any(tuple(columns[s + 1 : s + 3]) != BLOCK for s in starts)
        or any(columns[s + 3] not in ("#wrong", "error") for s in starts)
    ):
        raise LogError(
            f"has an unknown table layout {quoted(' '.join(columns), 120)}; allowed: nccl-tests "
            "2.x (size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong)"
        )
    return starts


@dataclass(frozen=True)
class _Cell:
    """One placement's time, algbw and busbw in one row, as printed and as numbers."""

    line: int
    placement: str
    message_bytes: int
    words: tuple[str, str, str]
    values: tuple[float, float, float]


def _number(word: str, what: str, line: int, placement: str) -> float:
    """A number as printf's %f prints it (a negative one is returned for its caller to
    refuse with its own words); else a LogError naming the line."""
    value = float(word) if NUMBER.fullmatch(word) else math.nan
    if math.isfinite(value) and (value < 0 or DECIMAL.fullmatch(word)):
        return value
    kind = "not a number"
    if math.isfinite(value):
        kind = "not as all_reduce_perf prints it (digits and a point)"
    elif NUMBER.fullmatch(word):
        kind = "not a finite number"
    raise LogError(
        f"has {what} {quoted(word, 20)} at line {line} ({placement}): {kind}; allowed: the "
        "numbers all_reduce_perf prints"
    )


def _cell(words: list[str], start: int, line: int, placement: str, size: int) -> _Cell:
    time_us, algbw, busbw = (
        _number(words[start + k], name, line, placement)
        for k, name in enumerate(("time", "algbw", "busbw"))
    )
    if not 0 < time_us <= MAX_TIME_US:
        raise LogError(
            f"has time {quoted(words[start], 20)} us at line {line} ({placement}); allowed: a "
            f"time above 0 and at most {MAX_TIME_US:.1e} us (an hour)"
        )
    for name, value, word in (
        ("algbw", algbw, words[start + 1]),
        ("busbw", busbw, words[start + 2]),
    ):
        if value < 0:
            raise LogError(
                f"has {name} {quoted(word, 20)} GB/s at line {line} ({placement}); allowed: a "
                "bandwidth of 0 or more"
            )
    return _Cell(line, placement, size, tuple(words[start : start + 3]), (time_us, algbw, busbw))


def _size(words: list[str], line: int, previous: tuple[int, int] | None, root: bool) -> int:
    """The row's size in bytes (whole, above 0, not below the row before's), once its count,
    type, op and root (where the table has one) are as nccl-tests prints them."""
    if not WHOLE.fullmatch(words[0]) or not 0 < int(words[0]) <= MAX_MESSAGE_BYTES:
        raise LogError(
            f"has size {quoted(words[0], 20)} at line {line}; allowed: a whole number of bytes "
            f"from 1 to {MAX_MESSAGE_BYTES:,} (1 PiB)"
        )
    size = int(words[0])
    if previous is not None and size < previous[0]:
        raise LogError(
            f"has size {size:,} at line {line} after {previous[0]:,} at line {previous[1]}; "
            "allowed: sizes that grow down the table (one run per file)"
        )
    if root and not ROOT.fullmatch(words[4]):
        raise LogError(
            f"has root {quoted(words[4], 20)} at line {line}; allowed: a rank number (-1: none)"
        )
    if not WHOLE.fullmatch(words[1]):
        raise LogError(
            f"has count {quoted(words[1], 20)} at line {line}; allowed: a whole number of elements"
        )
    for what, word in (("type", words[2]), ("redop", words[3])):
        if not NAME.fullmatch(word) or word in ("nan", "inf", "infinity"):
            raise LogError(
                f"has {what} {quoted(word, 20)} at line {line}; allowed: a name as "
                "all_reduce_perf prints it (float, bfloat16; sum, avg)"
            )
    return size


def _wrong(value: str, kind: str, line: int, placement: str) -> bool:
    """A #wrong count above 0 (printf %g of the count, or N/A where not validated); the old
    'error' column holds a rounding error, a number of 0 or more."""
    if value == "N/A":
        return False
    number = float(value) if NUMBER.fullmatch(value) and value[0] not in "+-" else math.nan
    counted = math.isfinite(number) and number >= 0
    if not counted or (kind == "#wrong" and number != int(number)):
        allowed = "a count of wrong elements or N/A" if kind == "#wrong" else "a number or N/A"
        raise LogError(
            f"has {kind} {quoted(value, 20)} at line {line} ({placement}); allowed: {allowed}"
        )
    return kind == "#wrong" and number != 0


def _short_row(lines: list[str], number: int, width: int, found: int) -> LogError:
    """A row of the wrong width: the file cut there (nothing but blanks after it), or not a
    row of this table."""
    if not any(line.strip() for line in lines[number + 1 :]):
        return LogError(f"is truncated at line {number + 1}: {quoted(lines[number].strip())}")
    return LogError(
        f"has {found} columns at line {number + 1} where its header has {width}: "
        f"{quoted(lines[number].strip())}; allowed: the rows all_reduce_perf prints"
    )


def _rows(
    lines: list[str], header: int, footer: int, placement: str
) -> tuple[list[AllReduceRow], list[_Cell], bool]:
    """The table's rows in ``placement``, every placement's cells (checked against their
    size and the ranks later), and whether every row was validated (#wrong not N/A)."""
    columns = lines[header].lstrip("#").split()
    starts = _blocks(columns)
    names = dict(zip(("out-of-place", "in-place"), starts, strict=True))
    rows, cells, wrong, unvalidated = [], [], [], False
    previous: tuple[int, int] | None = None
    for number in range(header + 1, footer):
        words = lines[number].split()
        if lines[number].startswith("#") or not words or not ROW_START.match(words[0]):
            continue  # the units line, or other output (NCCL INFO, warnings)
        line = number + 1
        if len(words) != len(columns):
            raise _short_row(lines, number, len(columns), len(words))
        size = _size(words, line, previous, columns[4] == "root")
        previous = (size, line)
        for name, block in names.items():
            cells.append(_cell(words, block, line, name, size))
            if _wrong(words[block + 3], columns[block + 3], line, name):
                wrong.append((line, words[0], words[block + 3]))
            unvalidated |= words[block + 3] == "N/A"
        time_us, algbw, busbw = cells[-2 if placement == "out-of-place" else -1].values
        rows.append(AllReduceRow(size, words[2], words[3], time_us, algbw, busbw))
    if wrong:
        line, size, count = wrong[0]
        raise LogError(
            f"has {len(wrong)} result(s) with #wrong > 0 (first: line {line}, size {size}, "
            f"#wrong {count}): nccl-tests found wrong sums; allowed: #wrong 0 or N/A"
        )
    return rows, cells, not unvalidated


def _check_footer(lines: list[str], footer: int) -> None:
    for line in lines[footer:]:
        found = OUT_OF_BOUNDS.match(line)
        if found and found.group(1).strip("0"):
            raise LogError(
                f"says {quoted(line.strip())}: nccl-tests found wrong results; allowed: "
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


def half_unit(word: str) -> float:
    """Half the last digit a printed number shows: its rounding (printf %.2f: 0.005)."""
    mantissa, _, exponent = word.lower().partition("e")
    return 0.5 * 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))


def _within(printed: float, word: str, low: float, high: float) -> bool:
    """``printed`` (as ``word`` shows it) rounds a value between ``low`` and ``high``."""
    margin = half_unit(word) + SLACK * abs(printed)
    return low - margin <= printed <= high + margin


def _check_bandwidths(cells: list[_Cell], ranks: int, cputime: bool) -> None:
    """Each cell's algbw is its size over its time and its busbw is algbw x 2(N-1)/N, as
    nccl-tests computes them, within the digits it prints (the time's included). A log
    timed with -C 1 prints CPU time beside bandwidths of the GPU's: only busbw is checked."""
    factor = ring.ring_factor(ranks)
    for cell in cells:
        time_us, algbw, busbw = cell.values
        words = cell.words
        if cputime:
            low, high = algbw - half_unit(words[1]), algbw + half_unit(words[1])
        else:
            slow, fast = time_us + half_unit(words[0]), time_us - half_unit(words[0])
            low = cell.message_bytes / slow / 1e3
            high = cell.message_bytes / fast / 1e3 if fast > 0 else math.inf
            if not _within(algbw, words[1], low, high):
                raise LogError(
                    f"has algbw {words[1]} GB/s at line {cell.line} ({cell.placement}) where "
                    f"size {cell.message_bytes:,} B over time {words[0]} us gives "
                    f"{cell.message_bytes / time_us / 1e3:.2f}; allowed: nccl-tests' algbw = "
                    "size / time, as an unedited log prints it"
                )
        if not _within(busbw, words[2], max(low, 0.0) * factor, high * factor):
            raise LogError(
                f"has busbw {words[2]} GB/s at line {cell.line} ({cell.placement}) where "
                f"algbw {words[1]} x 2(N-1)/N at N = {ranks} ranks gives "
                f"{algbw * factor:.2f}; allowed: nccl-tests' busbw for an all-reduce of "
                "nodes x devices_per_node ranks, as an unedited log prints it"
            )


def parse_all_reduce(
    lines: list[str], ranks: int, placement: str = DEFAULT_PLACEMENT
) -> AllReduceLog:
    """An all_reduce_perf table: one row per size in ``placement``; a LogError naming the
    line where the log is another test, cut short, wrong (#wrong > 0), of another rank
    count, or holds a row no run prints (a time not above 0, a number that is none, sizes
    that shrink, bandwidths its size and time contradict)."""
    test = _check_test(lines)
    header = _header(lines)
    footer = _footer(lines, header)
    rows, cells, validated = _rows(lines, header, footer or len(lines), placement)
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
    cputime = "cputime" in lines[header].lstrip("#").split()
    _check_bandwidths(cells, ranks, cputime)
    return AllReduceLog(test, listed, placement, validated, tuple(rows))


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
