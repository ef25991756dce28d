"""A study folder this user may read but not write: the commands that only read it (status,
report-path, report --out, compare --out) work, and the others say in one line which folder
needs which permission. Permissions are faked here (os.access, a PermissionError), so these
run as root too; tests/e2e/test_shared_folder.py runs them as another user."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from dpscale import cli, cli_workflow
from dpscale.plan.errors import ConfigError
from dpscale.study_check import READS_ONLY_ENV, check_study

STUDY = {
    "study": "shared",
    "strategies": ["torch-ddp"],
    "models": [{"name": "resnet18", "stem": "cifar", "image_size": 16, "classes": 10}],
    "batch_sizes": [4],
    "devices_per_node": [1],
    "modes": ["synthetic"],
    "controls": [],
}


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """The owner's folder, this user's working folder: a study file and its tables."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(STUDY), encoding="utf-8")
    tables = tmp_path / "results" / "shared" / "tables"
    tables.mkdir(parents=True)
    (tables / "cells.csv").write_text("cell_id\n", encoding="utf-8")
    return tmp_path


def read_only(monkeypatch, *roots: Path) -> None:
    """This user may not write under ``roots`` (os.access says so, as to another user)."""
    real = os.access

    def access(path, mode, **kwargs):
        under = any(Path(path).absolute().is_relative_to(root) for root in roots)
        return False if under and mode & os.W_OK else real(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)


def refusal(words: list[str]) -> str:
    with pytest.raises(SystemExit) as stopped:
        cli.main(words)
    said = str(stopped.value.code)
    assert "\n" not in said, said
    return said


def test_a_study_only_read_needs_no_writable_folder(tmp_path, monkeypatch):
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({**STUDY, "results_dir": "/proc/nope"}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^results_dir: '/proc/nope' cannot be created"):
        check_study([study], probe=False)
    assert check_study([study], probe=False, writes=False).config["results_dir"] == "/proc/nope"
    monkeypatch.setenv(READS_ONLY_ENV, "1")  # the Snakemake `dpscale report` starts
    assert check_study([study], probe=False).config["results_dir"] == "/proc/nope"


def test_status_and_report_path_read_a_folder_they_cannot_write(folder, monkeypatch, capsys):
    read_only(monkeypatch, folder)
    cli.main(["status", "study.yaml"])
    assert capsys.readouterr().out.startswith("study shared (results/shared/cells): 1 cell, 0 done")
    cli.main(["report-path", "study.yaml"])
    assert capsys.readouterr().out == f"{Path('results') / 'shared' / 'report.html'}\n"


def test_status_names_a_result_it_cannot_read(folder, monkeypatch):
    real = Path.read_text

    def read_text(path, *args, **kwargs):
        if path.suffix == ".json":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    said = refusal(["status", "study.yaml"])
    cell = "results/shared/cells/torch-ddp/resnet18-cifar16-c10/synthetic/n1-d1-b4-r0.json"
    assert said.startswith(f"dpscale: cannot read {cell} (permission denied): this user needs ")
    assert "read permission on results/shared and everything in it" in said


def test_report_says_what_it_needs_where_it_cannot_write(folder, monkeypatch):
    monkeypatch.setattr(cli_workflow, "call", lambda command: pytest.fail("Snakemake ran"))
    with monkeypatch.context() as patched:
        read_only(patched, folder / "results")
        said = refusal(["report", "study.yaml"])
    assert said == (
        "dpscale: report: this user cannot write results/shared/report.html (it needs write "
        f"permission on {folder / 'results' / 'shared'}); dpscale report study.yaml --out DIR "
        "writes the report into a folder you own"
    )
    (folder / ".snakemake").mkdir()
    read_only(monkeypatch, folder / ".snakemake")
    said = refusal(["report", "study.yaml"])
    assert said == (
        f"dpscale: report: Snakemake keeps its records in {folder}/.snakemake, which this user "
        f"cannot write (it needs write permission on {folder}/.snakemake); dpscale report "
        "study.yaml --out DIR works in a folder you own"
    )


def test_report_out_works_in_a_folder_of_its_own(folder, tmp_path_factory, monkeypatch, capsys):
    """Snakemake works in a scratch folder under --out that links the current folder's
    entries (not its .snakemake), checks the study as one only read, and the scratch
    folder goes when it is done; its warnings for outputs without records are one line."""
    (folder / ".snakemake" / "metadata").mkdir(parents=True)
    (folder / ".snakemake" / "metadata" / "record").write_text("{}")
    read_only(monkeypatch, folder)
    out = tmp_path_factory.mktemp("mine") / "report"
    seen = {}

    def snakemake(command, drop, env):
        work = Path(command[command.index("--directory") + 1])
        seen.update(
            work=work,
            entries=sorted(p.name for p in work.iterdir()),
            results=(work / "results").resolve(),
            records=(work / ".snakemake" / "metadata").resolve(),
            reads_only=os.environ.get(READS_ONLY_ENV),
            cache=env["XDG_CACHE_HOME"],
            configfile=command[command.index("--configfile") + 1],
            report=command[command.index("--report") + 1],
        )
        return 0, 3

    monkeypatch.setattr(cli_workflow, "call_dropping", snakemake)
    with pytest.raises(SystemExit) as ended:
        cli.main(["report", "study.yaml", "--out", str(out)])
    assert ended.value.code == 0
    assert seen["work"].parent == out and not seen["work"].exists()
    assert seen["entries"] == [".snakemake", "results", "study.yaml"]
    assert seen["results"] == folder / "results"
    assert seen["records"] == folder / ".snakemake" / "metadata"
    assert seen["reads_only"] == "1" and READS_ONLY_ENV not in os.environ
    assert seen["cache"] == str(seen["work"] / ".cache")
    assert seen["configfile"] == str(folder / "study.yaml")
    assert seen["report"] == str(out / "report.html")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == (
        f"dpscale: report: {folder}/.snakemake/metadata holds no record of how 3 of its files "
        "were made; the report's run times leave them out"
    )
    assert lines[-1] == f"dpscale: report: {out / 'report.html'}"


@pytest.mark.parametrize("records", ["absent", "unreadable"])
def test_report_out_says_once_why_run_times_are_left_out(
    records, folder, tmp_path_factory, monkeypatch, capsys
):
    if records == "unreadable":  # Snakemake makes each record 0o660: not another user's
        (folder / ".snakemake" / "metadata").mkdir(parents=True)
        (folder / ".snakemake" / "metadata" / "record").write_text("{}")
        real = os.access
        monkeypatch.setattr(
            os, "access", lambda path, mode, **kw: Path(path).name != "record" and real(path, mode)
        )
    linked = []

    def snakemake(command, drop, env):
        work = Path(command[command.index("--directory") + 1])
        linked.append((work / ".snakemake" / "metadata").exists())
        return 0, 7

    monkeypatch.setattr(cli_workflow, "call_dropping", snakemake)
    out = tmp_path_factory.mktemp("mine")
    with pytest.raises(SystemExit) as ended:
        cli.main(["report", "study.yaml", "--out", str(out)])
    assert ended.value.code == 0 and linked == [False]
    line = capsys.readouterr().out.splitlines()[-2]
    records_folder = folder / ".snakemake" / "metadata"
    assert (
        line
        == {
            "absent": f"dpscale: report: there is no {records_folder}: 7 of its files have no "
            "record; the report's run times leave them out",
            "unreadable": "dpscale: report: this user cannot read Snakemake's records in "
            f"{records_folder} (read permission on them keeps them): 7 of its files have none; "
            "the report's run times leave them out",
        }[records]
    )


def test_report_out_says_where_it_cannot_write(folder, monkeypatch):
    monkeypatch.setattr(cli_workflow, "call_dropping", lambda *a: pytest.fail("Snakemake ran"))
    said = refusal(["report", "study.yaml", "--out", "study.yaml/mine"])
    assert said == (
        "dpscale: report: cannot write study.yaml/mine (Not a directory): --out needs a folder "
        "this user can write"
    )


def test_compare_says_where_it_cannot_write_before_reading(folder, monkeypatch):
    read_only(monkeypatch, folder)
    said = refusal(["compare", "results/a", "results/b"])
    assert said == (
        "dpscale: compare: this user cannot write results/compare/b-vs-a (it needs write "
        f"permission on {folder / 'results'}); --out DIR writes the comparison into a folder "
        "you own"
    )


def test_compare_names_a_table_it_cannot_read(folder, tmp_path_factory, monkeypatch):
    side = folder / "results" / "shared"
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode, **kw: "cells.csv" not in str(path) and real(path, mode)
    )
    out = tmp_path_factory.mktemp("mine")
    said = refusal(["compare", str(side), str(side), "--out", str(out)])
    assert said.startswith(f"dpscale: cannot read {side / 'tables' / 'cells.csv'} (permission")
    assert f"read permission on {side} and everything in it" in said


def test_write_blocker_names_the_nearest_folder_it_would_write(tmp_path, monkeypatch):
    (tmp_path / "made").mkdir()
    (tmp_path / "file").write_text("")
    assert cli_workflow.write_blocker(tmp_path / "made" / "a" / "b") is None
    assert cli_workflow.write_blocker(tmp_path / "file" / "below") == tmp_path / "file"
    read_only(monkeypatch, tmp_path / "made")
    assert cli_workflow.write_blocker(tmp_path / "made" / "a" / "b") == tmp_path / "made"
    assert cli_workflow.write_blocker(tmp_path / "other") is None
