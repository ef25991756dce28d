"""How the ``dpscale`` commands reach a study and the workflow: the study files read and
checked as the workflow reads them, where the study writes, Snakemake's command line with
dpscale's own Snakefile, and the report. cli.py (the commands a person types) and
cli_study.py (a study's state and its cells measured again) share these."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

DRY_RUN = {"-n", "--dry-run", "--dryrun"}


def planned(files: list[Path], probe: bool = False) -> tuple[dict[str, Any], list]:
    """config.yaml, then each study file over it, as the workflow merges them; the checked
    config and its cells, or one line naming the bad file or field. The check is the
    workflow's own (dpscale.study_check); ``probe`` also runs the configured interpreters'
    probe, as the workflow does (check-config; the commands that only read a study skip it)."""
    from dpscale.plan.errors import ConfigError
    from dpscale.study_check import check_study

    try:
        study = check_study(files, probe=probe)
    except ConfigError as error:
        raise SystemExit(f"dpscale: config error: {error}") from None
    return study.config, study.cells


def readable(files: list[Path]) -> None:
    """Each study file read as the workflow reads it (size, encoding, YAML), before
    Snakemake loads it with ``--configfile``: its own loader ends a file it cannot open or
    decode in a traceback, before dpscale's Snakefile runs."""
    from dpscale.plan.config_files import study_config
    from dpscale.plan.errors import ConfigError

    try:
        study_config(files)
    except ConfigError as error:
        raise SystemExit(f"dpscale: config error: {error}") from None


def study_folder(config: dict[str, Any]) -> Path:
    """``<results_dir>/<study>``: the study's cells, tables and report."""
    return Path(config["results_dir"]) / config["study"]


def report_file(config: dict[str, Any]) -> Path:
    """Where ``dpscale report`` writes the study's report."""
    return study_folder(config) / "report.html"


def study_files(args: argparse.Namespace) -> list[Path]:
    """The study files given as arguments and with --configfile, in that order."""
    return [*args.files, *(args.configfile or [])]


def snakemake_program() -> str:
    """The Snakemake beside this interpreter (the analysis environment), else on PATH."""
    beside = Path(sys.executable).with_name("snakemake")
    found = str(beside) if beside.exists() else shutil.which("snakemake")
    if not found:
        raise SystemExit("dpscale: snakemake not found beside this Python or on PATH")
    return found


def workflow_command(files: list[Path], extra: list[str]) -> list[str]:
    """Snakemake with dpscale's own Snakefile (the checkout's, or the installed package's
    copy) working in the current folder: results/ and .envs/ go here. The Snakefile reads
    its config.yaml from beside itself; the study files come over it."""
    from dpscale.plan.paths import WORKFLOW_ROOT

    snakefile = WORKFLOW_ROOT / "Snakefile"
    if not snakefile.is_file():
        raise SystemExit(f"dpscale: no Snakefile at {snakefile}: reinstall dpscale")
    configs = ["--configfile", *map(str, files)] if files else []
    # the config files first: Snakemake's --configfile takes every word up to an option
    return [
        snakemake_program(),
        *configs,
        "--snakefile",
        str(snakefile),
        "--directory",
        str(Path.cwd()),
        *packaged_profiles(extra, WORKFLOW_ROOT),
    ]


def packaged_profiles(extra: list[str], workflow_root: Path) -> list[str]:
    """``--profile slurm`` names the profile dpscale carries (``<workflow>/slurm``) when the
    current folder has none of that name: Snakemake looks only here and in the user's
    config folders, so outside a checkout it found no profile.yaml."""
    out = list(extra)
    for index, word in enumerate(out):
        name, glued = (
            (word.split("=", 1)[1], True) if word.startswith("--profile=") else (None, False)
        )
        if word == "--profile" and index + 1 < len(out):
            name = out[index + 1]
        personal = Path.home() / ".config" / "snakemake" / (name or "")
        if not name or Path(name).exists() or personal.exists():
            continue
        if not (workflow_root / name).is_dir():
            continue
        packaged = str(workflow_root / name)
        if glued:
            out[index] = f"--profile={packaged}"
        else:
            out[index + 1] = packaged
    return out


def call(command: list[str]) -> int:
    """Run ``command`` (Snakemake), its line printed first; its exit code."""
    print(f"dpscale: {' '.join(command)}", flush=True)
    return subprocess.run(command, check=False).returncode


def write_report(files: list[Path], extra: list[str]) -> int:
    """``snakemake --report`` into the study's report file, and a line saying where."""
    path = report_file(planned(files)[0])
    code = call(workflow_command(files, [*extra, "--report", str(path)]))
    if code == 0:
        print(f"dpscale: report: {path}")
    return code


def study_arguments(parser: argparse.ArgumentParser) -> None:
    """The study files, as positional arguments and as Snakemake's --configfile."""
    parser.add_argument("files", nargs="*", type=Path, help="study files (YAML), as --configfile")
    parser.add_argument(
        "--configfile", nargs="+", type=Path, action="extend", help="study files, as Snakemake's"
    )


def command_parser(
    commands, name: str, example: str, help: str, **kwargs
) -> argparse.ArgumentParser:
    """A subcommand whose --help starts with what it does and ends with an example."""
    return commands.add_parser(
        name,
        help=help,
        description=help[0].upper() + help[1:] + ".",
        epilog=example,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )
