"""Self-contained HTML tables for the Snakemake report (it shows HTML inline, CSV only as a
download)."""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

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


def _format(value: object) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return ""
        if abs(value) >= 100:
            return f"{value:,.1f}"
        return f"{value:.4g}"
    return "" if value is None else str(value)


def table_html(frame: pd.DataFrame, title: str, note: str = "") -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.itertuples(index=False):
        status = getattr(row, "status", "")
        # the report embeds every page: no markup a cell does not need (numbers align right;
        # HTML closes a cell at the next one and a row at the next row)
        cells = "".join(
            f"<td{' class=t' if isinstance(v, str) else ''}>{html.escape(_format(v))}" for v in row
        )
        kind = f" class='status-{html.escape(str(status))}'" if status else ""
        body.append(f"<tr{kind}>{cells}")
    empty = "<p>No rows.</p>" if frame.empty else ""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>{STYLE}</head>"
        f"<body><h2>{html.escape(title)}</h2><p class='note'>{html.escape(note)}</p>{empty}"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></body></html>\n"
    )


def write_table_html(frame: pd.DataFrame, path: str | Path, title: str, note: str = "") -> None:
    Path(path).write_text(table_html(frame, title, note), encoding="utf-8")


def table_with_lines(frame: pd.DataFrame, title: str, lines: list[str]) -> str:
    """A table page led by sentences, one list item each (a summary above its rows)."""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    page = table_html(frame, title)
    return page.replace("<table>", f"<ul class='summary'>{items}</ul><table>", 1)
