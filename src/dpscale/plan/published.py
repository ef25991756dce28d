"""The published multi-GPU cases a study's report predicts (config ``published_cases``, rule
published_cases): which cases file and which borrowed bucket timeline, and their checks.

Both defaults live in the repository beside the workflow, not in the Python package: the
workflow's folder (the checkout, or an installed package's copy of it,
docs/decisions/published-cases-inputs.md). A path the config gives is taken from the folder
Snakemake runs in, as an import's log is.
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dpscale.plan.config_files import file_version, is_file, load_yaml
from dpscale.plan.errors import ConfigError
from dpscale.plan.paths import WORKFLOW_ROOT
from dpscale.plan.published_cases import case_problems, check_cases
from dpscale.plan.user_files import TABLE, Unreadable, read_text

KEY = "published_cases"
# relative to the workflow's folder; setup.py and MANIFEST.in ship both with an install
DEFAULT_CASES = "studies/published/cases.yaml"
# one H200's torch-ddp timelines of ResNet-18/50/101 at amp_bf16 and fp32 (issue 51)
DEFAULT_PROFILE = "evidence/2026-11-27-nvidia-h200/bucket_profiles.csv"
DEFAULTS = {"cases": DEFAULT_CASES, "profile": DEFAULT_PROFILE}
# what analysis.laws.commmodel.buckets.timelines reads from a bucket timeline
PROFILE_COLUMNS = (
    "cell_id",
    "strategy",
    "model",
    "world_size",
    "comm",
    "batch_per_device",
    "forward_s",
    "backward_s",
    "optimizer_s",
    "bucket",
    "ready_s",
    "bucket_bytes",
)


def published_files(config: Mapping[str, Any], root: Path = WORKFLOW_ROOT) -> dict[str, str]:
    """``{"cases": path, "profile": path}``: the config's, else the workflow's own."""
    given = config.get(KEY) or {}
    return {name: given.get(name) or str(root / default) for name, default in DEFAULTS.items()}


def check_published(config: Mapping[str, Any], root: Path = WORKFLOW_ROOT) -> None:
    """Each file exists, the cases file holds a list of cases, each with its typed fields
    right (plan.published_cases), the profile holds one-rank bucket timelines, one strategy
    per (model, precision); one line naming the field otherwise."""
    files = published_files(config, root)
    for name, path in files.items():
        if not is_file(Path(path)):
            raise ConfigError(
                f"{KEY}.{name}: {path[:80]!r} is not a file; allowed: a path from the folder "
                f"Snakemake runs in, or empty (the workflow's {DEFAULTS[name]})"
            )
    _checked(_check_cases, files["cases"], file_version(files["cases"]))
    _checked(_check_profile, files["profile"], file_version(files["profile"]))


@functools.lru_cache(maxsize=16)
def _checked(check: Callable[[str], None], path: str, stamp: tuple[int, int]) -> None:
    """``check(path)`` once per version of the file: the workflow plans a study many times
    (every Snakemake job, every `dpscale check`), and reading the cases costs tens of ms."""
    check(path)


def _check_cases(path: str) -> None:
    read_cases(path)


def read_cases(path: str | Path) -> list[dict[str, Any]]:
    """The cases file's cases, each checked (plan.published_cases.check_cases): one line
    naming the file, the case and the field otherwise."""
    where = f"{KEY}.cases: {str(path)[:80]!r}"
    try:
        cases = load_yaml(Path(path)).get("cases")
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
    if not isinstance(cases, list) or not cases:
        raise ConfigError(f"{where} has no list of cases; allowed: a file like {DEFAULT_CASES}")
    check_cases(cases, where)
    return cases


def cases_file_problems(path: str | Path, where: str) -> list[str]:
    """Every problem of a cases file, one line per bad field (plan.published_cases
    .case_problems), each starting with ``where``; empty where the file is good."""
    try:
        cases = load_yaml(Path(path)).get("cases")
    except ConfigError as error:
        return [f"{where}: {error}"]
    if not isinstance(cases, list) or not cases:
        return [f"{where} has no list of cases; allowed: a file like {DEFAULT_CASES}"]
    return case_problems(cases, where)


def _check_profile(path: str) -> None:
    where = f"{KEY}.profile: {path[:80]!r}"
    try:  # within the bound for a table, as UTF-8 (plan.user_files)
        rows = list(csv.DictReader(io.StringIO(read_text(path, TABLE), newline="")))
    except Unreadable as error:
        raise ConfigError(f"{where} {error}") from None
    except csv.Error as error:
        raise ConfigError(f"{where} cannot be read as CSV ({error})") from None
    missing = [c for c in PROFILE_COLUMNS if not rows or c not in rows[0]]
    if missing:
        raise ConfigError(
            f"{where} lacks column {missing[0]!r}; allowed: a study's tables/bucket_timeline.csv"
        )
    runs: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        if row["world_size"] == "1":
            timed = (row["model"], row.get("precision") or "")
            runs.setdefault(timed, set()).add(row["strategy"])
    if not runs:
        raise ConfigError(
            f"{where} holds no one-rank timeline; allowed: one or more, one strategy per "
            "(model, precision)"
        )
    doubled = sorted(timed for timed, strategies in runs.items() if len(strategies) > 1)
    if doubled:
        raise ConfigError(
            f"{where} holds {len(runs[doubled[0]])} strategies' timelines of {doubled[0]}; "
            "allowed: one strategy per (model, precision)"
        )
