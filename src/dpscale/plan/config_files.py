"""Every YAML file dpscale reads from a user (study files, cluster files, the published
cases): read with bounds and one-line errors, and merged over config.yaml as the workflow
merges study files.

Before parsing: the file is a regular file (a symlink loop, a folder or an unreadable file
is one line), at most MAX_FILE_BYTES, UTF-8 without a byte-order mark (Latin-1, UTF-16: one
line saying "not UTF-8"). While parsing (plan.yaml_shape.StrictLoader): at most MAX_DEPTH
levels and MAX_VALUES values, each key once in a mapping. Each problem is one ConfigError
line starting with the file's name.
"""

from __future__ import annotations

import codecs
import copy
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from dpscale.plan.errors import ConfigError
from dpscale.plan.paths import WORKFLOW_ROOT
from dpscale.plan.yaml_shape import DocumentError, StrictLoader, check_shape

# The largest YAML file dpscale reads from a user. config.yaml is 5 KB, the published cases
# 62 KB; a file above this bound is refused before it is read (no override: change it here).
MAX_FILE_BYTES = 1024 * 1024
BYTE_ORDER_MARKS = {
    codecs.BOM_UTF32_LE: "UTF-32",  # before UTF-16's: it starts with the same two bytes
    codecs.BOM_UTF32_BE: "UTF-32",
    codecs.BOM_UTF8: "UTF-8 with a byte-order mark",
    codecs.BOM_UTF16_LE: "UTF-16",
    codecs.BOM_UTF16_BE: "UTF-16",
}
UTF8_ONLY = "allowed: UTF-8 text without a byte-order mark"


def read_text(path: Path) -> str:
    """The file's text: a regular file of at most MAX_FILE_BYTES in UTF-8; a ConfigError
    of one line naming the file otherwise. The size is checked before a byte is read."""
    try:
        status = os.stat(path)  # follows links: a loop is ELOOP here, one line
        if not stat.S_ISREG(status.st_mode):
            raise ConfigError(f"{path}: not a regular file; allowed: a YAML file")
        if status.st_size > MAX_FILE_BYTES:
            raise ConfigError(_too_large(path, status.st_size))
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"{path}: cannot be read: {error.strerror or error}") from None
    if len(data) > MAX_FILE_BYTES:  # it grew since, or its size was not told
        raise ConfigError(_too_large(path, len(data)))
    for mark, name in BYTE_ORDER_MARKS.items():
        if data.startswith(mark):
            raise ConfigError(f"{path}: not UTF-8: it starts with a {name} mark; {UTF8_ONLY}")
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise ConfigError(
            f"{path}: not UTF-8 text: line {line} holds a NUL byte (UTF-16 or UTF-32 without "
            f"a mark, or not text); {UTF8_ONLY}"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise ConfigError(
            f"{path}:{line}:{column}: not UTF-8: byte 0x{data[error.start]:02x} cannot be "
            f"decoded (Latin-1, UTF-16 or another encoding?); {UTF8_ONLY}"
        ) from None


def _too_large(path: Path, size: int) -> str:
    return (
        f"{path}: {size:,} bytes; allowed: at most {MAX_FILE_BYTES:,} bytes (1 MiB) for a "
        "YAML file dpscale reads"
    )


def parse_yaml(text: str, where: str) -> Any:
    """``text`` parsed with StrictLoader; a ConfigError of one line ``where:line:column:
    problem`` otherwise."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 (a SafeLoader)
    except DocumentError as error:
        raise ConfigError(f"{_at(where, error.problem_mark)}: {error.problem}") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = " ".join(str(error.problem or error.context).split())
        raise ConfigError(f"{_at(where, mark)}: YAML syntax error: {problem}") from None
    except yaml.reader.ReaderError as error:  # a character YAML does not allow
        line = text[: error.position].count("\n") + 1
        raise ConfigError(
            f"{where}:{line}: character U+{error.character:04X} is not allowed in YAML "
            "(a control character); allowed: printable text"
        ) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{where}: YAML error: {' '.join(str(error).split())}") from None


def _at(where: str, mark: Any) -> str:
    return f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where


def load_yaml(path: Path) -> dict[str, Any]:
    """A YAML file's mapping (read_text, parse_yaml, plan.yaml_shape.check_shape); a
    ConfigError of one line naming the file otherwise."""
    loaded = parse_yaml(read_text(path), str(path))
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: not a mapping of config keys")
    check_shape(loaded, str(path))
    return loaded


def merged(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` over ``base``, mappings merged key by key (as Snakemake merges configs)."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def study_config(files: Iterable[Path]) -> dict[str, Any]:
    """config.yaml, then each study file over it, as the workflow merges them (unchecked)."""
    config = load_yaml(WORKFLOW_ROOT / "config.yaml")
    for path in files:
        if not os.path.lexists(path):
            raise ConfigError(no_study_file(Path(path), config.get("study")))
        config = merged(config, load_yaml(path))
    return config


def no_study_file(path: Path, default_study: Any) -> str:
    """One line for a study file that is not there, saying how a study is named: a user
    who types a study's name (``dpscale status default``) is shown its file."""
    preset = WORKFLOW_ROOT / "studies" / f"{path.name}.yaml"
    if str(path) == default_study:
        hint = "the default study is config.yaml itself, read when no study file is given"
    elif not path.suffix and is_file(preset):
        shown = os.path.relpath(preset) if preset.is_relative_to(Path.cwd()) else preset
        hint = f"did you mean {shown}?"
    else:
        hint = "a study is named by its YAML file (the presets: studies/*.yaml; none: config.yaml)"
    return f"{path}: cannot be read: No such file or directory; {hint}"


def giver(
    path: tuple[Any, ...], files: Iterable[Path], overrides: Mapping[str, Any] | None = None
) -> str | None:
    """The study file (or ``--config``) that gave the merged config's value at ``path``:
    the last to hold it, as study_config merges them (a list is replaced whole, so the last
    file holding a path through a list is the one whose list was kept); None if none does.
    Read again only to name the file in an error (an unknown key)."""
    documents = [(str(name), load_yaml(name)) for name in [WORKFLOW_ROOT / "config.yaml", *files]]
    documents.append(("--config", dict(overrides or {})))
    return next((name for name, doc in reversed(documents) if _holds(doc, path)), None)


def _holds(document: Any, path: tuple[Any, ...]) -> bool:
    """Whether ``document`` has a value at ``path`` (keys and list indices)."""
    for part in path:
        listed = isinstance(document, list) and isinstance(part, int) and part < len(document)
        if not listed and not (isinstance(document, dict) and part in document):
            return False
        document = document[part]
    return True


def file_version(path: str | Path) -> tuple[int, int]:
    """What tells one version of a file from another: its size and modification time (a
    cache key for files read at every plan: every Snakemake job plans the study again)."""
    status = Path(path).stat()
    return status.st_size, status.st_mtime_ns


def is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the file system refuses (too long)."""
    try:
        return path.is_file()
    except OSError:
        return False
