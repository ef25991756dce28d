"""dpscale rerun STUDY CELL: the cell named by its id or its result's path, one line with the
nearest ids for anything else, the Snakemake calls it makes (Snakemake itself is not run
here: tests/e2e/test_workflow.py reruns a cell of the tiny study), the previous result kept
under runs/; and dpscale status saying when the report is older than its tables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from dpscale import cli, cli_workflow
from dpscale.plan.rerun import cell_id_of, keep_previous, report_is_stale
from dpscale.plan.result import archive_path, make_result, write_json_atomic
from dpscale.study_check import check_study

STUDY = {
    "study": "again",
    "strategies": ["torch-ddp"],
    "models": [{"name": "resnet18", "stem": "cifar", "image_size": 16, "classes": 10}],
    "batch_sizes": [4, 8],
    "devices_per_node": [1, 2],
    "modes": ["synthetic"],
    "controls": [],
}
CELL = "torch-ddp/resnet18-cifar16-c10/synthetic/n1-d2-b8-r0"


@pytest.fixture
def study(tmp_path, monkeypatch):
    """The study file (results under tmp_path), its cells folder and its planned cells;
    the current folder is tmp_path."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "results_dir": "results"}))
    cells = check_study([path], probe=False).cells
    return path, Path("results") / "again" / "cells", cells


def done(cells_dir: Path, cell, archived: bool = True) -> Path:
    """A result for ``cell`` (and its copy under runs/, as the launcher writes both)."""
    system = {"host": "h", "cpu_model": "c", "python": "3.11", "launcher": {"wall_s": 3.0}}
    result = make_result(cell, "ok", started_at="2026-11-25T12:00:00+00:00", system=system)
    path = cells_dir / f"{cell.cell_id}.json"
    write_json_atomic(path, result)
    if archived:
        write_json_atomic(archive_path(path, result), result)
    return path


def test_the_study_plans_the_cell_these_tests_name(study):
    assert CELL in [cell.cell_id for cell in study[2]] and len(study[2]) == 4


@pytest.mark.parametrize(
    "given",
    [
        CELL,
        f"{CELL}.json",
        f"results/again/cells/{CELL}",
        f"results/again/cells/{CELL}.json",
        f"./results/again/../again/cells/{CELL}.json",
    ],
)
def test_a_cell_is_its_id_or_its_results_path_with_or_without_json(study, given):
    _, cells_dir, cells = study
    assert cell_id_of(given, cells_dir, [c.cell_id for c in cells]) == CELL


def test_an_absolute_path_names_the_cell_too(study):
    _, cells_dir, cells = study
    absolute = str(cells_dir.absolute() / f"{CELL}.json")
    assert cell_id_of(absolute, cells_dir, [c.cell_id for c in cells]) == CELL


def test_an_unknown_cell_is_one_line_with_the_nearest_ids(study):
    _, cells_dir, cells = study
    ids = [c.cell_id for c in cells]
    with pytest.raises(ValueError) as wrong:
        cell_id_of(CELL.replace("b8", "b16"), cells_dir, ids)
    said = str(wrong.value)
    assert "\n" not in said and said.startswith(f"{CELL.replace('b8', 'b16')!r} is not a cell")
    nearest = said.split("nearest: ")[1].split(", ")
    assert nearest[0] in (CELL, CELL.replace("b8", "b4")) and set(nearest) <= set(ids)
    with pytest.raises(ValueError, match="none of its 4 is close"):
        cell_id_of("resnet", cells_dir, ids)


def test_a_path_in_another_cells_folder_or_a_study_file_says_what_it_is(study):
    _, cells_dir, cells = study
    ids = [c.cell_id for c in cells]
    with pytest.raises(ValueError, match="not under this study's cells folder"):
        cell_id_of(f"elsewhere/other/cells/{CELL}.json", cells_dir, ids)
    with pytest.raises(ValueError, match="is a study file, not a cell"):
        cell_id_of("again.yaml", cells_dir, ids)


def calls(monkeypatch) -> list[list[str]]:
    """Each Snakemake command the CLI would run (each succeeds)."""
    made: list[list[str]] = []
    monkeypatch.setattr(cli_workflow, "snakemake_program", lambda: "snakemake")
    monkeypatch.setattr(cli_workflow, "call", lambda command: made.append(command) or 0)
    return made


def test_an_unknown_cell_stops_with_one_line_before_snakemake(study, monkeypatch):
    path, _, _ = study
    made = calls(monkeypatch)
    with pytest.raises(SystemExit) as stopped:
        cli.main(["rerun", str(path), "torch-ddp/resnet18/synthetic/n1-d2-b8-r0"])
    said = str(stopped.value.code)
    assert said.startswith("dpscale: rerun: 'torch-ddp/resnet18/synthetic/n1-d2-b8-r0' is not")
    assert "\n" not in said and f"nearest: {CELL}" in said and made == []


def test_a_finished_study_forces_the_cell_then_writes_the_report(study, monkeypatch, capsys):
    path, cells_dir, cells = study
    for cell in cells:
        done(cells_dir, cell)
    made = calls(monkeypatch)
    cli.main(["rerun", str(path), f"{cells_dir}/{CELL}.json", "--", "--cores", "2"])
    forced, report = made
    # the study files first, no target: the default one, as dpscale run; the cell forced
    assert forced[:3] == ["snakemake", "--configfile", str(path)]
    target = str(cells_dir / f"{CELL}.json")
    assert forced[-6:] == ["--directory", os.getcwd(), "--cores", "2", "--forcerun", target]
    assert report[-4:] == ["--cores", "2", "--report", str(cells_dir.parent / "report.html")]
    out = capsys.readouterr().out
    kept = archive_path(cells_dir / f"{CELL}.json", {"cell": {"cell_id": CELL}, **_stamp()})
    assert f"the previous result stays in {kept.parent}" in out  # the launcher's own copy
    assert len(list(kept.parent.iterdir())) == 1


def _stamp() -> dict[str, str]:
    return {"started_at": "2026-11-25T12:00:00+00:00", "status": "ok"}


def test_with_cells_still_to_measure_the_cell_runs_alone(study, monkeypatch, capsys):
    path, cells_dir, cells = study
    made = calls(monkeypatch)
    cli.main(["rerun", str(path), CELL])
    (forced,) = made  # no report: no tables yet
    target = str(cells_dir / f"{CELL}.json")
    assert forced[forced.index("--directory") + 2] == target and forced[-2:] == [
        "--forcerun",
        target,
    ]
    out = capsys.readouterr().out
    assert "study again has 3 other cells without a result" in out and "dpscale run" in out


def test_a_dry_run_is_snakemakes_own_and_writes_nothing(study, monkeypatch):
    path, cells_dir, cells = study
    for cell in cells:
        done(cells_dir, cell, archived=False)
    made = calls(monkeypatch)
    cli.main(["rerun", str(path), CELL, "--dry-run"])
    (forced,) = made
    assert forced[-3:] == ["-n", "--forcerun", str(cells_dir / f"{CELL}.json")]
    assert not (cells_dir.parent / "runs").exists()


def test_a_result_without_its_copy_under_runs_gets_one_before_it_is_forced(study):
    _, cells_dir, cells = study
    cell = next(c for c in cells if c.cell_id == CELL)
    path = done(cells_dir, cell, archived=False)
    kept = keep_previous(path)
    assert kept is not None and kept.read_bytes() == path.read_bytes()
    assert keep_previous(path) == kept  # once: the copy is found again
    path.write_text('{"status": "o')  # cut short by a crash: nothing finished to keep
    assert keep_previous(path) is None
    assert keep_previous(cells_dir / "missing.json") is None


def test_status_says_when_the_report_is_older_than_its_tables(study, capsys):
    path, cells_dir, _ = study
    tables, report = cells_dir.parent / "tables", cells_dir.parent / "report.html"
    (tables / "nested").mkdir(parents=True)
    (tables / "nested" / "cells.csv").write_text("cell_id\n")
    cli.main(["status", str(path)])  # no report yet: nothing said
    assert "older than" not in capsys.readouterr().out
    report.write_text("<html>")
    os.utime(report, ns=(1, 1))
    assert report_is_stale(report, tables)
    cli.main(["status", str(path)])
    stale = [line for line in capsys.readouterr().out.splitlines() if "older than" in line]
    assert stale == [f"the report ({report}) is older than its tables: run dpscale report {path}"]
    os.utime(tables / "nested" / "cells.csv", ns=(0, 0))
    cli.main(["status", str(path)])
    assert "older than" not in capsys.readouterr().out
