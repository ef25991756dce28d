"""A results folder shared read-only: its owner (root, umask 022) made it; a user who may read
it but not write it (nobody) asks for the study's state, renders its report into a folder of
their own and compares two studies. Each works, or says in one line what it needs, and
nothing in the shared folder changes (docs/guide/reliability.md, shared folders).

The study's cells are written, not measured (helpers/fake_study.py); its owner runs the
analysis as far as its tables and first figures (TARGET: the whole analysis takes most of a
minute on 2 cores), and the report is of those (the same target after --): what a reader
needs of the folder is the same. The two studies compared are copies of the tables shipped
in evidence/."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO
from helpers.fake_study import write_fake_study

READER = 65534  # nobody
SETPRIV = ["setpriv", f"--reuid={READER}", f"--regid={READER}", "--clear-groups"]
# Where the interpreter lies in a folder only root may enter (a pyenv under /root), the
# reader could not start it, or not the Snakemake `dpscale report` starts: it then holds
# CAP_DAC_READ_SEARCH too, which lets it read and enter any folder and write none. What
# these tests check is writing; what reading needs is checked where a plain reader runs.
READ_ANY = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
STUDY_FILE = REPO / "tests" / "data" / "browser.yaml"
TARGET = "results/browser/figures/throughput.png"  # the cells' tables and the figures rule
EVIDENCE = REPO / "evidence"
SIDES = {
    "h100": EVIDENCE / "2026-11-26-nvidia-h100" / "cpu16_torch_ddp_nodes_two_links",
    "h200": EVIDENCE / "2026-11-26-nvidia-h200" / "cpu16_torch_ddp_nodes_two_links",
}


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: the folder is made by one user and read by another (nobody)"
    if shutil.which("setpriv") is None:
        return "needs setpriv (util-linux) to run a command as nobody"
    return None


# side_by_side: no test here measures (tests/conftest.py)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.side_by_side,
    pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
]


def _starts(prefix: list[str], code: str) -> bool:
    done = subprocess.run(
        [*prefix, sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    return done.returncode == 0


@dataclass(frozen=True)
class Shared:
    lab: Path  # the owner's working folder: study.yaml, results/, .snakemake/
    mine: Path  # a folder the reader owns
    reader: list[str]  # the command prefix for dpscale: SETPRIV, else with READ_ANY
    report_reader: list[str]  # ... for dpscale report --out, which starts Snakemake


def _as_owner(lab: Path) -> None:
    """The study's cells written, then its analysis as `dpscale run` runs it."""
    study = lab / "study.yaml"
    study.write_text(STUDY_FILE.read_text(encoding="utf-8") + "env_dir: envs\n", encoding="utf-8")
    write_fake_study(study, lab / "results", lab / "envs")
    command = [sys.executable, "-m", "dpscale.cli", "run", "study.yaml", "--no-report"]
    done = subprocess.run(
        [*command, "--", TARGET, "--cores", "2"],
        cwd=lab,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for name, source in SIDES.items():
        shutil.copytree(source / "tables", lab / "results" / name / "tables")


@pytest.fixture(scope="module")
def shared():
    base = Path(tempfile.mkdtemp(prefix="dpscale-shared-"))
    try:
        base.chmod(0o755)
        lab, mine = base / "lab", base / "mine"
        lab.mkdir()
        mine.mkdir(mode=0o700)
        os.chown(mine, READER, READER)
        before = os.umask(0o022)
        try:
            _as_owner(lab)
        finally:
            os.umask(before)
        for root, folders, files in os.walk(lab):  # readable, not writable, by others
            for path in (Path(root, name) for name in [*folders, *files]):
                if not path.is_symlink():
                    path.chmod(stat.S_IMODE(path.lstat().st_mode) & ~0o022)
        starts_child = (
            "import subprocess, sys; subprocess.run([sys.executable, '-c', ''], check=True)"
        )
        reader = SETPRIV if _starts(SETPRIV, "") else [*SETPRIV, *READ_ANY]
        report_reader = SETPRIV if _starts(reader, starts_child) else [*SETPRIV, *READ_ANY]
        assert _starts(report_reader, starts_child), "nobody cannot start this interpreter"
        yield Shared(lab, mine, reader, report_reader)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``folder`` with its mode, size and modification time."""
    found = {}
    for root, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            info = Path(root, name).lstat()
            found[os.path.join(root, name)] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


def as_reader(shared: Shared, *words: str, prefix: list[str] | None = None):
    """``dpscale WORDS`` run as nobody in the owner's folder; the shared folder unchanged."""
    before = snapshot(shared.lab)
    env = {**os.environ, "HOME": str(shared.mine)}
    env.pop("XDG_CACHE_HOME", None)
    done = subprocess.run(
        [*(prefix or shared.reader), sys.executable, "-m", "dpscale.cli", *words],
        cwd=shared.lab,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert snapshot(shared.lab) == before, f"dpscale {' '.join(words)} wrote the shared folder"
    return done


def one_line(done: subprocess.CompletedProcess) -> str:
    """A refusal: a non-zero exit and one line on stderr, no traceback."""
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_results_follow_the_owner_s_umask(shared):
    """Under umask 022 every result, copy under runs/ and folder is readable by others."""
    study = shared.lab / "results" / "browser"
    files = [p for p in (study / "cells").rglob("*") if p.is_file()]
    files += [p for p in (study / "runs").rglob("*") if p.is_file()]
    assert files and {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o644}
    folders = [p for p in study.rglob("*") if p.is_dir()]
    assert {stat.S_IMODE(p.stat().st_mode) for p in folders} == {0o755}


def test_status_reads_a_folder_it_cannot_write(shared):
    done = as_reader(shared, "status", "study.yaml")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("study browser (results/browser/cells): 19 cells, 19 done"), first


def test_status_names_a_result_it_cannot_read(shared):
    if shared.reader != SETPRIV:
        pytest.skip("the reader reads any folder here (READ_ANY): nothing is unreadable to it")
    cells = shared.lab / "results" / "browser" / "cells"
    result = next(p for p in sorted(cells.rglob("*.json")))
    result.chmod(0o600)  # as results were before they followed the umask
    try:
        line = one_line(as_reader(shared, "status", "study.yaml"))
    finally:
        result.chmod(0o644)
    assert line.startswith(f"dpscale: cannot read {result.relative_to(shared.lab)} ("), line
    assert "read permission on results/browser" in line and "chmod -R a+rX" in line


def test_report_in_the_shared_folder_says_what_it_needs(shared):
    line = one_line(as_reader(shared, "report", "study.yaml", "--", TARGET))
    folder = shared.lab / "results" / "browser"
    assert line == (
        "dpscale: report: this user cannot write results/browser/report.html (it needs write "
        f"permission on {folder}); dpscale report study.yaml --out DIR writes the report into "
        "a folder you own"
    )


def test_report_out_renders_into_the_reader_s_folder(shared):
    out = shared.mine / "report"
    words = ["report", "study.yaml", "--out", str(out), "--", TARGET]
    done = as_reader(shared, *words, prefix=shared.report_reader)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == f"dpscale: report: {out / 'report.html'}"
    assert [p.name for p in out.iterdir()] == ["report.html"]  # no scratch folder left
    report = out / "report.html"
    assert report.stat().st_uid == READER and report.stat().st_size > 100_000
    assert "throughput.png" in report.read_text(encoding="utf-8")
    assert "Traceback" not in done.stderr
    if shared.report_reader == SETPRIV:  # not in root's group: Snakemake's records (0o660)
        assert "this user cannot read Snakemake's records in" in done.stdout


def test_compare_says_where_it_cannot_write_then_writes_where_it_can(shared):
    sides = ["results/h100", "results/h200", "--label", "A=h100", "B=h200"]
    line = one_line(as_reader(shared, "compare", *sides))
    assert line == (
        "dpscale: compare: this user cannot write results/compare/h200-vs-h100 (it needs write "
        f"permission on {shared.lab / 'results'}); --out DIR writes the comparison into a folder "
        "you own"
    )
    out = shared.mine / "compare"
    done = as_reader(shared, "compare", *sides, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == f"dpscale: wrote {out / 'compare.html'} and its tables"
    assert (out / "ratios.csv").stat().st_uid == READER
