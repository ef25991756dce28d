"""A study's image folder in the findings: which binds at the largest layout measured (the
loader, the training step, a tie, or unresolved and what would resolve it), and the folder's
own speed-up beside the synthetic one."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from PIL import Image
from test_input_pipeline import cell_path, law_result

from conftest import aggregate
from dpscale.analysis.answers import findings
from dpscale.analysis.answers.input_pipeline import (
    LOADER,
    STEP,
    TIE,
    Rate,
    binding,
    pipeline_points,
    point_rates,
)
from dpscale.plan.result import write_result
from dpscale.render.pipeline_plot import pipeline_figure
from dpscale.steps.findings import findings as findings_step
from dpscale.steps.tables import figures as figures_step


def test_folder_below_synthetic_data_means_the_loader_binds():
    kind, why = binding(Rate(40, 2, 5), Rate(80, 2, 5), Rate(45, 1, 5), True)
    assert kind == LOADER and "costs 50% of the img/s" in why and "sharing the CPU" not in why
    # a loader fast alone that still slows training: it competes with the step beside it
    kind, why = binding(Rate(40, 2, 5), Rate(80, 2, 5), Rate(900, 9, 5), False)
    assert kind == LOADER and "sharing the CPU with it" in why


def test_folder_as_fast_and_a_faster_loader_mean_the_training_step_binds():
    kind, why = binding(Rate(80, 3, 5), Rate(81, 2, 5), Rate(400, 5, 5), False)
    assert kind == STEP and "(tie)" in why


def test_a_loader_alone_as_fast_as_training_is_a_tie():
    kind, why = binding(Rate(80, 3, 5), Rate(81, 2, 5), Rate(84, 4, 5), False)
    assert kind == TIE and "no more than training takes" in why


def test_overlapping_intervals_too_wide_to_tell_are_unresolved_with_the_windows_to_resolve():
    kind, why = binding(Rate(60, 40, 5), Rate(80, 2, 5), Rate(400, 5, 5), False)
    # 5 windows * (40 / (0.5 * 60))^2 = 8.9: about 9 windows narrow it to half its value
    assert kind == "unresolved" and "about 9 windows per cell" in why and "ran 5" in why


def test_without_a_synthetic_cell_the_cells_own_check_decides():
    kind, why = binding(Rate(40, 2, 5), Rate(), Rate(45, 1, 5), True)
    assert kind == LOADER and "cell's own check" in why


@pytest.fixture
def tables(tmp_path):
    """Synthetic and folder cells on 1 and 2 devices; the folder adds 50 ms to every step
    and its loader alone is far faster than training."""
    paths = []
    for mode, extra in (("synthetic", 0.0), ("folder", 0.05)):
        for devices in (1, 2):
            for batch in (4, 8, 16):
                found = law_result(mode, devices, batch, 0.02 * devices + extra, 1e4)
                paths.append(write_result(cell_path(tmp_path, found), found))
    aggregate(tmp_path / "tables", paths)
    return tmp_path / "tables"


def run_findings(tables):
    names = ("cells", "scaling", "fits", "break_even")
    outputs = {
        "findings": tables / "findings.csv",
        "findings_html": tables / "findings.html",
        "findings_top": tables / "findings_top.json",
        "answer": tables / "answer.json",
    }
    params = {"cells_dir": "", "prices": "null"}
    findings_step({name: tables / f"{name}.csv" for name in names}, outputs, params)
    return outputs


def test_the_landing_page_names_what_binds_at_the_largest_layout_with_three_intervals(tables):
    outputs = run_findings(tables)
    notes = json.loads(outputs["answer"].read_text())["notes"]
    lines = [n for n in notes if "with your image folder" in n]
    assert len(lines) == 1  # one strategy, one model
    line = lines[0]
    assert "on 1 node x 2 devices at per-device batch 16: the loader binds" in line
    assert "with the folder" in line and "synthetic data" in line and "the loader alone" in line
    assert line.count("img/s") >= 3 and line.count("[") >= 5  # three img/s, two speed-ups
    # against one device of its own mode at batch 16: 2 (0.16 + 0.07) / (0.16 + 0.09)
    folder = 2 * 0.23 / 0.25
    assert f"2 devices give speed-up {folder:.2f}x [" in line
    assert "over 1 device reading the same folder (synthetic data: " in line
    top = json.loads(outputs["findings_top"].read_text())
    assert line in top and line in outputs["findings_html"].read_text().replace("&#x27;", "'")


def test_the_layouts_verdict_has_the_folder_speedup_beside_the_synthetic_one(tables):
    outputs = run_findings(tables)
    row = pd.read_csv(outputs["findings"]).iloc[0]
    assert row["folder_batch_per_device"] == 16
    assert row["folder_speedup"] == pytest.approx(2 * 0.23 / 0.25, rel=0.03)
    verdict = row["verdict"]
    synthetic = verdict.index("as fast as 1 device at batch 16")
    folder = verdict.index("with your input pipeline (mode folder) at per-device batch 16")
    assert synthetic < folder


def test_a_study_without_folder_cells_has_no_folder_columns_or_lines(tables):
    cells = pd.read_csv(tables / "cells.csv")
    scaling = pd.read_csv(tables / "scaling.csv")
    fits = pd.read_csv(tables / "fits.csv")
    even = pd.read_csv(tables / "break_even.csv")
    synthetic = [t[t["mode"] == "synthetic"] for t in (cells, scaling, fits, even)]
    table = findings.findings_table(*synthetic)
    assert not set(findings.FOLDER_COLUMNS) & set(table.columns)
    assert "input pipeline" not in table.iloc[0]["verdict"]


def test_the_figure_draws_one_row_per_folder_point_with_all_three_rates(tables, tmp_path):
    points = pipeline_points(pd.read_csv(tables / "cells.csv"))
    assert len(points) == 6  # 1 and 2 devices at batches 4, 8 and 16
    synthetic, folder, loader = point_rates(points.iloc[-1])
    assert folder.mean < synthetic.mean < loader.mean and folder.half > 0
    path = tmp_path / "input_pipeline.png"
    figures_step(
        {"cells": tables / "cells.csv", "fits": tables / "fits.csv"},
        {"input_pipeline_figure": path},
        {},
    )
    with Image.open(path) as image:
        width, height = image.size
    assert height > width / 2  # a row per point, not one squeezed panel
    assert path.stat().st_size < 200_000  # well inside the report's size (before compact_png)


def test_no_folder_cell_draws_the_empty_figure_and_no_points(tables, tmp_path):
    cells = pd.read_csv(tables / "cells.csv")
    assert pipeline_points(cells[cells["mode"] == "synthetic"]).empty
    path = tmp_path / "empty.png"
    pipeline_figure(pipeline_points(cells.iloc[0:0]), path)
    assert path.is_file()
