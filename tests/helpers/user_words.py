"""Words that belong to the project's tracker, not to what a user reads: an issue number,
a machine "lent" to the project, a "target ... met" verdict. One list, so the tests of the
README, the docs site, the CLI's help and the rendered report check the same thing."""

from __future__ import annotations

import re

TRACKER_WORDS = (
    re.compile(r"\bissue[s]? #?\d+", re.IGNORECASE),
    re.compile(r"\blent\b", re.IGNORECASE),
    re.compile(r"target\b[^.\n]{0,80}\bmet\b", re.IGNORECASE),
)


def tracker_words(text: str) -> list[str]:
    """Every tracker phrase in ``text``, as written there (empty: none)."""
    return [match.group(0) for pattern in TRACKER_WORDS for match in pattern.finditer(text)]
