"""Bounds on a YAML document: while it is parsed (the loader every user file is read with)
and before any check walks it.

YAML aliases let a short file denote a cycle (``b: &b [4, *b]``) or, nested, billions of
values (an "alias bomb"); every recursive walk over such a document crashes or never ends.
One iterative walk here, with a budget, refuses both with one line naming the field.

Numbers keep the type they are written with: a schema's ``integer`` is an int in the
document (``16``), never a float that happens to be whole (``16.0``, ``1.0e+3``), which
jsonschema alone accepts and the cell ids would then spell ``b16.0`` (``StrictValidator``).

PyYAML's own composer recurses once per level of nesting (``[[[[...]]]]`` ten thousand deep
is a RecursionError) and keeps the last of two equal keys in a mapping without a word.
``StrictLoader`` stops at the same depth and value budget while it composes, and refuses a
key given twice, naming both lines; a problem is a ``DocumentError`` with its mark.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

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
        part = shown(part) if isinstance(part, str) else part
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "<config>"


def shown(name: str) -> str:
    """A key or a name as a one-line error shows it: as written where it is printable, else
    as Python writes it (``'a\\nb'``), so that a line break in it cannot break the line."""
    return name if name.isprintable() else repr(name)


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


def load_shipped(path: Path) -> Any:
    """A YAML file dpscale ships (its schemas), parsed by libyaml's safe loader where PyYAML
    has it: about ten times the pure-Python parser, a fifth of a second of every Snakemake
    start. What a user writes goes through StrictLoader instead."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=loader)  # noqa: S506 (a safe loader)


class DocumentError(yaml.MarkedYAMLError):
    """A document StrictLoader refuses: ``problem`` says why, ``problem_mark`` where."""


MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses nesting deeper than MAX_DEPTH and more than
    MAX_VALUES values as it composes (before any recursion runs deep or any time is spent
    on the rest of a huge file), and a key given twice in one mapping."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._values = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        self._values += 1
        if self._values > MAX_VALUES:
            raise DocumentError(
                problem=f"the document holds more than {MAX_VALUES:,} values; "
                f"allowed: at most {MAX_VALUES:,}",
                problem_mark=event.start_mark,
            )
        # the top mapping is depth 1; check_shape counts the levels below it
        if self._depth >= MAX_DEPTH + 1 and isinstance(
            event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)
        ):
            raise DocumentError(
                problem=f"nested deeper than {MAX_DEPTH} levels; allowed: at most {MAX_DEPTH}",
                problem_mark=event.start_mark,
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            lines: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:  # << merges keys another mapping gives
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = lines.get(key)
                except TypeError:  # an unhashable key: the constructor says so
                    continue
                if first is not None:
                    raise DocumentError(
                        problem=f"{key!r}: the key is given twice in one mapping (lines "
                        f"{first} and {line}); allowed: each key once (YAML would keep the "
                        "last without a word)",
                        problem_mark=key_node.start_mark,
                    )
                lines[key] = line
        return super().construct_mapping(node, deep=deep)


def _written_integer(checker: Any, value: Any) -> bool:
    """An int as the document wrote it: not a bool (``true``), not a whole float (``16.0``)."""
    return isinstance(value, int) and not isinstance(value, bool)


# every schema a user's file is checked against (the config, a published case) uses this
StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _written_integer),
)


def float_for_integer(error: jsonschema.ValidationError) -> str | None:
    """One line for a whole number written as a float where the schema wants an integer
    (``batch_sizes[0]: 16.0 is written as a float; ...``); None for any other error (6.5
    is simply not an integer: the schema's own words say so)."""
    types = error.validator_value if error.validator == "type" else None
    types = [types] if isinstance(types, str) else list(types or [])
    value = error.instance
    if "integer" not in types or not isinstance(value, float) or not value.is_integer():
        return None
    example = f" ({int(value)})" if abs(value) <= 2**53 else ""
    return (
        f"{field_name(error.absolute_path)}: {value!r} is written as a float; allowed: an "
        f"integer written without a decimal point or exponent{example}"
    )
