"""The one plan-time verdict on a study. ``dpscale check-config`` (cli.py) and the workflow
(workflow/rules/common.smk, through workflow_door) both call :func:`check_study`, so a study
one accepts the other cannot refuse: each study file read with plan.config_files' bounds
(size, encoding, depth, each key once), the config planned (plan.study: the schema, the
rules beyond it, the matrix), every imported log read, a profile's default resources, and a
site's configured interpreters probed (launch.setup.interpreters). Every problem is one
ConfigError line.

It sits beside cli.py and workflow_door.py because it needs what neither may import alone:
the imported logs' parsers (analysis) and the interpreter probe (launch).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpscale.launch.setup.interpreters import InterpreterError, probe_configured
from dpscale.plan.cell import Cell
from dpscale.plan.config_files import giver, merged, study_config
from dpscale.plan.errors import ConfigError, UnknownKeyError
from dpscale.plan.profile import check_default_resources
from dpscale.plan.strategy import Strategy
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES

# Set ("1") by dpscale for the ``snakemake --report`` it starts (cli_workflow.reading_only):
# the report of a results folder this user may read but not write; the workflow's check of
# the study then does not ask that its folders be writable (check_study's ``writes``).
READS_ONLY_ENV = "DPSCALE_READS_ONLY"


@dataclass(frozen=True)
class CheckedStudy:
    """The config with its defaults filled in, its cells, and each probed interpreter's
    report ({env: report}; empty where none is configured or probing was not asked)."""

    config: dict[str, Any]
    cells: list[Cell]
    probed: dict[str, dict[str, Any]]


def check_study(
    files: Iterable[str | Path],
    overrides: Mapping[str, Any] | None = None,
    *,
    strategies: Mapping[str, Strategy] = STRATEGIES,
    default_resources: Sequence[str] = (),
    probe: bool = True,
    writes: bool = True,
) -> CheckedStudy:
    """The checked study, or a ConfigError of one line naming the file or the field.

    ``files``: the study files (``--configfile``), read and merged over config.yaml as
    check-config merges them, whoever calls. ``overrides``: Snakemake's ``--config KEY=VALUE``
    (the workflow's ``workflow.config_settings.config``), merged over them last.
    The workflow plans this merge, not the config Snakemake merged itself: Snakemake's
    loader keeps the last of two equal keys and keeps config.yaml's value where a study file
    gives an empty mapping (``repeats: {}``), so a study it took would differ from the one
    check-config judged (the rules read the checked config, common.smk's config.update).
    ``probe``: run the configured interpreters' probe (``dpscale status`` and the other
    commands that only read a study leave it out; check-config and the workflow run it).
    ``writes``: ask that the study's folders (results, environments, data) be writable;
    False for the commands that only read a study (status, report-path, report), and in a
    process started with ``DPSCALE_READS_ONLY=1`` (the Snakemake ``dpscale report`` runs)."""
    paths = [Path(path) for path in files]
    config = study_config(paths)
    if overrides:
        config = merged(config, dict(overrides))
    writes = writes and os.environ.get(READS_ONLY_ENV) != "1"
    try:
        checked, cells = plan_study(config, strategies, writes)
    except UnknownKeyError as error:  # a typo: name the file that has it
        raise ConfigError(f"{giver(error.path, paths, overrides) or '<config>'}: {error}") from None
    if checked["imports"]:  # the logs, read as the rules read them (this loads pandas)
        from dpscale.analysis.results.import_logs import check_imports

        check_imports(checked["imports"])
    check_default_resources(default_resources)  # a --profile's placeholders
    probed: dict[str, dict[str, Any]] = {}
    if probe:
        used = {cell.strategy for cell in cells if not cell.skip_reason}
        try:
            probed = probe_configured(checked, strategies, used)
        except InterpreterError as error:
            raise ConfigError(str(error)) from None
    return CheckedStudy(checked, cells, probed)
