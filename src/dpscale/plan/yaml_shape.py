"""Bounds on what a loaded YAML document may be before any check walks it.

YAML aliases let a short file denote a cycle (``b: &b [4, *b]``) or, nested, billions of
values (an "alias bomb"); every recursive walk over such a document crashes or never ends.
One iterative walk here, with a budget, refuses both with one line naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dpscale.plan.errors import ConfigError

# A study's config holds a few hundred values (config.yaml: about 200); a hundred times that
# is still far from what a person writes and is walked in well under a second.
MAX_VALUES = 20_000
# Deeper than any field of the schema (four levels) by far.
MAX_DEPTH = 32


def field_name(path: Iterable[Any]) -> str:
    """A config field in the dotted form errors name it: ``train.comm[0].name``."""
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "<config>"


def _children(value: Any) -> list[tuple[Any, Any]]:
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return list(enumerate(value))
    return []


def check_shape(document: Any, where: str = "") -> None:
    """Raise ConfigError if ``document`` holds a cycle, is nested deeper than MAX_DEPTH or
    expands to more than MAX_VALUES values (shared aliases counted each time they appear).
    ``where`` (a file name) starts the message when given."""
    prefix = f"{where}: " if where else ""
    # (value, path, ids of the containers above it): an explicit stack, never recursion
    stack: list[tuple[Any, tuple[Any, ...], frozenset[int]]] = [(document, (), frozenset())]
    seen = 0
    while stack:
        value, path, above = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise ConfigError(
                f"{prefix}{field_name(path[:1])}: the document expands to more than "
                f"{MAX_VALUES:,} values (YAML aliases repeated); allowed: at most {MAX_VALUES:,}"
            )
        children = _children(value)
        if not children:
            continue
        if id(value) in above:
            raise ConfigError(
                f"{prefix}{field_name(path)}: a YAML alias refers to a value that contains it "
                "(a cycle); allowed: aliases of values defined before and outside them"
            )
        if len(path) >= MAX_DEPTH:
            raise ConfigError(
                f"{prefix}{field_name(path)}: nested deeper than {MAX_DEPTH} levels; "
                f"allowed: at most {MAX_DEPTH}"
            )
        inside = above | {id(value)}
        stack.extend((item, (*path, key), inside) for key, item in reversed(children))
