"""The findings page: the top findings as sentences above the full table, every value as
text ("not measured" where the study has no number)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from pathlib import Path

import pandas as pd

from dpscale.analysis.answers.cost import NO_EPOCH, NO_PRICE, Prices, money
from dpscale.analysis.answers.verdicts import NOT_MEASURED, top_findings
from dpscale.plan.columns import LAYOUT
from dpscale.render.bounds import too_many_rows
from dpscale.render.html import table_html

MONEY_COLUMNS = (
    "price_per_node_hour",
    "cost_per_1000_images",
    "cost_per_epoch",
    "run_cost",
    "cost_to_target",
)


def _display(value: object, column: str) -> str:
    """A cell of the findings page: numbers rounded, missing numbers "not measured"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NOT_MEASURED
    if isinstance(value, float) and math.isinf(value):
        if column.endswith("_ci95"):
            return "unbounded"
        return "any run length" if column == "reference_first_below_images" else "never"
    if isinstance(value, float):
        if column.startswith("accuracy_delta"):
            return (
                f"{100 * value:+.1f} pts"
                if not column.endswith("ci95")
                else f"± {100 * value:.1f} pts"
            )
        if column == "efficiency":
            return f"{100 * value:.0f}%"
        if column == "efficiency_ci95":
            return f"± {100 * value:.0f}%"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def display_table(findings: pd.DataFrame) -> pd.DataFrame:
    """The findings with every value as text, ready for an HTML table; the verdict right
    after the layout, the numbers behind it after that."""
    shown = findings.drop(columns=["cells", "cells_ok", "contaminated"], errors="ignore")
    order = [*LAYOUT, "verdict"]
    shown = shown[[*order, *(c for c in shown.columns if c not in order)]]
    text = pd.DataFrame(
        {column: [_display(v, column) for v in shown[column]] for column in shown.columns}
    )
    if "currency" in shown.columns:  # money without a price says so, not "not measured"
        unpriced = shown["currency"].eq(NO_PRICE).to_numpy()
        for column in set(MONEY_COLUMNS) & set(text.columns):
            text.loc[unpriced, column] = NO_PRICE
    return text


def findings_html(
    findings: pd.DataFrame,
    title: str,
    first: Sequence[str] = (),
    source: str | Path | None = None,
) -> str:
    """A self-contained page: the top findings as sentences (after ``first``: the findings
    per strategy and model, such as a study's image folder), then the full table; with more
    rows than the report shows, its summary (render.bounds), naming ``source``."""
    lines = [*first, *top_findings(findings, limit=20)]
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    raw = findings.drop(columns=["contaminated"], errors="ignore")
    page = table_html(display_table(findings), title, source=source, raw=raw)
    if source is None or not too_many_rows(len(findings)):  # the verdict column is shown
        page = page.replace("</head>", f"{VERDICT_STYLE}</head>", 1)
    return page.replace("<table>", f"<ul class='findings'>{items}</ul><table>", 1)


VERDICT_STYLE = (
    f"<style>td:nth-child({len(LAYOUT) + 1}) {{ min-width: 28em; text-align: left; }}"
    " ul.findings li { margin-bottom: 0.4em; max-width: 70em; }</style>"
)


def cost_display(costs: pd.DataFrame, prices: Prices | None) -> pd.DataFrame:
    """The cost table as text: money in the study's currency or "no price given", times
    and node-hours rounded, a run that never pays off "never"."""
    shown = costs.drop(columns=["currency"], errors="ignore")
    out = {}
    for column in shown.columns:
        if column in MONEY_COLUMNS:
            out[column] = [money(v, prices) for v in shown[column]]
        elif column == "epoch_s" and (prices is None or not prices.epoch_images):
            out[column] = [NO_EPOCH for _ in shown[column]]
        else:
            out[column] = [_display(v, column) for v in shown[column]]
    return pd.DataFrame(out)


def cost_note(prices: Prices | None) -> str:
    if prices is None:
        return (
            "No prices in this study's config (add a cost section: currency, node_hour, "
            "source, date): node-hours are shown, money reads 'no price given'."
        )
    deadline = f"; deadline {prices.deadline_hours} h" if prices.deadline_hours else ""
    nodes = ", ".join(f"{kind} node {price:g}" for kind, price in prices.node_hour.items())
    networks = ", ".join(f"{net} +{price:g}" for net, price in prices.network_hour.items())
    return (
        f"Prices in {prices.currency} per node-hour: {nodes}; network surcharges: "
        f"{networks or 'none'}. Source: {prices.source}, {prices.date}. One row per "
        "layout and per-device batch (ok synthetic cells, repeats averaged). startup_paid_s: "
        "launch to the end of the first step. run: start-up plus run_epochs epochs of "
        f"{prices.epoch_images or 'unknown'} images{deadline}. break_even_images_vs_1: the "
        "run length (images) from which this layout, start-up included, finishes before one "
        "device at the same per-device batch; run_speedup_vs_1: one device's run time over this "
        "layout's, start-up included."
    )


def cost_html(
    costs: pd.DataFrame,
    prices: Prices | None,
    title: str,
    to_target: pd.DataFrame | None = None,
    source: str | Path | None = None,
) -> str:
    """The cost table; in training studies, DAWNBench's cost to the target accuracy after it.
    With more rows than the report shows, its summary (render.bounds), naming ``source``."""
    shown = cost_display(costs, prices)
    page = table_html(shown, title, cost_note(prices), source=source, raw=costs)
    if to_target is None or to_target.empty:
        return page
    shown = cost_display(to_target, prices).to_html(index=False, border=0)
    heading = "<h2>Cost to the target accuracy (time to accuracy x nodes x price)</h2>"
    return page.replace("</body>", f"{heading}{shown}</body>", 1)


def remedies_html(table: pd.DataFrame, accuracy: pd.DataFrame, lines: list[str], title: str) -> str:
    """The remedies beside no remedy, the findings in words first; their accuracy cost after."""
    note = (
        " ".join(lines)
        or "No remedy cell across processes was measured (config comm: its default is none)."
    )
    if table.empty:  # the report says why, not "No rows"
        table = pd.DataFrame({"remedies": ["no remedy cell across processes was measured"]})
    page = table_html(table, title, note)
    if accuracy.empty:
        return page
    shown = accuracy.to_html(index=False, border=0)
    heading = "<h2>Accuracy cost: final accuracy against the same training without a remedy</h2>"
    return page.replace("</body>", f"{heading}{shown}</body>", 1)
