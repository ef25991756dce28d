"""The comparison of two studies as one self-contained page: the paragraph first, a figure of
every point's img/s ratio with its interval, then the tables (analysis.answers.compare)."""

from __future__ import annotations

import base64
import io
from html import escape

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or wanted

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from dpscale.plan.remedies import NO_REMEDY  # noqa: E402
from dpscale.render.html import STYLE, table_html  # noqa: E402

COLOURS = {"faster": "tab:green", "slower": "tab:red", "tie": "tab:gray", "no interval": "k"}


def _label(row: pd.Series) -> str:
    network = f" {row['network']}" if row["nodes"] > 1 else ""
    comm = f" {row['comm']}" if row["comm"] != NO_REMEDY else ""
    return (
        f"{row['strategy']} {row['model']} {row['mode']} n{row['nodes']}-d"
        f"{row['devices_per_node']}{network}{comm} b{row['batch_per_device']}"
    )


def ratio_figure_png(ratios: pd.DataFrame, name_a: str, name_b: str) -> bytes:
    """Each point's img/s ratio (B over A) with its 95% interval, coloured by its verdict."""
    height = max(2.0, 0.28 * len(ratios) + 1.2)
    figure, axis = plt.subplots(figsize=(8, height))
    for position, (_, row) in enumerate(ratios.iterrows()):
        axis.errorbar(
            row["ratio"],
            position,
            xerr=row["ratio_ci95"],
            fmt="o",
            color=COLOURS.get(row["verdict"], "k"),
            capsize=3,
        )
    axis.axvline(1.0, color="k", linewidth=0.8)
    axis.set_yticks(range(len(ratios)), [_label(r) for _, r in ratios.iterrows()], fontsize=7)
    axis.invert_yaxis()
    axis.set_xlabel(f"img/s of {name_b} / img/s of {name_a} (95% interval)")
    axis.set_title("green: faster, red: slower, grey: tie (the interval holds 1)", fontsize=9)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _body(html_page: str) -> str:
    """The <h2>, note and table of a table_html page, without its head."""
    return html_page.split("<body>", 1)[1].split("</body>", 1)[0]


def compare_html(
    paragraph: str,
    ratios: pd.DataFrame,
    only: pd.DataFrame,
    fits: pd.DataFrame,
    links: pd.DataFrame,
    names: tuple[str, str],
    sides: pd.DataFrame | None = None,
) -> str:
    """The page: the title names both sides, the sides' table (folder, machine, commit,
    dates) under the paragraph, then the figure and the tables."""
    name_a, name_b = names
    title = f"{name_b} against {name_a}"
    figure = ""
    if not ratios.empty:
        png = base64.b64encode(ratio_figure_png(ratios, name_a, name_b)).decode()
        figure = f"<img alt='img/s ratio per point' src='data:image/png;base64,{png}'>"
    sections = [
        table_html(ratios, f"img/s per point measured in both ({name_b} over {name_a})"),
        table_html(fits, "Throughput laws fitted in both: v0 ratio, t_c change"),
        table_html(links, "All-reduce fits (alpha, beta) of links in both"),
        table_html(only, "Points measured in one study only (not compared)"),
    ]
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title>{STYLE}</head><body><h1>{escape(title)}</h1>"
        f"<p class='note'>{escape(paragraph)}</p>"
        + (_body(table_html(sides, "Which side is which")) if sides is not None else "")
        + figure
        + "".join(_body(section) for section in sections)
        + "</body></html>\n"
    )
