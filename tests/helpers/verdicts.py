"""What ``dpscale check-config`` and the workflow each say of a study file, taken the way each
takes it, for tests that compare them (tests/unit/test_config_files_fuzz.py).

check-config: ``dpscale.cli.main(["check-config", FILE])``, its exit message or its "ok".
The workflow: Snakemake's own loader first (``snakemake --configfile`` reads every file
before dpscale's Snakefile runs, and merges them over config.yaml its own way), then what
common.smk calls (``check_study`` with the files and ``--config``'s values, none here). A
file Snakemake's loader refuses never reaches dpscale: its verdict is ``SNAKEMAKE_REFUSED``.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

from dpscale import cli
from dpscale.plan.errors import ConfigError
from dpscale.plan.paths import WORKFLOW_ROOT
from dpscale.study_check import check_study

OK = "ok"
SNAKEMAKE_REFUSED = "refused by Snakemake's loader"
PREFIX = "dpscale: config error: "


@dataclass(frozen=True)
class Verdict:
    """``said``: OK, the one line dpscale printed (without its prefix), or SNAKEMAKE_REFUSED;
    ``lines``: how many lines that was."""

    said: str
    lines: int = 1

    @property
    def accepted(self) -> bool:
        return self.said == OK


def check_config_verdict(path: Path) -> Verdict:
    """What `dpscale check-config PATH` prints: its one error line, or OK."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            cli.main(["check-config", str(path)])
    except SystemExit as exited:
        message = str(exited.code)
        return Verdict(message.removeprefix(PREFIX), len(message.splitlines()))
    assert out.getvalue().startswith("dpscale: config ok: "), out.getvalue()
    return Verdict(OK)


def snakemake_config(path: Path) -> dict:
    """config.yaml and then ``path``, loaded and merged by Snakemake's own functions, as
    ``snakemake --configfile PATH`` hands them to the Snakefile."""
    from snakemake.common.configfile import load_configfile
    from snakemake.utils import update_config

    config: dict = {}
    update_config(config, load_configfile(str(WORKFLOW_ROOT / "config.yaml")))
    update_config(config, load_configfile(str(path)))
    return config


def workflow_verdict(path: Path) -> Verdict:
    """What the workflow says of ``snakemake --configfile PATH`` (common.smk's check)."""
    try:
        snakemake_config(path)
    except Exception:  # noqa: BLE001 - any refusal of Snakemake's: a WorkflowError, an OSError, ...
        return Verdict(SNAKEMAKE_REFUSED)
    try:
        check_study([path.absolute()], {})  # Snakemake hands the files' absolute paths
    except ConfigError as error:
        return Verdict(str(error), len(str(error).splitlines()))
    return Verdict(OK)
