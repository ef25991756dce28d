"""What a user's image folder costs: folder cells beside the synthetic cell of their layout
and their loader alone, and what binds."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import make_cell
from dpscale.analysis.answers.input_pipeline import COLUMNS, pipeline_table
from dpscale.analysis.results import tables
from dpscale.plan.result import make_result, now_iso
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
