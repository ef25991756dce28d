"""Study config files: loaded with one-line syntax errors and merged over config.yaml as the
workflow merges them."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from dpscale.plan.errors import ConfigError
from dpscale.plan.paths import WORKFLOW_ROOT
from dpscale.plan.yaml_shape import check_shape


def load_yaml(path: Path) -> dict[str, Any]:
    """A config file's mapping; a syntax error is one line naming the file, line and column."""
    try:
        with open(path, encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: YAML syntax error: {error.problem or error.context}") from None
    except OSError as error:
        raise ConfigError(f"{path}: {error.strerror}") from None
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
    config: dict[str, Any] = {}
    for path in [WORKFLOW_ROOT / "config.yaml", *files]:
        config = merged(config, load_yaml(path))
    return config


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
