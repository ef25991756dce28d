"""Where dpscale finds its files: the checkout when it runs from one, else the copy inside
an installed package; framework processes import dpscale from a folder holding it alone."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import REPO
from dpscale import cli, cli_workflow
from dpscale.plan import paths
from dpscale.runner import sysinfo


def installed_layout(root: Path) -> Path:
    """A fake site-packages with dpscale (this paths.py, its _workflow copy) and a module
    beside it that a framework process must not see; the package folder."""
    package = root / "site-packages" / "dpscale"
    (package / "plan").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "plan" / "__init__.py").write_text("")
    (package / "plan" / "paths.py").write_text((REPO / "src/dpscale/plan/paths.py").read_text())
    (package / paths.INSTALLED_WORKFLOW).mkdir()
    (package / paths.INSTALLED_WORKFLOW / "Snakefile").write_text("# the copy\n")
    (package.parent / "leaky.py").write_text("")  # stands for the analysis venv's pandas
    return package


def load_paths(package: Path) -> ModuleType:
    """The fake package's paths.py, executed as if imported from there."""
    spec = importlib.util.spec_from_file_location("installed_paths", package / "plan/paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_checkout_is_its_own_workflow_root():
    assert paths.CHECKOUT == REPO and paths.WORKFLOW_ROOT == REPO
    assert paths.SRC_DIR == REPO / "src" and paths.import_root() == REPO / "src"
    assert paths.work_dir() == REPO and paths.SCHEMA_DIR.is_dir()


def test_an_installed_package_finds_its_copy_and_works_in_the_current_folder(tmp_path, monkeypatch):
    package = installed_layout(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    installed = load_paths(package)
    assert installed.CHECKOUT is None
    copy = package / "_workflow"
    assert (copy, copy / "envs") == (installed.WORKFLOW_ROOT, installed.ENVS_DIR)
    assert installed.work_dir() == tmp_path
    assert installed.SRC_DIR.is_relative_to(tmp_path / "cache" / "dpscale" / "import")


def test_a_src_folder_without_a_snakefile_above_is_not_a_checkout(tmp_path):
    package = tmp_path / "src" / "dpscale"
    package.mkdir(parents=True)
    assert paths.checkout_of(package) is None
    assert paths.workflow_root(package) == package / "_workflow"
    (tmp_path / "Snakefile").write_text("")
    assert paths.workflow_root(package) == tmp_path


def test_framework_processes_see_the_installed_package_alone(tmp_path, monkeypatch):
    package = installed_layout(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    installed = load_paths(package)
    folder = installed.import_root()
    assert folder == installed.SRC_DIR and sorted(os.listdir(folder)) == ["dpscale"]
    assert (folder / "dpscale").resolve() == package
    assert installed.import_root() == folder  # made once, found again
    probe = (
        "import dpscale, importlib.util; print(dpscale.__file__, importlib.util.find_spec('leaky'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(folder)},
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    where, leaky = done.stdout.split()
    assert Path(where).resolve() == package / "__init__.py" and leaky == "None"


def test_an_installed_package_records_its_version_not_a_commit(monkeypatch):
    import importlib.metadata

    monkeypatch.delenv("DPSCALE_COMMIT", raising=False)
    monkeypatch.setattr(sysinfo, "CHECKOUT", None)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "9.8.7")
    assert sysinfo.git_commit() == "dpscale 9.8.7 (installed)"


def test_run_is_snakemake_with_the_workflow_s_snakefile_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_workflow, "snakemake_program", lambda: "snakemake")
    command = cli.workflow_command([Path("a.yaml"), Path("b.yaml")], ["all", "--cores", "2"])
    assert command == [
        "snakemake",
        "--configfile",
        "a.yaml",
        "b.yaml",
        "--snakefile",
        str(paths.WORKFLOW_ROOT / "Snakefile"),
        "--directory",
        str(tmp_path),
        "all",
        "--cores",
        "2",
    ]


def test_run_writes_the_report_after_the_study_but_not_after_a_dry_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli_workflow, "snakemake_program", lambda: "snakemake")
    calls: list[list[str]] = []
    monkeypatch.setattr(cli_workflow, "call", lambda command: calls.append(command) or 0)
    study = tmp_path / "s.yaml"
    study.write_text("study: here\n")
    with pytest.raises(SystemExit) as ended:
        cli.main(["run", "--configfile", str(study)])
    assert ended.value.code == 0 and len(calls) == 2
    assert calls[1][-2:] == ["--report", str(Path("results") / "here" / "report.html")]
    calls.clear()
    with pytest.raises(SystemExit):
        cli.main(["run", str(study), "--", "-n"])
    assert len(calls) == 1 and calls[0][-1] == "-n"


def test_report_on_a_study_never_run_is_one_line_before_snakemake(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls: list[list[str]] = []
    monkeypatch.setattr(cli_workflow, "call", lambda command: calls.append(command) or 0)
    study = tmp_path / "s.yaml"
    study.write_text("study: here\n")
    with pytest.raises(SystemExit) as ended:
        cli.main(["report", str(study)])
    line = str(ended.value.code)
    assert line.startswith("dpscale: report: study here has no tables yet (") and "\n" not in line
    assert f"dpscale run {study} measures its cells" in line and calls == []
    tables = tmp_path / "results" / "here" / "tables"
    tables.mkdir(parents=True)
    (tables / "cells.csv").write_text("cell_id\n")
    with pytest.raises(SystemExit) as ended:
        cli.main(["report", str(study)])
    assert ended.value.code == 0 and calls[0][-2] == "--report"
