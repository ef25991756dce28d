"""A log's text as dpscale reads it: within plan.user_files' bound for a log, UTF-8, its
lines as an editor numbers them without the rank prefixes mpirun and srun add, and the one
error type every log parser raises (one line saying what is wrong)."""

from __future__ import annotations

import re
from pathlib import Path

from dpscale.plan.user_files import LOG, Unreadable, read_text

# mpirun --tag-output / srun --label put the rank before every line
RANK_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: )")


class LogError(ValueError):
    """A log that cannot be imported; the message is one line saying what is wrong."""


def quoted(text: str, limit: int = 60) -> str:
    """Text from a log quoted in a message: one line however it reads, cut at ``limit``."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def split_lines(text: str) -> list[str]:
    """The log's lines as an editor numbers them (split at newlines only), without rank
    prefixes or trailing blanks (nor the empty line after a final newline)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [RANK_PREFIX.sub("", line).rstrip() for line in lines]


def read_lines(path: str | Path) -> list[str]:
    """The log's lines without rank prefixes: a LogError where the file is missing, empty,
    over plan.user_files' bound for a log or not UTF-8."""
    try:
        text = read_text(path, LOG)
    except Unreadable as error:
        raise LogError(str(error)) from None
    if not text.strip():
        raise LogError("is empty")
    return split_lines(text)
