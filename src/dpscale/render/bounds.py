"""How much of a table or a figure the report embeds: one rule for every page (issue 78: the
report's HTML at most 10 MB at 10,000 cells, built in at most 5 minutes).

Tables: a table of more than ROW_LIMIT rows is shown on its page as a summary, one row per
group of what ran and where (KEYS, at most GROUP_LIMIT groups) with its number of rows, the
median [min, max] of each number and the count of each value of a few-valued text column,
under one line that gives the table's row count and the CSV holding every row. The report's
data category leaves such a table's CSV out and lists it (its rows and path) instead;
tables/ keeps every table whole. Figures: a figure that would draw more than MARK_LIMIT
series (lines, bars, dots) in a panel, or more than PANEL_LIMIT panels, pools them (each
figure says how in its title).

The limits sit above everything the default study (42 cells) and the ~100-cell scale study
draw (at most 306 rows on a page, 650 in a CSV, 48 series in a panel, 16 panels): their pages
and figures are whole.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from dpscale.plan.columns import NETWORK, RUN, SPREAD

# a table's rows on a page (and in the data category) at most; above, a summary
ROW_LIMIT = 1_000
# the summary's groups at most: KEYS are added in order while the groups stay within it
GROUP_LIMIT = 100
# the columns a summary groups by, in this order, where a table has them
KEYS = (*RUN, "mode", "scheme", NETWORK, *SPREAD, "overlap", "kind")
# a text column of at most this many values is counted per group ("ok 95, failed 5"); one
# of more values is shown where it has one value in each group, else left out
COUNTED = 6
# a table without any of KEYS and no few-valued text column: its first rows
HEAD_ROWS = 100
# series (lines, bars, dots) in one panel of a figure, and panels in one figure, at most
MARK_LIMIT = 60
PANEL_LIMIT = 24


def too_many_rows(rows: int) -> bool:
    return rows > ROW_LIMIT


def too_many_marks(marks: int) -> bool:
    return marks > MARK_LIMIT


def too_many_panels(panels: int) -> bool:
    return panels > PANEL_LIMIT


def csv_rows(path: str | Path) -> int:
    """A CSV's data rows (its header not counted; a quoted line break is one row)."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        rows = csv.reader(handle)
        next(rows, None)
        return sum(1 for _ in rows)


def cell_text(value: object) -> str:
    """A value as a page shows it: floats to 4 significant digits (thousands with one
    decimal), NaN and None empty."""
    if isinstance(value, float):
        if value != value:  # NaN
            return ""
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if abs(value) >= 100:
            return f"{value:,.1f}"
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def summary_keys(frame: pd.DataFrame) -> list[str]:
    """KEYS the table has, in order, each added while the groups stay within GROUP_LIMIT;
    without any, its text columns of at most COUNTED values, the same way."""
    candidates = [key for key in KEYS if key in frame.columns]
    if not candidates:
        candidates = [
            column
            for column in frame.columns
            if not _numeric(frame[column]) and frame[column].nunique(dropna=False) <= COUNTED
        ]
    keys: list[str] = []
    for key in candidates:
        groups = len(frame[[*keys, key]].drop_duplicates())
        if groups <= GROUP_LIMIT:
            keys.append(key)
    return keys


def _number(value: float) -> str:
    """A summary's number: a whole one as an integer, any other as a page shows it."""
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return cell_text(value)


def _numbers(values: pd.Series) -> str:
    known = values.dropna().astype(float)
    if known.empty:
        return ""
    low, high = known.min(), known.max()
    if low == high:
        return _number(low)
    return f"{_number(known.median())} [{_number(low)}, {_number(high)}]"


def _counts(values: pd.Series) -> str:
    counts = values.fillna("").astype(str).value_counts()
    if len(counts) == 1:
        return str(counts.index[0])
    return ", ".join(f"{value or 'none'} {count}" for value, count in counts.items())


def summarise(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str], set[str]]:
    """The table grouped by ``summary_keys``: the keys, ``rows``, then each other column as
    the median [min, max] of its numbers, the counts of its values (a text column of at
    most COUNTED values), or its value where it has one in every group (left out
    otherwise). Returns the summary, its keys (none: the first HEAD_ROWS rows) and the
    columns that read as text."""
    keys = summary_keys(frame)
    if not keys:
        head = frame.head(HEAD_ROWS)
        return head, [], {c for c in head.columns if not _numeric(head[c])}
    grouped = frame.groupby(keys, sort=True, dropna=False)
    out = grouped.size().rename("rows").reset_index()
    text = {key for key in keys if not _numeric(frame[key])}
    for column in frame.columns:
        if column in keys:
            continue
        values = frame[column]
        if _numeric(values):
            out[column] = grouped[column].agg(_numbers).to_numpy()
        elif values.nunique(dropna=False) <= COUNTED:
            out[column] = grouped[column].agg(_counts).to_numpy()
            text.add(column)
        elif (grouped[column].nunique(dropna=False) <= 1).all():
            out[column] = grouped[column].first().to_numpy()
            text.add(column)
    return out, keys, text


def rows_line(rows: int, keys: Sequence[str], source: str | Path) -> str:
    """The line above a summarised table: how many rows the table has and where they are."""
    if keys:
        shown = (
            f"one row per {', '.join(keys)} with its number of rows and, for each number, "
            "the median [min, max] over those rows"
        )
    else:
        shown = f"its first {HEAD_ROWS:,} rows"
    return (
        f"This table has {rows:,} rows, more than the {ROW_LIMIT:,} a page of the report "
        f"shows: below, {shown}. Every row is in {source}."
    )
