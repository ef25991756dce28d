"""How the ``dpscale`` commands reach a study and the workflow: the study files read and
checked as the workflow reads them, where the study writes, Snakemake's command line with
dpscale's own Snakefile, and the report. cli.py (the commands a person types) and
cli_study.py (a study's state and its cells measured again) share these."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DRY_RUN = {"-n", "--dry-run", "--dryrun"}


def planned(
    files: list[Path], probe: bool = False, writes: bool = True
) -> tuple[dict[str, Any], list]:
    """config.yaml, then each study file over it, as the workflow merges them; the checked
    config and its cells, or one line naming the bad file or field. The check is the
    workflow's own (dpscale.study_check); ``probe`` also runs the configured interpreters'
    probe, as the workflow does (check-config; the commands that only read a study skip it).
    ``writes=False``: the command only reads the study (status, report-path, report), so
    its folders need not be writable by this user (a shared results folder)."""
    from dpscale.plan.errors import ConfigError
    from dpscale.study_check import check_study

    try:
        study = check_study(files, probe=probe, writes=writes)
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


def write_blocker(path: Path) -> Path | None:
    """What keeps this user from writing ``path``: the file where it exists and may not be
    written, else the nearest existing folder above it that may not be written (where it
    would be made); None where nothing does."""
    path = path.absolute()
    found = path
    while not os.path.lexists(found) and found != found.parent:
        found = found.parent
    if os.path.isdir(found):
        return None if os.access(found, os.W_OK | os.X_OK) else found
    return None if found == path and os.access(found, os.W_OK) else found


def first_unreadable(folder: Path) -> Path | None:
    """The first file or folder under ``folder`` this user may not read (or list), or None
    (and None where ``folder`` does not exist)."""
    if not os.path.lexists(folder):
        return None
    stack = [folder]
    while stack:
        current = stack.pop()
        if not os.access(current, os.R_OK | os.X_OK):
            return current
        with os.scandir(current) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif not os.access(entry.path, os.R_OK):
                    return Path(entry.path)
    return None


def cannot_read(path: str | Path, folder: Path) -> str:
    """One line for a study's file this user may not read: the folder, the permission."""
    return (
        f"dpscale: cannot read {path} (permission denied): this user needs read permission "
        f"on {folder} and everything in it (its owner can give it: chmod -R a+rX {folder}; "
        "results written before dpscale followed the umask are mode 600)"
    )


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


def workflow_command(
    files: list[Path], extra: list[str], directory: Path | None = None
) -> list[str]:
    """Snakemake with dpscale's own Snakefile (the checkout's, or the installed package's
    copy) working in the current folder (or ``directory``): results/ and .envs/ go here.
    The Snakefile reads its config.yaml from beside itself; the study files come over it."""
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
        str(directory or Path.cwd()),
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
    try:
        return subprocess.run(command, check=False).returncode
    except OSError as error:
        raise SystemExit(cannot_start(command, error)) from None


def cannot_start(command: list[str], error: OSError) -> str:
    """One line for a program this user cannot start (its file, or the interpreter its
    first line names, not executable or not found)."""
    return (
        f"dpscale: cannot start {command[0]} ({error.strerror}): this user needs execute "
        "permission on it and on the Python it runs with (and read permission on the "
        "folders they are in)"
    )


@contextmanager
def reading_only() -> Iterator[None]:
    """The Snakemake started inside checks the study as one it only reads
    (study_check.READS_ONLY_ENV): ``--report`` writes the report and nothing of the study,
    so its folders need not be writable. The variable is this process's again after."""
    from dpscale.study_check import READS_ONLY_ENV

    before = os.environ.get(READS_ONLY_ENV)
    os.environ[READS_ONLY_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(READS_ONLY_ENV, None)
        else:
            os.environ[READS_ONLY_ENV] = before


def write_report(files: list[Path], extra: list[str], out: Path | None = None) -> int:
    """``snakemake --report`` into the study's report file (or ``out``/report.html: see
    :func:`report_elsewhere`), and a line saying where. One line, before Snakemake, where
    this user cannot write the report or Snakemake's records here (``.snakemake``)."""
    config = planned(files, writes=False)[0]
    if out is not None:
        return report_elsewhere(files, extra, config, out)
    path = report_file(config)
    elsewhere = f"dpscale report{''.join(f' {f}' for f in files)} --out DIR"
    blocked = write_blocker(path)
    if blocked:
        raise SystemExit(
            f"dpscale: report: this user cannot write {path} (it needs write permission on "
            f"{blocked}); {elsewhere} writes the report into a folder you own"
        )
    records = Path.cwd() / ".snakemake"
    blocked = write_blocker(records)
    if blocked:
        raise SystemExit(
            f"dpscale: report: Snakemake keeps its records in {records}, which this user "
            f"cannot write (it needs write permission on {blocked}); {elsewhere} works in a "
            "folder you own"
        )
    with reading_only():
        code = call(workflow_command(files, [*extra, "--report", str(path)]))
    if code == 0:
        print(f"dpscale: report: {path}")
    return code


# Snakemake's warning for each output it has no record of (report.auto_report): every
# output, where its records cannot be read here
MISSING_RECORD = "Missing metadata for file "


def report_elsewhere(files: list[Path], extra: list[str], config: dict[str, Any], out: Path) -> int:
    """``dpscale report --out DIR``: the report as ``DIR/report.html``, written by a
    Snakemake that works in a scratch folder of its own under DIR (its ``.snakemake``),
    which links every entry of the current folder, so that the study's relative paths
    (results_dir, env_dir, logs it imports) resolve as from here. Nothing is written
    outside DIR: the results folder may be someone else's, read-only. Snakemake's records
    of how the outputs were made (``.snakemake/metadata`` here) are linked where this user
    can read them (the report's run times); else one line says they are left out."""
    here = Path.cwd()
    if os.path.normpath(config["results_dir"]).startswith(".."):
        raise SystemExit(
            f"dpscale: report: --out: results_dir {config['results_dir']!r} lies above the "
            "current folder; run dpscale report from a folder that holds it, or give it as "
            "an absolute path"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".dpscale-report-", dir=out))
    except OSError as error:
        raise SystemExit(
            f"dpscale: report: cannot write {out} ({error.strerror}): --out needs a folder "
            "this user can write"
        ) from None
    path = out.absolute() / "report.html"
    try:
        records_state = _mirror(here, work)
        command = workflow_command(
            [Path(os.path.abspath(f)) for f in files],
            [*extra, "--report", str(path)],
            directory=work,
        )
        # Snakemake's caches (XDG_CACHE_HOME, else ~/.cache, which may not be writable:
        # nobody's home) in the scratch folder too
        with reading_only():
            cache = {"XDG_CACHE_HOME": str(work / ".cache")}
            code, unrecorded = call_dropping(command, MISSING_RECORD, {**os.environ, **cache})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if unrecorded:
        records = here / ".snakemake" / "metadata"
        said = {
            "linked": f"{records} holds no record of how {unrecorded} of its files were made",
            "absent": f"there is no {records}: {unrecorded} of its files have no record",
            "unreadable": f"this user cannot read Snakemake's records in {records} (read "
            f"permission on them keeps them): {unrecorded} of its files have none",
        }[records_state]
        print(f"dpscale: report: {said}; the report's run times leave them out")
    if code == 0:
        print(f"dpscale: report: {path}")
    return code


def _mirror(here: Path, work: Path) -> str:
    """``work`` as Snakemake's working folder in place of ``here``: a link to each entry of
    ``here`` but its ``.snakemake``, and a ``.snakemake`` of its own, with ``here``'s
    records linked where this user can read them: "linked", "absent" or "unreadable"."""
    try:
        entries = [entry for entry in os.scandir(here) if entry.name != ".snakemake"]
    except OSError as error:
        raise SystemExit(
            f"dpscale: report: --out reads the current folder {here} ({error.strerror}): "
            "this user needs read permission on it"
        ) from None
    for entry in entries:
        (work / entry.name).symlink_to(entry.path)
    # an incomplete/ folder first: beside a metadata/ folder without one, Snakemake would
    # migrate the records of an old version (reading every one)
    (work / ".snakemake" / "incomplete").mkdir(parents=True)
    records = here / ".snakemake" / "metadata"
    if not os.path.isdir(records):
        return "absent"
    if not _readable_records(records):
        return "unreadable"
    (work / ".snakemake" / "metadata").symlink_to(records)
    return "linked"


def _readable_records(folder: Path) -> bool:
    """Whether this user can read Snakemake's records in ``folder`` (it makes each 0o660:
    a user outside the owner's group cannot): the folder, and its first record."""
    try:
        if not os.access(folder, os.R_OK | os.X_OK):
            return False
        with os.scandir(folder) as entries:
            first = next((entry for entry in entries if entry.is_file()), None)
    except OSError:
        return False
    return first is None or os.access(first.path, os.R_OK)


def call_dropping(command: list[str], drop: str, env: dict[str, str]) -> tuple[int, int]:
    """:func:`call` in the environment ``env``, with the lines of its output that start
    with ``drop`` left out (the rest on stderr, where Snakemake writes its own); the exit
    code and how many were left out."""
    print(f"dpscale: {' '.join(command)}", flush=True)
    dropped = 0
    try:
        started = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=env,
        )
    except OSError as error:
        raise SystemExit(cannot_start(command, error)) from None
    with started as process:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(drop):
                dropped += 1
            else:
                sys.stderr.write(line)
    sys.stderr.flush()
    return process.returncode, dropped


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
