"""The report's size at scale (issue 78; render.bounds): a page shows a table whole up to
ROW_LIMIT rows and a summary above, with a line naming its row count and its CSV; the data
category leaves such a CSV out and lists it; the landing table drops the layouts slower than
their model's choice; a figure with more series or panels than it can draw apart pools them.
"""

from __future__ import annotations

import itertools
import json
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from conftest import REPO
from dpscale.analysis.answers.answer_table import CHOOSE, SLOWER, TIE
from dpscale.plan.columns import MODE_LAYOUT
from dpscale.render import answer_cost, plots, pooled_plots, startup_plot
from dpscale.render.bounds import (
    GROUP_LIMIT,
    MARK_LIMIT,
    ROW_LIMIT,
    csv_rows,
    rows_line,
    summarise,
    summary_keys,
)
from dpscale.render.findings_page import cost_html
from dpscale.render.html import table_html, write_table_html
from dpscale.render.predictions_page import predictions_html
from dpscale.steps.data import LEFT_OUT, data_tables
from dpscale.steps.findings import landing_rows

STRATEGIES = ["horovod-tf", "mxnet-dist", "torch-ddp"]


def per_cell(rows: int) -> pd.DataFrame:
    """A per-cell table of ``rows`` rows: what ran, where, its status and numbers."""
    index = np.arange(rows)
    return pd.DataFrame(
        {
            "cell_id": [f"cell-{i}" for i in index],
            "strategy": [STRATEGIES[i % 3] for i in index],
            "model": "resnet18",
            "network": np.where(index % 2 == 0, "host", "10gbit"),
            "nodes": np.where(index % 2 == 0, 1, 2),
            "status": np.where(index % 10 == 0, "failed", "ok"),
            "img_s_mean": 100.25 + index,
            "batch_per_device": 2 ** (3 + index % 4),
        }
    )


def body_rows(page: str) -> int:
    return page.split("<tbody>", 1)[1].count("<tr")


def test_a_table_of_at_most_row_limit_rows_is_shown_whole_as_before(tmp_path):
    frame = per_cell(ROW_LIMIT)
    path = tmp_path / "cells.html"
    write_table_html(frame, path, "Every cell")
    page = path.read_text()
    assert body_rows(page) == ROW_LIMIT
    assert "This table has" not in page
    assert page == table_html(frame, "Every cell")  # what the page was without a source


def test_a_larger_table_is_summarised_under_a_line_naming_its_rows_and_csv(tmp_path):
    frame = per_cell(ROW_LIMIT + 1)
    path = tmp_path / "cells.html"
    write_table_html(frame, path, "Every cell")
    page = path.read_text()
    line = rows_line(
        ROW_LIMIT + 1, ["strategy", "model", "network", "nodes"], path.with_suffix(".csv")
    )
    assert line in page
    assert f"This table has {ROW_LIMIT + 1:,} rows" in page and str(tmp_path / "cells.csv") in page
    assert body_rows(page) == 3 * 2  # strategies x (host, 10gbit)
    assert "cell-5" not in page  # a column with a value per row is left out of the summary
    assert len(page) < 10_000


def test_a_summary_gives_each_group_its_rows_median_range_and_status_counts():
    frame = per_cell(2 * ROW_LIMIT)
    summary, keys, text = summarise(frame)
    assert keys == ["strategy", "model", "network", "nodes"]
    assert summary["rows"].sum() == len(frame)
    group = frame[(frame["strategy"] == "horovod-tf") & (frame["network"] == "host")]
    row = summary[(summary["strategy"] == "horovod-tf") & (summary["network"] == "host")].iloc[0]
    low, high, median = group["img_s_mean"].agg(["min", "max", "median"])
    assert row["img_s_mean"] == f"{median:,.1f} [{low:,.1f}, {high:,.1f}]"
    assert row["batch_per_device"] == "20 [8, 32]"  # this group: batches 8 and 32
    failed = int((group["status"] == "failed").sum())
    assert row["status"] == f"ok {len(group) - failed}, failed {failed}"
    assert {"strategy", "model", "network", "status"} <= text and "img_s_mean" not in text


def test_the_summary_adds_keys_only_while_the_groups_stay_within_the_limit():
    frame = per_cell(3 * ROW_LIMIT).assign(nodes=lambda f: f.index % (GROUP_LIMIT + 1))
    assert summary_keys(frame) == ["strategy", "model", "network"]
    assert len(summarise(frame)[0]) <= GROUP_LIMIT


def test_pages_of_text_cells_summarise_the_numbers_behind_them():
    cost = per_cell(ROW_LIMIT + 5).assign(
        devices_per_node=1,
        world_size=1,
        img_s=100.0,
        node_hours_per_1000_images=0.01,
        cost_per_1000_images=np.nan,
        currency="no price given",
    )
    page = cost_html(cost, None, "Cost", source="results/s/tables/cost.csv")
    assert f"This table has {ROW_LIMIT + 5:,} rows" in page
    assert "Every row is in results/s/tables/cost.csv." in page
    assert body_rows(page) <= GROUP_LIMIT
    assert "<td>0.01<" in page  # node-hours as numbers, not "no price given" text
    small = cost_html(cost.head(10), None, "Cost", source="results/s/tables/cost.csv")
    assert "This table has" not in small and body_rows(small) == 10


def test_the_predictions_page_names_predictions_csv_above_the_limit():
    predictions = pd.DataFrame(
        {
            "strategy": "torch-ddp",
            "model": "resnet18",
            "network": "10gbit",
            "nodes": np.arange(ROW_LIMIT + 1) % 4 + 1,
            "devices_per_node": 1,
            "batch_per_device": 32,
            "kind": "interpolates",
            "basis": "fit",
            "validated_by": "3%",
            "speedup": 1.5,
            "speedup_lo": 1.4,
            "speedup_hi": 1.6,
            "status": "ok",
        }
    )
    page = predictions_html(predictions, "Predictions")
    assert "Every row is in tables/predictions.csv." in page and body_rows(page) == 4


def write_csv(path, rows: int) -> None:
    path.write_text("a,b\n" + "".join(f"{i},0.123456789\n" for i in range(rows)))


def test_the_data_category_leaves_a_large_csv_in_tables_and_lists_it(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    write_csv(tables / "small.csv", ROW_LIMIT)
    write_csv(tables / "large.csv", ROW_LIMIT + 1)
    folder = tmp_path / "data"
    inputs = {"tables": [str(tables / "small.csv"), str(tables / "large.csv")]}
    data_tables(inputs, {"folder": str(folder)}, {})
    assert sorted(p.name for p in folder.iterdir()) == sorted(["small.csv", LEFT_OUT])
    assert csv_rows(folder / "small.csv") == ROW_LIMIT
    listed = pd.read_csv(folder / LEFT_OUT)
    assert listed.to_dict("records")[0] | {"why": ""} == {
        "table": "large.csv",
        "rows": ROW_LIMIT + 1,
        "bytes": (tables / "large.csv").stat().st_size,
        "path": str(tables / "large.csv"),
        "why": "",
    }
    assert csv_rows(tables / "large.csv") == ROW_LIMIT + 1  # the table itself untouched


def test_without_a_large_csv_the_data_category_lists_nothing(tmp_path):
    (tmp_path / "tables").mkdir()
    write_csv(tmp_path / "tables" / "small.csv", 3)
    inputs = {"tables": [str(tmp_path / "tables" / "small.csv")]}
    data_tables(inputs, {"folder": str(tmp_path / "d")}, {})
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["small.csv"]


def landing(rows: int) -> pd.DataFrame:
    answers = [CHOOSE, TIE, *[SLOWER] * (rows - 2)]
    return pd.DataFrame({"answer": answers, "layout": [f"layout {i}" for i in range(rows)]})


def test_the_landing_table_is_whole_up_to_the_limit_then_keeps_the_choice_and_ties():
    table = landing(ROW_LIMIT)
    shown, lines = landing_rows(table, "results/s/tables/findings.csv")
    assert shown is table and lines == []
    shown, lines = landing_rows(landing(ROW_LIMIT + 1), "results/s/tables/findings.csv")
    assert list(shown["answer"]) == [CHOOSE, TIE]
    assert lines == [
        f"The answer table has {ROW_LIMIT + 1:,} rows, more than the {ROW_LIMIT:,} the report "
        f"shows: the {ROW_LIMIT - 1:,} left out are layouts slower than their model's choice. "
        "Every layout's verdict: 0. Findings, and results/s/tables/findings.csv."
    ]


def many_layouts(networks: int = 4, nodes=(1, 2, 4, 8, 16), batches=(8, 16)) -> pd.DataFrame:
    """Ok synthetic cells: 3 strategies x devices per node 1-8 x nodes x networks x batches."""
    rows = []
    for strategy, devices, node, batch in itertools.product(
        STRATEGIES, (1, 2, 4, 8), nodes, batches
    ):
        for network in ["host"] if node == 1 else [f"net{n}" for n in range(networks)]:
            world = node * devices
            rows.append(
                {
                    "strategy": strategy,
                    "model": "resnet18",
                    "mode": "synthetic",
                    "status": "ok",
                    "comm": "none",
                    "nodes": node,
                    "network": network,
                    "devices_per_node": devices,
                    "world_size": world,
                    "batch_per_device": batch,
                    "img_s_mean": 50.0 * world * batch / (batch + 4),
                    "img_s_ci95": 1.0,
                }
            )
    return pd.DataFrame(rows)


NO_FITS = pd.DataFrame(
    columns=["model", "strategy", "world_size", "nodes", "network", "status", "v0", "t_c"]
)


@pytest.fixture
def drawn(monkeypatch):
    """The figures plots' and pooled_plots' save_with_legends were given: the figure's title,
    each shown axis's title and labelled series, and the figure's own legend's entries
    (none: 0)."""
    seen = []

    def keep(figure, path):
        title = figure._suptitle.get_text() if figure._suptitle is not None else ""
        axes = [
            (axis.get_title(), len(axis.get_legend_handles_labels()[1]))
            for axis in figure.axes
            if axis.get_visible()
        ]
        legend = len(figure.legends[0].get_texts()) if figure.legends else 0
        seen.append((title, axes, legend))
        plt.close(figure)

    for module in (plots, pooled_plots):
        monkeypatch.setattr(module, "save_with_legends", keep)
    return seen


def test_throughput_draws_each_layout_in_a_small_study(tmp_path, drawn):
    cells = many_layouts(networks=1, nodes=(1, 2))
    plots.throughput_figure(cells, NO_FITS, tmp_path / "t.png")
    assert drawn == [("", [("resnet18", 3 * 8)], 0)]  # strategies x layouts, legend below


def test_throughput_pools_nodes_and_networks_above_the_mark_limit(tmp_path, drawn):
    cells = many_layouts().pipe(lambda f: pd.concat([f, f.assign(model="resnet50")]))
    layouts = len(cells.drop_duplicates(["strategy", "world_size", "nodes", "network"]))
    assert layouts > MARK_LIMIT
    plots.throughput_figure(cells, NO_FITS, tmp_path / "t.png")
    [(title, axes, legend)] = drawn
    assert f"Up to {layouts:,} layouts a panel, more than {MARK_LIMIT}" in title
    assert "median img/s" in title
    series = 3 * cells["world_size"].nunique()  # strategies x device counts
    assert axes == [("resnet18", series), ("resnet50", series)] and legend == series
    assert series <= MARK_LIMIT


def test_speedup_pools_batches_above_the_mark_limit(tmp_path, drawn):
    cells = many_layouts(batches=(8, 16, 32, 64, 128))
    scaling = cells.assign(speedup=cells["world_size"] * 0.9, speedup_ci95=0.1)
    plots.speedup_figure(scaling, tmp_path / "s.png")
    [(title, axes, legend)] = drawn
    assert "median speedup over per-device batches" in title
    assert axes == [("resnet18", 3 * 5 + 1)]  # strategies x (one node, 4 networks), ideal
    assert legend == 3 * 5 + 1 <= MARK_LIMIT


def test_residuals_draw_boxes_above_the_row_limit_of_windows_in_a_panel(tmp_path, drawn):
    layouts = many_layouts().drop(columns=["img_s_mean", "img_s_ci95"])
    fitted = layouts.drop_duplicates(MODE_LAYOUT).assign(v0=100.0, t_c=0.01, status="ok")
    windows = pd.concat([layouts.assign(window=w) for w in range(3)], ignore_index=True)
    noise = 1 + 0.01 * np.sin(np.arange(len(windows)))
    windows["step_time_s"] = (windows["batch_per_device"] / 100.0 + 0.01) * noise
    assert len(windows) > ROW_LIMIT
    plots.residuals_figure(windows, fitted, tmp_path / "r.png")
    [(title, [(panel, _)], legend)] = drawn
    assert title.startswith(f"Up to {len(windows):,} windows a panel, more than {ROW_LIMIT:,}")
    assert panel == "resnet18" and legend == 3  # a box per strategy


def test_frameworks_draws_a_panel_per_model_above_the_panel_limit(tmp_path):
    path = tmp_path / "f.png"
    plots.framework_figure(many_layouts(), path)
    with Image.open(path) as image:
        width, height = image.size
    assert width < 4000 and height < 1000  # 68 panels of 450 px apart: 30,000 px wide


def test_startup_bars_pool_networks_then_models_above_the_mark_limit():
    cells = many_layouts()
    table = cells.drop_duplicates(["strategy", "nodes", "network", "devices_per_node"]).assign(
        **{column: 1.0 for column in startup_plot.PHASE_COLUMNS}, startup_s=7.0, startup_s_ci95=0.0
    )
    assert len(table) > MARK_LIMIT
    bars, words = startup_plot.pooled(table)
    assert len(bars) <= MARK_LIMIT and bars["layouts"].sum() == len(table)
    assert words.startswith(f"{len(table):,} layouts") and "networks" in words
    small = table[table["nodes"] <= 2]
    assert startup_plot.pooled(small) == (small, "")


def test_the_static_cost_figure_shows_each_layout_at_its_cheapest_batch_above_the_limit():
    cells = many_layouts(networks=1, batches=(8, 16, 32, 64))
    cost = cells.rename(columns={"img_s_mean": "img_s"}).assign(
        global_batch=cells["world_size"] * cells["batch_per_device"],
        node_hours_per_1000_images=lambda f: 1000 / f["img_s"] / 3600 * f["nodes"],
        cost_per_1000_images=np.nan,
        currency="no price given",
    )
    points, _ = answer_cost.cost_points(cost)
    assert points.groupby("group").size().max() > MARK_LIMIT
    spec = answer_cost.cost_chart(cost, "static").to_dict()
    [values] = spec["datasets"].values()
    per_group = pd.DataFrame(values).groupby("group")
    assert per_group.size().max() <= MARK_LIMIT
    assert (per_group["layout"].nunique() == per_group.size()).all()  # one dot a layout
    assert "yOffset" not in json.dumps(spec) and "cheapest" in json.dumps(spec["title"])
    assert len(answer_cost.cost_chart(cost, "interactive").to_dict()["datasets"]) == 1


def test_the_captions_give_the_row_limit():
    for name in ("data.rst", "cells.rst"):
        text = (REPO / "report" / name).read_text()
        assert re.search(rf"\b{ROW_LIMIT:,}\b", text), name


def test_residuals_strip_plot_draws_the_same_figure_on_a_rerun(tmp_path):
    """seaborn jitters the points with numpy's global generator: the figure is seeded, so
    the same windows give the same PNG, and the caller's generator is left where it was."""
    layouts = many_layouts(nodes=(1,)).drop(columns=["img_s_mean", "img_s_ci95"])
    fitted = layouts.drop_duplicates(MODE_LAYOUT).assign(v0=100.0, t_c=0.01, status="ok")
    windows = pd.concat([layouts.assign(window=w) for w in range(3)], ignore_index=True)
    windows["step_time_s"] = (windows["batch_per_device"] / 100.0 + 0.01) * (
        1 + 0.01 * np.sin(np.arange(len(windows)))
    )
    drawn = []
    for run, seed in enumerate((1, 2)):
        np.random.seed(seed)
        before = np.random.get_state()[1].copy()
        plots.residuals_figure(windows, fitted, tmp_path / f"r{run}.png")
        assert (np.random.get_state()[1] == before).all()
        drawn.append((tmp_path / f"r{run}.png").read_bytes())
    assert drawn[0] == drawn[1]
