"""The report's landing page and its pages: the answer table (every number with its 95%
interval, ties and unresolved values named), extrapolation marked where it is drawn, pages
only where a table has a row, and figures small enough for a report under 4 MB."""

import json
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from test_findings import BATCHES, run_findings, tables  # noqa: F401 (a fixture)

from dpscale.analysis.answers import answer_table as at
from dpscale.analysis.answers.findings import predicted_numbers
from dpscale.analysis.answers.verdicts import startup_verdict
from dpscale.plan.layout import plural
from dpscale.render import plots
from dpscale.render.pages import has_data
from dpscale.render.png import compact_png
from dpscale.steps.data import data_tables


def test_intervals_read_as_value_and_brackets_and_too_wide_is_unresolved():
    assert at.interval_words(1.76, 0.07, "x") == "1.76x [1.69, 1.83]"
    assert at.interval_words(1.3, 0.9, "x") == "unresolved: 1.3x [0.4, 2.2]"
    assert at.interval_words(1.3, math.inf, "x") == "unresolved: 1.3x, interval unbounded"
    assert at.interval_words(1.3, math.nan, "x") == "1.3x (no interval)"
    assert at.interval_words(math.nan, 0.1) == "not measured"


def test_break_even_in_whole_batches_with_its_interval():
    assert at.break_even_words(9.6, 1.5) == "10 [8, 12]"
    assert at.break_even_words(9.6, 6.0).startswith("unresolved: 10 [3, 16]")
    assert at.break_even_words(0.0, math.nan) == "any batch"
    assert at.break_even_words(math.inf, math.nan).startswith("never")
    assert at.break_even_words(math.nan, math.nan) == "not measured"


def test_accuracy_deltas_tie_with_one_device_or_are_unresolved():
    assert at.delta_cell(-2.6, 0.75) == "-2.6 pts [-3.4, -1.9]"
    assert at.delta_cell(-0.3, 2.6) == "tie with 1 device: -0.3 ± 2.6 pts"
    assert at.delta_cell(1.0, 9.0).startswith("unresolved")


def test_cost_interval_comes_from_the_img_s_interval():
    row = {"img_s": 100.0, "img_s_ci95": 10.0, "node_hours_per_1000_images": 0.01}
    low, high = 0.01 * 100 / 110, 0.01 * 100 / 90
    assert at.cost_words(row, None) == f"0.01 [{low:.3g}, {high:.3g}] node-h"
    assert at.cost_words(None, None) == "not measured"


def test_answer_table_has_its_columns_the_choice_first_and_the_unmeasured_layout(tables):  # noqa: F811
    findings = run_findings(tables)
    cells = pd.read_csv(tables / "cells.csv")
    costs = cells[cells["status"] == "ok"].rename(columns={"img_s_mean": "img_s"})
    costs = costs.assign(img_s_ci95=costs["img_s_ci95"], node_hours_per_1000_images=0.001)
    table = at.answer_table(findings, costs, cells, None)
    assert list(table.columns) == at.COLUMNS
    first = table.iloc[0]
    assert first["answer"] in (at.CHOOSE, at.CHOSEN_BY_RULE)
    assert first["layout"].startswith("torch-ddp, 1 node x 2 devices")
    assert " [" in first["speedup vs 1 device (95% CI)"]  # every number with its interval
    assert " [" in first["beats 1 device from global batch (95% CI)"]
    # the column the choice is made by, with its interval, beside the speed-up
    assert first[at.IMG_S].endswith(f"at batch {max(BATCHES)}") and " [" in first[at.IMG_S]
    chosen_img_s = float(first[at.IMG_S].split()[0])
    others = table.loc[table["answer"] == at.SLOWER, at.IMG_S]
    assert all(float(words.split()[0]) <= chosen_img_s for words in others)
    # a layout no cell of which could run is no row: one line under the table names it
    assert not table["layout"].str.startswith("torch-dp").any()
    below = at.below_table(findings, cells)
    assert below[0] == at.CHOICE_RULE and "img/s" in below[0] and "baseline" in below[0]
    assert below[1] == (
        "Not in the table, as the study cannot run them: torch-dp on 1 node x 2 devices "
        "(ResNet-18 32 px): (one process per node)."
    )


def test_layouts_left_out_are_named_once_grouped_by_why():
    reason = "drives several devices from one process; on CPU there is one device per process"
    line = at.left_out_line(
        [
            ("torch-dp", "1 node x 2 devices", f"torch-dp {reason}"),
            ("mxnet-device", "1 node x 2 devices", f"mxnet-device {reason}"),
        ]
    )
    assert line == (
        "Not in the table, as the study cannot run them: mxnet-device and torch-dp on 1 node x "
        f"2 devices: each {reason}."
    )
    alone = at.left_out_line([("torch-dp", "1 node x 2 devices", f"torch-dp {reason}")])
    assert alone.endswith(f"torch-dp on 1 node x 2 devices: it {reason}.")
    assert at.left_out_line([]) is None


def test_the_findings_step_writes_the_landing_table_and_notes(tables):  # noqa: F811
    outputs = {
        "findings": tables / "findings.csv",
        "findings_html": tables / "findings.html",
        "findings_top": tables / "findings_top.json",
        "answer": tables / "answer.json",
    }
    from dpscale.steps.findings import findings as findings_step

    names = ("cells", "scaling", "fits", "break_even")
    params = {"cells_dir": "", "prices": "null"}
    findings_step({n: tables / f"{n}.csv" for n in names}, outputs, params)
    answer = json.loads(outputs["answer"].read_text())
    assert answer["columns"] == at.COLUMNS
    # the torch-dp layout, which no cell could run, is the line under the table, not a row
    assert len(answer["rows"]) == 1 and all(len(r) == len(at.COLUMNS) for r in answer["rows"])
    assert answer["below"][0] == at.CHOICE_RULE and len(answer["below"]) == 2
    assert any("no price given" in note for note in answer["notes"])
    assert answer["notes"][-1].startswith("Measurement quality")


def test_one_step_is_one_step():
    assert plural(1, "step") == "1 step" and plural(25, "step") == "25 steps"
    assert plural(1200, "image") == "1,200 images" and plural(0.6, "step") == "1 step"
    row = {
        "startup_extra_s": 0.3,
        "startup_reference": "1 node x 1 device",
        "reference_first_below_images": 62.0,
        "batch_per_device": 32,
        "world_size": 2,
    }
    assert "shorter than 62 images (1 step) 1 node x 1 device" in startup_verdict(row)


def test_a_one_node_layout_names_its_predictions_at_more_nodes_as_extrapolated():
    base = {"strategy": "s", "model": "m", "status": "ok", "batch_per_device": 32}
    rows = [
        {**base, "network": net, "bandwidth_Gbit_s": bw, "nodes": nodes, "devices_per_node": 2}
        | {"speedup": 1.5 * nodes, "speedup_lo": nodes, "speedup_hi": 2.0 * nodes}
        | {"kind": "extrapolates in ranks, bandwidth", "validated_median_abs_error": np.nan}
        for net, bw in (("10g", 10), ("100g", 100))
        for nodes in (2, 8)
    ]
    row = {"strategy": "s", "model": "m", "network": "host", "nodes": 1}
    row |= {"devices_per_node": 2, "batch_per_device": 32}
    words = predicted_numbers(row, pd.DataFrame(rows))["predicted_speedup_more_devices"]
    assert words.startswith("8 nodes x 2 devices over 10g 12x [8, 16] (extrapolates in ranks")
    assert "8 nodes x 2 devices over 100g" in words and "not validated" in words
    assert "2 nodes" not in words  # the most nodes the figure draws, per network


def test_the_fitted_law_is_marked_extrapolated_beyond_the_measured_batches(tmp_path, monkeypatch):
    parts = plots.law_segments(4, 32)
    assert parts["measured"][0] == pytest.approx(4) and parts["measured"][-1] == pytest.approx(32)
    assert parts["above"][-1] == pytest.approx(64) and parts["below"][0] == pytest.approx(2)
    cells = pd.DataFrame(
        {
            "strategy": "torch-ddp",
            "model": "m",
            "mode": "synthetic",
            "status": "ok",
            "world_size": 1,
            "nodes": 1,
            "network": "host",
            "batch_per_device": list(BATCHES),
            "img_s_mean": [30.0, 50.0, 70.0, 80.0],
            "img_s_ci95": 2.0,
        }
    )
    fit = cells.iloc[:1][["strategy", "model", "mode", "world_size", "nodes", "network"]]
    fit = fit.assign(status="ok", v0=100.0, t_c=0.05)
    kept = []
    monkeypatch.setattr(plots.plt, "close", kept.append)
    plots.throughput_figure(cells, fit, tmp_path / "t.png")
    axis = kept[0].axes[0]
    largest = max(BATCHES)
    for line in axis.get_lines():
        beyond = np.asarray(line.get_xdata(), dtype=float) > largest * 1.001
        if beyond.any():  # only the faded dotted law goes past the last measured batch
            assert line.get_marker() in ("None", None, "") and line.get_linestyle() == ":"
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert plots.EXTRAPOLATED in labels
    plt.close(kept[0])


def test_a_table_with_its_header_only_has_no_page(tmp_path):
    empty, full = tmp_path / "empty.csv", tmp_path / "full.csv"
    empty.write_text("a,b\n")
    full.write_text("a,b\n1,2\n")
    assert not has_data(empty)
    assert has_data(full) and has_data(empty, full)
    assert has_data(tmp_path / "not_yet.csv")  # before the run, assumed to have rows


def test_the_data_category_leaves_out_empty_tables_and_keeps_six_digits(tmp_path):
    written = tmp_path / "tables"
    written.mkdir()
    (written / "empty.csv").write_text("a,b\n")
    (written / "full.csv").write_text("a,b,c\n0.123456789012,inf,x.y\n3,1e-05,2.5\n")
    folder = tmp_path / "data"
    inputs = {"tables": [str(written / "empty.csv"), str(written / "full.csv")]}
    data_tables(inputs, {"folder": str(folder)}, {})
    assert sorted(p.name for p in folder.iterdir()) == ["full.csv"]
    assert (folder / "full.csv").read_text() == "a,b,c\n0.123457,inf,x.y\n3,1e-05,2.5\n"


def test_figures_are_stored_as_palette_pngs_of_the_same_size(tmp_path):
    figure, axis = plt.subplots(figsize=(4, 3))
    axis.plot(range(10), np.sqrt(range(10)), marker="o")
    path = tmp_path / "f.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    before = path.stat().st_size
    with Image.open(path) as image:
        size = image.size
    assert compact_png(path) < before
    with Image.open(path) as image:
        assert image.mode == "P" and image.size == size


def test_the_landing_page_says_why_under_the_table_before_the_figure_and_notes():
    from helpers.report_text import LANDING, render

    answer = {
        "columns": ["answer", at.IMG_S],
        "rows": [["choose", "148 [140, 156] at batch 32"]],
        "below": [at.CHOICE_RULE, "Not in the table, as the study cannot run them: x."],
        "notes": ["A note."],
    }
    config = {**LANDING, "report_answer": answer, "report_answer_figure": ["data:image/png;x"]}
    landing = render("workflow.rst", config)
    table, why = landing.index("list-table::"), landing.index(at.CHOICE_RULE)
    assert table < why < landing.index("Not in the table") < landing.index(".. figure::")
    assert landing.index(".. figure::") < landing.index("A note.")
