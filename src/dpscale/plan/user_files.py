"""Files a user hands dpscale by path (logs, timelines, tables), read only within a bound and
only as UTF-8, so a wrong file is refused in one line before anything parses it.

Each kind has one bound, in bytes, checked before a byte is read (and again while reading,
for a file that grows or a device that never ends). None of them is configurable: each is
far above what one run of its tool writes, so a file over it is not that tool's output of
one run. The error names the bound and what makes a file fit; the caller names the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MIB = 2**20


@dataclass(frozen=True)
class FileKind:
    """A kind of file a user gives: its words, its bound in bytes and how to stay under it."""

    words: str
    bound: int
    fits: str


# nccl-tests, Horovod synthetic benchmark and tf_cnn_benchmarks logs: a run's table or its
# img/s lines are a few kB; NCCL_DEBUG=INFO lines can add a few MB over thousands of ranks
LOG = FileKind(
    "a benchmark log",
    16 * MIB,
    "the output of one run (without NCCL_DEBUG=INFO lines: grep -v 'NCCL INFO')",
)
# HOROVOD_TIMELINE's Chrome trace: about 1 kB per tensor and step
TIMELINE = FileKind(
    "a Horovod timeline",
    256 * MIB,
    "the timeline of one cell's measured steps (fewer steps or tensors)",
)
# a study's tables (cells.csv, bucket_timeline.csv) and a bucket-timeline profile
TABLE = FileKind(
    "a table",
    256 * MIB,
    "one study's table as dpscale wrote it",
)


class Unreadable(ValueError):
    """A file that cannot be taken as text of its kind: one line, without the file's name."""


def _over(kind: FileKind, found: str) -> Unreadable:
    return Unreadable(
        f"is {found}, over the {kind.bound // MIB} MiB bound for {kind.words} (fixed: "
        f"dpscale.plan.user_files, no setting); allowed: {kind.fits}"
    )


# byte-order marks of the encodings a Windows tool or PowerShell's redirection writes
MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def _other_encoding(data: bytes) -> None:
    """Unreadable where ``data`` starts with another encoding's byte-order mark or holds a
    NUL byte (UTF-16 without a mark, binary, or a file cut by a crash, which ends in NULs):
    each decodes as UTF-8 but is not text."""
    for mark, name in MARKS:
        if data.startswith(mark):
            raise Unreadable(
                f"is not UTF-8 ({name}: it starts with a {name} byte-order mark); allowed: "
                f"UTF-8 text (iconv -f {name} -t UTF-8 converts it)"
            )
    if b"\0" in data:
        line = data.count(b"\n", 0, data.index(b"\0")) + 1
        if b"\0" not in data.rstrip(b"\0"):  # what a crash leaves of a file being written
            raise Unreadable(
                f"is cut short: NUL bytes from line {line} to its end (the machine stopped "
                "while it was written); allowed: the whole output of a run"
            )
        raise Unreadable(
            f"is not UTF-8 text (a NUL byte at line {line}: UTF-16 without a byte-order mark, "
            "or binary); allowed: UTF-8 text (iconv -f UTF-16 -t UTF-8 converts UTF-16)"
        )


def _invalid(data: bytes, error: UnicodeDecodeError) -> Unreadable:
    line = data.count(b"\n", 0, error.start) + 1
    return Unreadable(
        f"is not UTF-8 (byte 0x{data[error.start]:02x} at line {line}); allowed: UTF-8 text "
        "(iconv -f LATIN1 -t UTF-8 converts a Latin-1 file)"
    )


def read_text(path: str | Path, kind: FileKind) -> str:
    """The file's text, if it is at most ``kind.bound`` bytes of UTF-8 (a UTF-8 byte-order
    mark is dropped); Unreadable otherwise, one line saying why."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > kind.bound:
                raise _over(kind, f"{size:,} bytes")
            data = handle.read(kind.bound + 1)
    except OSError as error:
        raise Unreadable(f"cannot be read: {error.strerror}") from None
    if len(data) > kind.bound:  # a file that grew, or a device with no end
        raise _over(kind, f"more than {kind.bound:,} bytes")
    data = data.removeprefix(b"\xef\xbb\xbf")
    _other_encoding(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _invalid(data, error) from None
