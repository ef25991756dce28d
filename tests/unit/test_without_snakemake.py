"""Measuring a study's cells without Snakemake: the workflow's cells, order and paths, each
missing cell launched once as bench_cell launches it, and nothing started after the
deadline. The launches are recorded here, not run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from dpscale.launch import without_snakemake as ws
from dpscale.plan.cell import Cell

STUDY = {
    "study": "no_snakemake",
    "strategies": ["torch-ddp", "torch-dp"],
    "models": [{"name": "resnet18", "stem": "cifar", "image_size": 16, "classes": 10}],
    "batch_sizes": [4, 8],
    "devices_per_node": [1],
    "nodes": [1],
    "modes": ["synthetic"],
    "drift": {"probes": 2},
    "measure": {"again": []},
}


@pytest.fixture
def study_file(tmp_path: Path) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "results_dir": str(tmp_path / "results")}))
    return path


@pytest.fixture
def launches(monkeypatch) -> list[list[str]]:
    """Each launch's command; the fake launcher writes the result file as the real one does."""
    seen: list[list[str]] = []

    def fake_run(command, **kwargs):
        seen.append(command)
        out = Path(command[command.index("--out") + 1])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("{}")

    monkeypatch.setattr(ws.subprocess, "run", fake_run)
    return seen


def test_cells_are_the_workflows_in_its_run_order_with_its_paths(study_file: Path) -> None:
    cells = ws.planned_cells(study_file)
    results = study_file.parent / "results"
    assert len(cells) == 4 + 2  # 2 strategies x 2 batches, and 2 drift probes
    assert cells[0].cell.drift_probe and cells[-1].cell.drift_probe  # first and last
    for planned in cells:
        assert planned.out == planned.cell.result_path(results / "no_snakemake")
        assert planned.log == results / "no_snakemake" / "logs" / "cells" / (
            f"{planned.cell.cell_id}.log"
        )


def test_each_missing_cell_is_launched_once_as_bench_cell_launches_it(
    study_file: Path, launches: list[list[str]]
) -> None:
    cells = ws.planned_cells(study_file)
    cells[1].out.parent.mkdir(parents=True, exist_ok=True)
    cells[1].out.write_text("{}")  # measured before: never measured again
    assert ws.run_cells(cells, ["python3"], deadline=float("inf")) == len(cells) - 1
    assert ws.run_cells(cells, ["python3"], deadline=float("inf")) == 0  # a rerun adds none
    first = launches[0]
    assert first[1:3] == ["-m", "dpscale.launch"]
    assert Cell.from_json(first[first.index("--cell") + 1]) == cells[0].cell
    assert json.loads(first[first.index("--interpreter") + 1]) == ["python3"]
    launched = [command[command.index("--out") + 1] for command in launches]
    assert str(cells[1].out) not in launched


def test_no_cell_starts_after_the_deadline(
    study_file: Path, launches: list[list[str]], capsys
) -> None:
    cells = ws.planned_cells(study_file)
    assert ws.run_cells(cells, ["python3"], deadline=time.monotonic() - 1) == 0
    assert not launches
    assert capsys.readouterr().out.count("deadline reached; not started") == len(cells)


def test_a_bad_study_is_one_line_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "accelerator": "tpu"}))
    with pytest.raises(SystemExit) as exit_:
        ws.main([str(path), "--interpreter", "python3"])
    message = str(exit_.value)
    assert message.startswith("dpscale: config error:") and "accelerator" in message
    assert "\n" not in message


def test_second_measurements_are_refused_they_would_run_on_the_analysing_machine(
    tmp_path: Path,
) -> None:
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "measure": {"again": ["noisy"]}}))
    with pytest.raises(SystemExit, match=r"measure.again: \['noisy'\] needs the workflow"):
        ws.main([str(path), "--interpreter", "python3"])
