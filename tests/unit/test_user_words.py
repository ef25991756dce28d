"""What a user reads carries no tracker words (an issue number, a "lent" machine, a
"target ... met" verdict): the README, the docs site's user pages, every subcommand's
--help, and the report's captions (report/). The patterns are tests/helpers/user_words.py's,
so a test of the rendered report can apply the same list."""

from __future__ import annotations

import contextlib
import io

import pytest

from conftest import REPO
from dpscale import cli
from helpers.user_words import tracker_words

USER_PAGES = sorted(
    [
        REPO / "README.md",
        REPO / "docs" / "index.md",
        REPO / "docs" / "architecture.md",
        REPO / "docs" / "site-interpreters.md",
        *(REPO / "docs" / "guide").glob("*.md"),
        *(p for p in (REPO / "report").iterdir() if p.is_file()),
    ]
)


def subcommands() -> list[str]:
    """Every subcommand ``dpscale --help`` lists, read from the help itself so a new one is
    checked too."""
    usage = help_text([])
    listed = usage.split("{", 1)[1].split("}", 1)[0]
    return sorted(listed.split(","))


def help_text(words: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.main([*words, "--help"])
    return out.getvalue()


def test_the_pages_checked_include_the_guide_and_the_captions():
    names = {p.relative_to(REPO).as_posix() for p in USER_PAGES}
    assert "docs/guide/install.md" in names and "report/findings.rst" in names


@pytest.mark.parametrize("path", USER_PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_a_user_page_has_no_tracker_words(path):
    assert tracker_words(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("words", [[], *([name] for name in subcommands())], ids=str)
def test_a_help_text_has_no_tracker_words(words):
    text = help_text(words)
    assert text.startswith("usage: dpscale")
    assert tracker_words(text) == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("which of issue 50's targets are met", ["issue 50"]),
        ("see Issues #12 and #13", ["Issues #12"]),
        ("ran on one lent H200", ["lent"]),
        ("the 10% target is met on 1 GbE", ["target is met"]),
        ("Target: a median of at most 10%. It was met.", []),
        ("a relentless issue with the 2 nodes; the target metric", []),
    ],
)
def test_the_patterns_catch_tracker_words_and_leave_plain_ones(text, found):
    assert tracker_words(text) == found
