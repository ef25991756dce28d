"""Self-contained HTML tables for the Snakemake report (it shows HTML inline, CSV only as a
download). A table of more rows than the report shows (render.bounds.ROW_LIMIT) is shown
summarised, under a line naming its row count and the CSV that holds every row."""

from __future__ import annotations

import html
import re
from collections.abc import Collection
from pathlib import Path

import pandas as pd

from dpscale.render.bounds import cell_text, rows_line, summarise, too_many_rows

STYLE = """
<style>
body { font-family: sans-serif; font-size: 13px; margin: 1em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.t, th.t { text-align: left; }
tr.status-skipped td { color: #777; }
tr.status-failed td, tr.status-oom td { background: #fde8e8; }
p.note { max-width: 60em; }
</style>
"""


def _body(frame: pd.DataFrame, text: Collection[str] | None = None) -> str:
    """The table's rows; a cell is left-aligned where it is a string (or its column is in
    ``text``)."""
    left = [None if text is None else c in text for c in frame.columns]  # None: by type
    body = []
    for row in frame.itertuples(index=False):
        status = str(getattr(row, "status", "") or "")
        # the report embeds every page: no markup a cell does not need (numbers align right;
        # HTML closes a cell at the next one and a row at the next row)
        cells = "".join(
            f"<td{' class=t' if (isinstance(v, str) if t is None else t) else ''}>"
            f"{html.escape(cell_text(v))}"
            for v, t in zip(row, left, strict=True)
        )
        # a status class only for one status ("ok 95, failed 5" is a summary's count)
        kind = f" class='status-{html.escape(status)}'" if re.fullmatch(r"[\w-]+", status) else ""
        body.append(f"<tr{kind}>{cells}")
    return "".join(body)


def table_html(
    frame: pd.DataFrame,
    title: str,
    note: str = "",
    source: str | Path | None = None,
    raw: pd.DataFrame | None = None,
) -> str:
    """A page of the table. ``source``: the CSV with every row; given, a table of more than
    ROW_LIMIT rows is shown as its summary (render.bounds.summarise) of ``raw`` (the table
    before it was formatted as text; default ``frame``), under a line saying so."""
    text: set[str] | None = None
    line = ""
    if source is not None and too_many_rows(len(frame)):
        whole = raw if raw is not None else frame
        frame, keys, text = summarise(whole)
        line = f"<p class='note'><b>{html.escape(rows_line(len(whole), keys, source))}</b></p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    empty = "<p>No rows.</p>" if frame.empty else ""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>{STYLE}</head>"
        f"<body><h2>{html.escape(title)}</h2><p class='note'>{html.escape(note)}</p>{line}{empty}"
        f"<table><thead><tr>{head}</tr></thead><tbody>{_body(frame, text)}</tbody></table>"
        "</body></html>\n"
    )


def write_table_html(
    frame: pd.DataFrame,
    path: str | Path,
    title: str,
    note: str = "",
    source: str | Path | None = None,
    raw: pd.DataFrame | None = None,
) -> None:
    """The table's page at ``path``; above ROW_LIMIT rows, the summary of ``raw`` (default
    ``frame``) naming ``source`` (default: the CSV beside the page, tables/<name>.csv for
    tables/<name>.html)."""
    source = Path(path).with_suffix(".csv") if source is None else source
    Path(path).write_text(table_html(frame, title, note, source, raw), encoding="utf-8")


def table_with_lines(
    frame: pd.DataFrame, title: str, lines: list[str], source: str | Path | None = None
) -> str:
    """A table page led by sentences, one list item each (a summary above its rows)."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    page = table_html(frame, title, source=source)
    return page.replace("<table>", f"<ul class='summary'>{items}</ul><table>", 1)
