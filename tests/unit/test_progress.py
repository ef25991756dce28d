"""dpscale status and rerun-failed: a half-finished study read from its result files alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import make_cell
from dpscale import cli
from dpscale.plan.progress import (
    cells_left,
    finished_line,
    parse_study_cells,
    progress_lines,
    study_progress,
)
from dpscale.plan.result import make_result, write_json_atomic
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES

STUDY = {
    "study": "half",
    "strategies": ["torch-ddp", "mxnet-dist"],
    "models": [{"name": "resnet18", "stem": "cifar", "image_size": 16, "classes": 10}],
    "batch_sizes": [4, 8],
    "devices_per_node": [1, 2],
    "modes": ["synthetic"],
    "controls": [],
}


@pytest.fixture
def half_done(tmp_path, default_config, monkeypatch):
    """A study of 8 cells: torch-ddp's four done (2 ok at 10 and 30 s, 1 failed, 1 oom),
    one mxnet-dist cell ok at 100 s, a truncated result, and two never started."""
    monkeypatch.chdir(tmp_path)
    study = tmp_path / "half.yaml"
    study.write_text(yaml.safe_dump({**STUDY, "results_dir": str(tmp_path / "results")}))
    config, cells = plan_study({**default_config, **yaml.safe_load(study.read_text())}, STRATEGIES)
    cells_dir = tmp_path / "results" / "half" / "cells"
    torch = [c for c in cells if c.strategy == "torch-ddp"]
    mxnet = [c for c in cells if c.strategy == "mxnet-dist"]
    outcomes = [("ok", None, 10.0), ("ok", None, 30.0), ("failed", "rank 1 died\nlog", 5.0)]
    outcomes += [("oom", "out of memory at batch 8", 7.0)]
    for cell, (status, reason, wall) in zip(torch, outcomes, strict=True):
        write(cells_dir, cell, status, reason, wall)
    write(cells_dir, mxnet[0], "ok", None, 100.0)
    (cells_dir / f"{mxnet[1].cell_id}.json").write_text('{"status": "o')  # cut by a crash
    return study, cells_dir, cells


def write(cells_dir: Path, cell, status: str, reason: str | None, wall: float) -> None:
    system = {"host": "h", "cpu_model": "c", "python": "3.11", "launcher": {"wall_s": wall}}
    result = make_result(cell, status, started_at="2026-11-25T12:00:00+00:00", system=system)
    result["reason"] = reason  # status reads what the launcher wrote; the schema is aggregate's
    write_json_atomic(cells_dir / f"{cell.cell_id}.json", result)


def test_status_counts_every_state_and_says_why_cells_did_not_run(half_done):
    study, cells_dir, cells = half_done
    progress = study_progress("half", cells_dir, cells)
    assert len(progress.states) == len(cells) == 8
    assert progress.counts["ok"] == 3 and progress.counts["failed"] == 1
    assert progress.counts["oom"] == 1 and progress.counts["pending"] == 3
    lines = progress_lines(progress)
    assert (
        lines[0].startswith("study half (") and "8 cells, 5 done (3 ok, 1 failed, 1 oom" in lines[0]
    )
    assert any(
        line.startswith("  failed: torch-ddp/") and line.endswith(": rank 1 died") for line in lines
    )
    assert any("oom: " in line and "out of memory at batch 8" in line for line in lines)


def test_time_left_is_the_pending_cells_at_the_pace_of_their_own_kind(half_done):
    study, cells_dir, cells = half_done
    progress = study_progress("half", cells_dir, cells)
    # three mxnet-dist cells pending (one truncated), timed by mxnet's one done cell: 100 s
    assert progress.estimated == 3 and progress.seconds_left == pytest.approx(300.0)
    assert progress.seconds_done == pytest.approx(10 + 30 + 5 + 7 + 100)
    assert "about 5.0 min for 3 of 3 cells to measure" in progress_lines(progress)[-1]


def test_the_cli_prints_the_status_of_the_study_file(half_done, capsys):
    study, _, _ = half_done
    cli.main(["status", str(study)])
    out = capsys.readouterr().out
    assert "study half" in out and "3 pending" in out and "dpscale rerun-failed" in out


def test_rerun_failed_forces_exactly_the_failed_and_oom_results(half_done, capsys):
    study, cells_dir, cells = half_done
    cli.main(["rerun-failed", str(study), "--dry-run", "--", "--profile", "slurm"])
    out = capsys.readouterr().out
    forced = out.split("--forcerun ", 1)[1].split()
    torch = sorted(c.cell_id for c in cells if c.strategy == "torch-ddp")
    expected = {
        str(cells_dir / f"{cell_id}.json")
        for cell_id in torch
        if json.loads((cells_dir / f"{cell_id}.json").read_text())["status"] in ("failed", "oom")
    }
    assert set(forced) == expected and len(forced) == 2
    assert (
        f"--configfile {study} --snakefile" in out and "slurm --forcerun" in out
    )  # the packaged profile here


def test_a_study_with_nothing_failed_has_nothing_to_rerun(
    tmp_path, default_config, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    study = tmp_path / "none.yaml"
    study.write_text(yaml.safe_dump({**STUDY, "study": "none", "results_dir": str(tmp_path)}))
    cli.main(["rerun-failed", str(study), "--dry-run"])
    assert "nothing to rerun" in capsys.readouterr().out


def test_version_is_printed(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.startswith("dpscale ")


def test_report_path_follows_the_study_file(half_done, capsys):
    study, cells_dir, _ = half_done
    cli.main(["report-path", str(study)])
    assert capsys.readouterr().out.strip() == str(cells_dir.parent / "report.html")


def test_make_study_runs_the_named_preset_and_reports_where_it_wrote():
    import subprocess

    from conftest import REPO

    plan = subprocess.run(
        ["make", "-n", "study", "STUDY=post003_interconnect_mini"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "snakemake --configfile studies/post003_interconnect_mini.yaml\n" in plan
    assert (
        '--report "$(.venv/bin/dpscale report-path  studies/post003_interconnect_mini.yaml)"'
        in plan
    )


def test_a_study_not_yet_run_says_its_time_is_not_known_and_skips_cost_none(tmp_path):
    """Before any cell ran there is no pace: no "about 0 s", and a cell the plan skips is
    neither timed nor counted as one to measure."""
    cells = [make_cell(batch=b) for b in (4, 8)] + [
        make_cell(batch=16, skip_reason="needs 4 cores, the machine has 2")
    ]
    progress = study_progress("new", tmp_path, cells)
    assert progress.estimated == 0 and progress.to_skip == 1
    line = progress_lines(progress)[-1]
    assert "not known until a cell of each kind has run (2 cells to measure)" in line
    assert "1 pending cell will be skipped" in line and "about 0 s" not in line


def test_one_cell_is_said_in_the_singular(tmp_path):
    """Issue 77: "1 cell", never "1 cells", in every progress line."""
    cells = [make_cell(batch=4), make_cell(batch=16, skip_reason="needs 4 cores")]
    lines = progress_lines(study_progress("one", tmp_path, cells[:1]))
    assert ": 1 cell, 0 done (" in lines[0]
    assert "(1 cell to measure)" in lines[-1]
    line = progress_lines(study_progress("one", tmp_path, cells))[-1]
    assert "(1 cell to measure); 1 pending cell will be skipped (no time)" in line
    assert cells_left(tmp_path / "none", planned=1, to_measure=1) == (
        "0 of 1 cell done, 1 to measure (time left not known yet)"
    )


def test_a_finished_cell_is_one_line_with_its_img_s_and_interval_or_its_reason():
    cell = make_cell(batch=8)
    ok = make_result(cell, "ok", started_at="2026-11-26T12:00:00+00:00", system={})
    ok["measurement"] = {"summary": {"img_s": {"mean": 150.42, "ci95": 9.36, "n": 5}}}
    assert finished_line(ok) == f"dpscale: {cell.cell_id}: ok, 150.4 img/s ±9.4 (95%, 5 windows)"
    failed = make_result(cell, "failed", started_at="2026-11-26T12:00:00+00:00", system={})
    failed["reason"] = "rank 1 was killed by SIGKILL\nmore"
    assert finished_line(failed) == f"dpscale: {cell.cell_id}: failed: rank 1 was killed by SIGKILL"
    # a noisy cell's second measurement says so: one id, two lines, the second not a new result
    assert finished_line(ok, again=True) == (
        f"dpscale: {cell.cell_id}: measured again (the first read was noisy or disturbed; both "
        "kept): ok, 150.4 img/s ±9.4 "
        "(95%, 5 windows)"
    )


def test_a_finished_cells_line_says_the_cells_and_time_left(half_done):
    """half_done: 5 readable first results (one broken) of 8 planned, all measured, at a median
    of 10 s (10, 30, 5, 7 and 100 s: the median of five is 10); an again file counts once."""
    _, cells_dir, cells = half_done
    again = next(cells_dir.rglob("*.json")).with_suffix(".again.json")
    again.write_text("{}")
    line = cells_left(cells_dir, planned=len(cells), to_measure=len(cells))
    assert line == "5 of 8 cells done, about 30 s left (3 to measure, 10 s a cell)"
    assert cells_left(cells_dir, planned=8, to_measure=5) == "5 of 8 cells done"
    assert cells_left(cells_dir / "none", planned=3, to_measure=3) == (
        "0 of 3 cells done, 3 to measure (time left not known yet)"
    )


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("36 30", (36, 30)), ("3 4", None), ("", None), (None, None), ("x 1", None), ("1", None)],
)
def test_the_study_size_the_workflow_tells_a_launcher_is_parsed_or_ignored(value, parsed):
    assert parse_study_cells(value) == parsed


def test_status_groups_the_skipped_cells_by_their_reason(tmp_path, default_config, capsys):
    """A CPU study where one-process strategies skip their 2-device cells: torch-dp's skipped
    results on disk, mxnet-device's not yet written; one line per reason, then its cells."""
    study = tmp_path / "skips.yaml"
    skips = {**STUDY, "study": "skips", "strategies": ["torch-dp", "mxnet-device", "torch-ddp"]}
    study.write_text(yaml.safe_dump({**skips, "results_dir": str(tmp_path / "results")}))
    config, cells = plan_study({**default_config, **yaml.safe_load(study.read_text())}, STRATEGIES)
    cells_dir = tmp_path / "results" / "skips" / "cells"
    skipped = [c for c in cells if c.skip_reason and c.strategy == "torch-dp"]
    for cell in skipped:
        write(cells_dir, cell, "skipped", f"{cell.skip_reason}\nsecond line", 0.1)
    cli.main(["status", str(study)])
    lines = capsys.readouterr().out.splitlines()
    torch_reason = skipped[0].skip_reason.splitlines()[0]
    at = lines.index(f"  skipped, 2 cells: {torch_reason}")
    assert lines[at + 1] == f"    {', '.join(c.cell_id for c in skipped)}"
    mxnet = [c for c in cells if c.skip_reason and c.strategy == "mxnet-device"]
    at = lines.index(f"  will be skipped, 2 cells: {mxnet[0].skip_reason}")
    assert lines[at + 1] == f"    {', '.join(c.cell_id for c in mxnet)}"
    assert not any("torch-ddp/" in line for line in lines)  # it skips nothing
    cli.main(["status", str(study), "--reasons", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith(("  skipped, ", "  will be skipped, ")) for line in lines) == 1
    assert "  ... and 1 more reasons cells were skipped" in lines
