"""One colour per strategy in every figure (render.palette), and legends under the data
area: read from the figures' own artists."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb

from dpscale.registry import STRATEGIES
from dpscale.render import mfu_plot, plots
from dpscale.render.palette import strategy_colours

REGISTERED = list(STRATEGIES)


def test_every_registered_strategy_has_a_colour_of_its_own_far_from_the_others():
    colours = strategy_colours(REGISTERED)
    assert len(set(colours.values())) == len(REGISTERED)
    for (a, first), (b, second) in itertools.combinations(colours.items(), 2):
        distance = float(np.linalg.norm(np.subtract(first, second)))
        # orange against vermillion is 0.23 apart: closer than this reads as one colour
        assert distance >= 0.3, (a, b, distance)


def test_a_strategy_keeps_its_colour_whichever_others_a_study_measured():
    everyone = strategy_colours(REGISTERED)
    for subset in itertools.combinations(REGISTERED, 2):
        mine = strategy_colours(REGISTERED, subset)
        assert all(mine[name] == everyone[name] for name in subset)
    outside = strategy_colours(REGISTERED, ["zz-imported", "aa-imported"])
    assert outside["aa-imported"] not in everyone.values() or len(REGISTERED) >= 9


def cells(strategies: list[str]) -> pd.DataFrame:
    rows = [
        {
            "strategy": strategy,
            "model": "resnet18-imagenet64-c10",
            "mode": "synthetic",
            "status": "ok",
            "world_size": 1,
            "nodes": 1,
            "network": "host",
            "comm": "none",
            "batch_per_device": batch,
            "img_s_mean": 30.0 + batch + index,
            "img_s_ci95": 2.0,
            "mfu": 0.1 + 0.01 * index,
        }
        for index, strategy in enumerate(strategies)
        for batch in (8, 16, 32)
    ]
    return pd.DataFrame(rows)


def kept_figure(monkeypatch, module, draw) -> object:
    kept = []
    monkeypatch.setattr(module.plt, "close", kept.append)
    draw()
    return kept[0]


def throughput_figure(table: pd.DataFrame, tmp_path, monkeypatch) -> object:
    """The throughput figure of ``table``'s cells, without fitted laws, kept open."""
    no_fits = pd.DataFrame(columns=table.columns).assign(v0=[], t_c=[])
    draw = lambda: plots.throughput_figure(table, no_fits, tmp_path / "t.png", REGISTERED)  # noqa: E731
    return kept_figure(monkeypatch, plots, draw)


def line_colours(figure) -> dict[str, tuple]:
    """Each legend entry's colour, by its label's strategy (the text before the comma)."""
    found = {}
    for axis in figure.axes:
        legend = axis.get_legend()
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            name = text.get_text().split(",")[0]
            if name in STRATEGIES and hasattr(handle, "get_color"):
                found[name] = tuple(round(c, 3) for c in to_rgb(handle.get_color()))
    return found


def test_the_throughput_and_mfu_figures_colour_each_strategy_as_the_palette(tmp_path, monkeypatch):
    measured = ["torch-ddp", "mxnet-device", "horovod-tf"]
    expected = {
        name: tuple(round(c, 3) for c in colour)
        for name, colour in strategy_colours(REGISTERED).items()
        if name in measured
    }
    table = cells(measured)
    throughput = throughput_figure(table, tmp_path, monkeypatch)
    assert line_colours(throughput) == expected
    mfu = kept_figure(
        monkeypatch, plots, lambda: mfu_plot.mfu_figure(table, tmp_path / "m.png", REGISTERED)
    )
    assert line_colours(mfu) == expected


def test_legends_sit_under_the_data_area_and_the_panel_keeps_its_width(tmp_path, monkeypatch):
    table = cells(REGISTERED)
    figure = throughput_figure(table, tmp_path, monkeypatch)
    renderer = figure.canvas.get_renderer()
    for axis in figure.axes:
        panel = axis.get_window_extent(renderer)
        legend = axis.get_legend().get_window_extent(renderer)
        assert legend.y1 <= panel.y0, "the legend overlaps the data area"
        # the panel keeps most of the 8-inch width it was given (a legend beside it took 60%)
        assert panel.width >= 0.75 * figure.get_figwidth() * figure.dpi
