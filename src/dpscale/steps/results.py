"""Steps that read the cells' results: the quality review (which cells to measure again) and
the aggregate's tidy tables (rules in workflow/rules/bench.smk and analysis.smk). They import
no plotting library: both run on every rerun cell, before anything that draws."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpscale.analysis.answers import input_pipeline
from dpscale.analysis.laws import scaling as scl
from dpscale.analysis.laws.drift import repeatability_with_drift, with_drift_columns
from dpscale.analysis.results import bucket_tables as buckets
from dpscale.analysis.results import horovod_timeline as hvd_timeline
from dpscale.analysis.results import mfu
from dpscale.analysis.results import tables as tbl
from dpscale.analysis.results.again import to_measure_again
from dpscale.plan.layout import plural
from dpscale.steps.io import write

Files = Mapping[str, Any]


def quality_review(inputs: Files, outputs: Files, params: Files) -> str:
    """Every cell's result -> the cells to measure once more, now that the machine is quiet
    (config measure.again; the workflow's checkpoint reads the list)."""
    results = tbl.load_results(inputs["results"])
    ids = to_measure_again(results, params["qualities"])
    review = {"qualities": list(params["qualities"]), "measure_again": ids}
    Path(outputs["review"]).write_text(json.dumps(review, indent=1) + "\n", encoding="utf-8")
    return f"[dpscale] {len(ids)} of {plural(len(results), 'cell')} to measure again: {ids}"


def aggregate(inputs: Files, outputs: Files, params: Files) -> str:
    """Throughput cells (the better of two where measured again) -> cells, windows, fits,
    scaling, break-even, repeatability (its CV also relative to the drift trace), the
    torch-ddp cells' bucket timelines, and what the horovod-tf cells that kept Horovod's
    timeline hid of their all-reduce."""
    results = tbl.load_results(params["results"], inputs.get("again", ()))
    cells = with_drift_columns(tbl.cells_table(results))
    windows = tbl.windows_table(results)
    fits = mfu.add_fit_mfu(scl.fits_table(windows), cells)
    frames = {
        "cells": cells,
        "windows": windows,
        "fits": fits,
        "scaling": scl.scaling_table(cells, scl.THROUGHPUT_MODES),  # each mode apart
        "break_even": scl.break_even_table(fits, cells),
        "repeatability": repeatability_with_drift(cells),
        "timeline": buckets.bucket_timeline_table(results),
    }
    if "input_pipeline" in outputs:  # mode folder: what the user's image folder costs
        frames["input_pipeline"] = input_pipeline.pipeline_table(cells)
    if "horovod_timeline" in outputs:  # the cells that kept Horovod's timeline beside them
        cells_dir = hvd_timeline.cells_folder(params["results"]) or "."
        frames["horovod_timeline"] = hvd_timeline.timeline_table(results, cells_dir)
    for name, frame in frames.items():
        write(frame, outputs[name])
    counts = cells["status"].value_counts().to_dict() if not cells.empty else {}
    excluded = int(fits["excluded_points"].fillna(0).sum())
    return (
        f"[dpscale] {plural(len(cells), 'cell')} {counts}; {int((fits['status'] == 'ok').sum())} "
        f"fits ({excluded} windows of contaminated cells left out)"
    )
