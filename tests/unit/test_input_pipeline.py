"""What a user's image folder costs: folder cells beside the synthetic cell of their layout
and their loader alone, and what binds."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import aggregate, make_cell
from dpscale.analysis.answers.input_pipeline import COLUMNS, pipeline_table
from dpscale.analysis.results import tables
from dpscale.plan.result import make_result, now_iso, write_result
from dpscale.runner.records import pipeline_record
from dpscale.runner.timing import throughput_measurement

SYSTEM = {"host": "h", "cpu_model": "c", "python": "3.11"}


def result(mode: str, seconds: list[float], loader_img_s: float | None = None) -> dict:
    cell = make_cell(devices=2, batch=8, mode=mode)
    measurement = throughput_measurement(seconds, 2, 8, 2)
    system = dict(SYSTEM)
    if loader_img_s is not None:
        loader = throughput_measurement([32 / loader_img_s] * 3, 2, 8, 2)
        measurement["pipeline"] = {
            "summary": {"img_s": loader["summary"]["img_s"]},
            "bound_by": "loader" if loader_img_s < 1.2 * 32 / seconds[0] else "device",
        }
        system["image_folder"] = {"pipeline": "a loader", "skipped_count": 1}
    return make_result(cell, "ok", started_at=now_iso(), system=system, measurement=measurement)


def cells(*results: dict) -> pd.DataFrame:
    return tables.cells_table(list(results))


def test_a_folder_cell_sits_beside_its_synthetic_layout_and_names_the_loader():
    found = pipeline_table(
        cells(result("synthetic", [0.40, 0.41, 0.40]), result("folder", [0.8, 0.81, 0.8], 45.0))
    )
    assert list(found.columns) == COLUMNS and len(found) == 1
    row = found.iloc[0]
    assert row["folder_over_synthetic"] == pytest.approx(0.5, rel=0.02)
    assert row["binds"].startswith("the loader") and row["images_skipped"] == 1
    assert row["synthetic_img_s"].endswith("img/s") and "[" in row["folder_img_s"]


def test_a_folder_as_fast_as_synthetic_data_is_a_tie_and_the_step_binds():
    found = pipeline_table(
        cells(result("synthetic", [0.40, 0.42, 0.38]), result("folder", [0.41, 0.39, 0.40], 900))
    ).iloc[0]
    assert found["binds"].startswith("the training step") and "(tie)" in found["binds"]


def test_no_synthetic_cell_of_the_layout_says_not_measured_and_no_folder_cell_no_rows():
    alone = pipeline_table(cells(result("folder", [0.8, 0.8, 0.8], 900))).iloc[0]
    assert alone["synthetic_img_s"] == "not measured"
    assert pipeline_table(cells(result("synthetic", [0.4, 0.4, 0.4]))).empty


def law_result(mode: str, devices: int, batch: int, t_c: float, loader_img_s: float) -> dict:
    """A cell whose steps follow T(b) = b / 100 + t_c (plus a little noise per window);
    a folder cell also has its loader alone, each rank delivering loader_img_s / devices."""
    cell = make_cell(devices=devices, batch=batch, mode=mode)
    step = batch / 100 + t_c
    seconds = [2 * step * (1 + e) for e in (0.0, 0.01, -0.01, 0.005)]
    measurement = throughput_measurement(seconds, 2, batch, devices)
    system = dict(SYSTEM)
    if mode == "folder":
        rank = [2 * batch * devices / loader_img_s * (1 + e) for e in (0.0, 0.02, -0.02)]
        training = measurement["summary"]["img_s"]["mean"]
        measurement["pipeline"] = pipeline_record([rank] * devices, 2, batch, 1, training)
        system["image_folder"] = FOLDER
    return make_result(cell, "ok", started_at=now_iso(), system=system, measurement=measurement)


FOLDER = {
    "pipeline": "a loader",
    "path": "/images",
    "classes": 2,
    "images": 64,
    "images_read": [64],
    "skipped_count": 0,
    "skipped_files": [],
}


def cell_path(root, result: dict):
    """Where the workflow keeps a cell's result: under a cells folder, by its id."""
    return root / "cells" / f"{result['cell']['cell_id']}.json"


def test_folder_cells_are_fitted_and_scaled_as_their_own_mode(tmp_path):
    """The throughput law, the weak-scaling table and the break-even batch each have folder
    rows of their own, never pooled with the synthetic cells of the same layout."""
    paths = []
    for mode, extra in (("synthetic", 0.0), ("folder", 0.05)):  # the folder adds 50 ms a step
        for devices in (1, 2):
            for batch in (4, 8, 16):
                found = law_result(mode, devices, batch, 0.02 * devices + extra, 1e4)
                paths.append(write_result(cell_path(tmp_path, found), found))
    aggregate(tmp_path / "tables", paths)
    read = {
        n: pd.read_csv(tmp_path / "tables" / f"{n}.csv") for n in ("fits", "scaling", "break_even")
    }
    for name, table in read.items():
        assert set(table["mode"]) == {"synthetic", "folder"}, name
    fits_by_mode = read["fits"].set_index(["mode", "world_size"])
    assert fits_by_mode.loc[("folder", 1), "t_c"] == pytest.approx(0.07, rel=0.1)
    assert fits_by_mode.loc[("synthetic", 1), "t_c"] == pytest.approx(0.02, abs=0.01)
    two = read["scaling"][read["scaling"]["world_size"] == 2].set_index(
        ["mode", "batch_per_device"]
    )
    # against one device of its own mode: (2 b / (b/100 + 0.09)) / (b / (b/100 + 0.07))
    assert two.loc[("folder", 4), "speedup"] == pytest.approx(2 * 0.11 / 0.13, rel=0.03)
    assert two.loc[("synthetic", 4), "speedup"] == pytest.approx(2 * 0.06 / 0.08, rel=0.03)
