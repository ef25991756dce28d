"""Which of the report's pages have something to show: the report lists a table's page, or
a figure drawn from a table, only when that table has a data row
(docs/decisions/report-pages-with-data.md)."""

from __future__ import annotations

import csv
from pathlib import Path


def has_data(*tables: str | Path) -> bool:
    """True when one of ``tables`` (tidy CSVs) has a row beneath its header, or is not
    written yet (`snakemake --report` reads them after the run; before it, a page is
    assumed to have data); False when every one holds its header only."""
    for table in map(Path, tables):
        if not table.is_file():
            return True
        with table.open(newline="", encoding="utf-8") as handle:
            rows = csv.reader(handle)
            next(rows, None)
            if any(any(cell.strip() for cell in row) for row in rows):
                return True
    return False
