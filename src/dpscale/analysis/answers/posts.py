"""The source posts side by side with this run.

A study preset carries the post's numbers as data (``reference:`` in its YAML, see
workflow/schemas/config.schema.yaml): each comparison names the post's value and unit, and
how to read the same quantity from one of this run's tables (table, column, row filter,
optional conversion).  Nothing about the posts is in this code.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from dpscale.analysis.results.rows import without_remedies
from dpscale.plan.columns import RUN

# the tables a comparison may read a value from: the schema's reference.comparisons[].run.table
# (tests/unit/test_posts.py checks the two lists agree)
RUN_TABLES = (
    "cells",
    "fits",
    "scaling",
    "break_even",
    "training_runs",
    "accuracy",
    "accuracy_delta",
    "time_to_accuracy",
    "remedies",
    "remedies_accuracy",
)

COLUMNS = [
    "quantity",
    "unit",
    "post_setup",
    "post_value",
    "run_strategy",
    "run_model",
    "run_value",
    "run_over_post",
    "run_rows",
    "note",
]


def _filtered(table: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    for column, wanted in where.items():
        if column not in table.columns:
            return table.iloc[0:0]
        table = table[table[column] == wanted]
    return table


def _converted(rows: pd.DataFrame, spec: dict[str, Any]) -> pd.Series:
    """The compared column, converted: numerator / value (e.g. images per epoch / img/s =
    seconds per epoch), times another column (e.g. seconds per epoch x epochs), times scale."""
    values = rows[spec["column"]].astype(float)
    if spec.get("numerator") is not None:
        values = spec["numerator"] / values
    if spec.get("times_column"):
        values = values * rows[spec["times_column"]].astype(float)
    return values * spec.get("scale", 1.0)


def _run_values(spec: dict[str, Any], tables: dict[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """One value per (strategy, model) of the rows the comparison selects; mean over the
    rest (repeats, seeds)."""
    table = tables.get(spec["table"], pd.DataFrame())
    if table.empty or spec["column"] not in table.columns:
        return []
    rows = _filtered(table, spec.get("where", {}))
    if "status" in rows.columns:
        rows = rows[rows["status"] == "ok"]
    rows = rows.assign(_value=_converted(rows, spec)).dropna(subset=["_value"])
    if rows.empty:
        return []
    group = [c for c in RUN if c in rows.columns]
    out = []
    for key, part in rows.groupby(group, sort=True) if group else [((), rows)]:
        named = dict(zip(group, key if isinstance(key, tuple) else (key,), strict=True))
        out.append(
            {
                "run_strategy": named.get("strategy"),
                "run_model": named.get("model"),
                "run_value": float(part["_value"].mean()),
                "run_rows": len(part),
            }
        )
    return out


def comparison_rows(
    comparison: dict[str, Any], tables: dict[str, pd.DataFrame]
) -> list[dict[str, Any]]:
    post_value = comparison.get("value")
    base = {
        "quantity": comparison["quantity"],
        "unit": comparison["unit"],
        "post_setup": comparison.get("post_setup", ""),
        "post_value": math.nan if post_value is None else float(post_value),
        "note": comparison.get("note", ""),
    }
    measured = _run_values(comparison["run"], tables)
    if not measured:
        return [{**base, "run_value": math.nan, "run_rows": 0, "run_over_post": math.nan}]
    return [
        {**base, **value, "run_over_post": value["run_value"] / base["post_value"]}
        for value in measured
    ]


def post_vs_run(reference: dict[str, Any] | None, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The post's numbers beside this run's, one row per comparison and matching strategy.
    The remedies' tables are read whole, every other table without the remedies' rows."""
    tables = {
        name: table if name.startswith("remedies") else without_remedies(table)
        for name, table in tables.items()
    }
    rows = []
    for comparison in (reference or {}).get("comparisons", []):
        rows += comparison_rows(comparison, tables)
    return pd.DataFrame(rows).reindex(columns=COLUMNS)


def page_note(reference: dict[str, Any] | None) -> str:
    if not reference:
        return "This study reproduces no post: its configuration has no reference section."
    return (
        f"Source: {reference['source']}. {reference.get('setup', '')} "
        "post_value is the post's number (empty where the post only shows a figure: see note); "
        "run_value is the same quantity read from this run's tables as the preset says "
        "(table, column, filter, conversion); 'not measured' where this run has no such cell. "
        "Different hardware: compare shapes and ratios, not absolute values."
    ).strip()


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """For the HTML page: a missing run value reads "not measured"; a post value the post only
    shows in a figure, and the ratio to it, stay empty (the note says what the figure shows)."""
    shown = table.astype(object)
    shown["run_value"] = shown["run_value"].where(table["run_value"].notna(), "not measured")
    return shown
