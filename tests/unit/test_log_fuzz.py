"""The nccl-tests log parser under Hypothesis: generated all_reduce_perf logs (a known ring
law, nccl-tests' own printing) given hostile values (negative, NaN and infinite numbers,
huge ones, other scripts' digits, wrong column counts, shuffled rows, stray lines, cuts),
random bytes and other encodings. Any input gives a parsed log whose every row means
something, or exactly one line (a LogError); never a traceback, within 2 s, and no file made.

Every input that ever failed is kept in tests/data/fuzz_corpus/logs/ (expected.yaml says
what each gives) and replayed here on every run. DPSCALE_FUZZ_SEED picks another draw,
DPSCALE_FUZZ_SCALE=50 fifty times as many; DPSCALE_FUZZ_SAVE=1 writes each failing draw
into the corpus folder (keep the smallest, name it and add its line to expected.yaml)."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import math
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from conftest import REPO
from dpscale.analysis.laws.cluster_link import CollectiveCurve
from dpscale.analysis.results.import_logs import (
    MAX_MESSAGE_BYTES,
    MAX_TIME_US,
    AllReduceLog,
    LogError,
    parse_all_reduce,
    read_lines,
)
from dpscale.plan import ring

CORPUS = REPO / "tests" / "data" / "fuzz_corpus" / "logs"
EXPECTED = yaml.safe_load((CORPUS / "expected.yaml").read_text(encoding="utf-8"))
SEED = int(os.environ.get("DPSCALE_FUZZ_SEED", "20261127"))
# DPSCALE_FUZZ_SCALE=50: fifty times the draws, for a search away from CI
SCALE = float(os.environ.get("DPSCALE_FUZZ_SCALE", "1"))
# the whole module takes a few seconds on two busy cores (CI runs it on every push)
FUZZ = settings(
    deadline=2000,
    database=None,  # nothing written under the checkout (.hypothesis/)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
WORK = Path(tempfile.mkdtemp(prefix="dpscale-log-fuzz-"))
# the working folder the parser runs in: its own, since tests beside this one (other pytest
# workers) may make and remove files in the checkout while it runs
HERE = WORK / "cwd"
HERE.mkdir()
atexit.register(shutil.rmtree, WORK, ignore_errors=True)

HEADER = (
    "# Collective test starting: all_reduce_perf",
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20",
    "#",
    "# Using devices",
)
TABLE = (
    "#                                                              out-of-place          "
    "             in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong  "
    "   time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)         "
    "   (us)  (GB/s)  (GB/s)       ",
)
FOOTER = (
    "# Out of bounds values : 0 OK",
    "# Avg bus bandwidth    : 10.0",
    "#",
    "# Collective test concluded: all_reduce_perf",
)
HOSTILE_WORDS = [
    "-1", "-0.00", "0", "0.00", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e999",
    "1e-999", "9" * 30, "9" * 5000, "1_000", "١٢٣", "１２", "0x10", "1.2.3", "N/A", "\x00",
    "\u202e", "1e3", "+5", ".5", "5.", "−5", "💥", "\x85", "0e+00", "4e-07", "-", "#wrong",
]  # fmt: skip
HOSTILE_LINES = [
    "", "#", "# Avg bus bandwidth : 1", "# Out of bounds values : 7 OK",
    "# Out of bounds values : " + "0" * 40 + "1 OK",
    "#  size  count  type  redop  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong",
    "# Collective test starting: all_gather_perf", "$ mpirun ./build/reduce_scatter_perf",
    "nid001:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1]", "-" * 74,
    "#  Rank 99999999999999999999 Group 0", "#  Rank 3 Group 0 Pid 1 on n device 3",
    "\x00\x00", "\u2028", "\r", "8 2 float sum -1 1 1 1 0 1 1 1 0", "12 warnings generated",
    "[1,0]<stdout>:        64 16 float sum -1 1.00 0.00 0.00 0 1.00 0.00 0.00 0",
]  # fmt: skip


def time_field(us: float) -> str:
    """nccl-tests' precision: two decimals under 100 us, one under 10 ms, none above."""
    if us >= 10000:
        return f"{us:.0f}"
    return f"{us:.1f}" if us >= 100 else f"{us:.2f}"


def data_row(size: int, seconds: float, ranks: int) -> str:
    algbw = size / seconds / 1e9
    block = (
        f"{time_field(seconds * 1e6):>8} {algbw:7.2f} {algbw * ring.ring_factor(ranks):7.2f}      0"
    )
    return f"{size:12d} {size // 4:13d}     float     sum      -1 {block} {block}"


@st.composite
def valid_logs(draw) -> tuple[list[str], int]:
    """An all_reduce_perf log whose times follow a ring law, as nccl-tests prints it."""
    ranks = draw(st.sampled_from([2, 3, 4, 8, 16, 64]))
    alpha = draw(st.floats(1e-7, 1e-4))
    beta = draw(st.floats(1e8, 1e12))
    first = draw(st.integers(2, 20))
    sizes = [2**k for k in range(first, first + draw(st.integers(1, 14)))]
    ranks_listed = draw(st.booleans())
    rank_lines = [f"#  Rank {r:2d} Group  0 Pid {r} on node device {r}" for r in range(ranks)]
    rows = [data_row(s, ring.ring_allreduce_seconds(s, ranks, beta, alpha), ranks) for s in sizes]
    lines = [*HEADER, *(rank_lines if ranks_listed else []), "#", *TABLE, *rows, *FOOTER]
    return lines, ranks


def is_row(line: str) -> bool:
    words = line.split()
    return bool(words) and words[0].isdigit()


@st.composite
def mutated_logs(draw) -> tuple[str, int]:
    """A valid log given one to three hostile changes."""
    lines, ranks = draw(valid_logs())
    lines = list(lines)
    text_word = st.text(max_size=8).filter(lambda w: w.split() == [w])
    for _ in range(draw(st.integers(1, 3))):
        rows = [i for i, line in enumerate(lines) if is_row(line)] or [0]
        at = draw(st.sampled_from(rows))
        words = lines[at].split() or [""]
        place = draw(st.integers(0, len(words) - 1))
        change = draw(st.sampled_from(["word", "drop", "add", "swap", "insert", "delete"]))
        if change == "word":
            words[place] = draw(st.sampled_from(HOSTILE_WORDS) | text_word)
        elif change == "drop":
            del words[place]
        elif change == "add":
            words.insert(place, draw(st.sampled_from(HOSTILE_WORDS)))
        elif change == "swap":
            other = draw(st.sampled_from(rows))
            lines[at], lines[other] = lines[other], lines[at]
            continue
        elif change == "insert":
            where = draw(st.integers(0, len(lines)))
            lines.insert(where, draw(st.sampled_from(HOSTILE_LINES) | st.text(max_size=40)))
            continue
        else:
            del lines[draw(st.integers(0, len(lines) - 1))]
            continue
        lines[at] = "  ".join(words)
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 9)) == 0:  # cut anywhere, as a run killed mid-write leaves it
        text = text[: draw(st.integers(0, len(text)))]
    return text, ranks


def one_line(message: str) -> bool:
    return bool(message) and message.isprintable() and len(message) < 600


def assert_meaningful(log: AllReduceLog, ranks: int) -> None:
    """Every row a run could print: a size, a time above 0, bandwidths of 0 or more that its
    size and time do not contradict beyond printf's rounding (at worst half a unit)."""
    factor = ring.ring_factor(ranks)
    sizes = [row.message_bytes for row in log.rows]
    assert sizes and sizes == sorted(sizes)
    for row in log.rows:
        assert isinstance(row.message_bytes, int) and 1 <= row.message_bytes <= MAX_MESSAGE_BYTES
        assert math.isfinite(row.time_us) and 0 < row.time_us <= MAX_TIME_US
        assert math.isfinite(row.algbw_GB_s) and row.algbw_GB_s >= 0
        assert math.isfinite(row.busbw_GB_s) and row.busbw_GB_s >= 0
        fast = row.time_us - 0.5
        high = row.message_bytes / fast / 1e3 if fast > 0 else math.inf
        low = row.message_bytes / (row.time_us + 0.5) / 1e3
        assert low - 0.5 <= row.algbw_GB_s * (1 - 1e-6) and row.algbw_GB_s <= high * 1.000001 + 0.5
        assert low * factor - 0.5 <= row.busbw_GB_s <= high * factor * 1.000001 + 0.5


def outcome(data: bytes, ranks: int) -> str:
    """'ok' for a log parsed into meaningful rows, else its one-line LogError; any other
    exception, or a file made beside the log or in the working folder, fails the test."""
    path = WORK / "fuzz.log"
    path.write_bytes(data)
    beside, here = sorted(os.listdir(WORK)), sorted(os.listdir(HERE))
    try:
        try:
            with contextlib.chdir(HERE):
                log = parse_all_reduce(read_lines(path), ranks)
        except LogError as error:
            assert one_line(str(error)), repr(str(error))
            result = str(error)
        else:
            assert_meaningful(log, ranks)
            result = "ok"
        assert sorted(os.listdir(WORK)) == beside and sorted(os.listdir(HERE)) == here
    except BaseException:
        save(data, ranks)
        raise
    return result


def save(data: bytes, ranks: int) -> None:
    """With DPSCALE_FUZZ_SAVE=1, a failing draw goes into the corpus folder to be named."""
    if os.environ.get("DPSCALE_FUZZ_SAVE") == "1":
        name = f"found-r{ranks}-{hashlib.sha1(data).hexdigest()[:12]}.log"
        (CORPUS / name).write_bytes(data)


# -- properties -------------------------------------------------------------------------------


@seed(SEED)
@settings(FUZZ, max_examples=int(40 * SCALE))
@given(valid_logs())
def test_a_log_nccl_tests_prints_is_read_back_row_for_row(drawn):
    lines, ranks = drawn
    assert outcome(("\n".join(lines) + "\n").encode(), ranks) == "ok"
    log = parse_all_reduce(lines, ranks)
    printed = [line.split() for line in lines if is_row(line)]
    assert [r.message_bytes for r in log.rows] == [int(words[0]) for words in printed]
    assert [r.time_us for r in log.rows] == [float(words[9]) for words in printed]


@seed(SEED)
@settings(FUZZ, max_examples=int(600 * SCALE))
@given(mutated_logs())
def test_a_hostile_log_is_read_or_refused_in_one_line(drawn):
    text, ranks = drawn
    outcome(text.encode("utf-8"), ranks)


@seed(SEED)
@settings(FUZZ, max_examples=int(150 * SCALE))
@given(st.binary(max_size=3000), st.sampled_from([2, 8]))
def test_random_bytes_are_read_or_refused_in_one_line(data, ranks):
    assert outcome(data, ranks) != "ok" or b"size" in data


@seed(SEED)
@settings(FUZZ, max_examples=int(40 * SCALE))
@given(valid_logs(), st.sampled_from(["latin-1", "cp1252", "utf-16", "utf-16-le", "utf-32"]))
def test_a_log_in_another_encoding_is_one_line(drawn, encoding):
    lines, ranks = drawn
    text = "\n".join(lines).replace("Using devices", "Using devices café") + "\n"
    result = outcome(text.encode(encoding), ranks)
    assert result.startswith("is not UTF-8"), result


@seed(SEED)
@settings(FUZZ, max_examples=int(40 * SCALE))
@given(valid_logs(), st.integers(2, 256), st.floats(1, 2**34))
def test_a_parsed_log_gives_a_curve_a_number_or_not_resolved(drawn, ranks, size):
    """What predict does next with a parsed log: a curve (or one line why not), and at any
    size and rank count a time above 0, or NaN that says it is not resolved."""
    lines, logged = drawn
    log = parse_all_reduce(lines, logged)
    try:
        curve = CollectiveCurve.from_log(log, logged)
        time = curve.seconds(size, ranks)
    except ValueError as error:
        assert one_line(str(error)) and "too few to fit" in str(error)
        return
    if time.resolved:
        assert math.isfinite(time.seconds) and time.seconds > 0
    else:
        assert math.isnan(time.seconds) and "not resolved" in time.unresolved


# -- the corpus: every input that ever failed ------------------------------------------------


def test_every_corpus_file_says_what_it_gives():
    files = {path.name for path in CORPUS.glob("*.log")}
    assert files == set(EXPECTED), (sorted(files ^ set(EXPECTED)), "name them in expected.yaml")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_corpus_gives_what_it_says(name):
    entry = EXPECTED[name]
    result = outcome((CORPUS / name).read_bytes(), entry["ranks"])
    assert result.startswith(entry["gives"]), result
