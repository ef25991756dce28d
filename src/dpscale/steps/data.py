"""The report's data category: every tidy CSV of the study, copied into one folder (rule
data_tables in workflow/rules/report.smk). Standard library and the CSV bounds only: the
job runs last, after every other, and reads no table into pandas."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpscale.render.bounds import ROW_LIMIT, csv_rows, too_many_rows
from dpscale.render.pages import has_data

Files = Mapping[str, Any]

# digits the report's copy of a table keeps: more than any interval here resolves (the
# narrowest are about 0.1% of their value); tables/ keeps every digit
SIGNIFICANT = 6


def _significant(field: str) -> str:
    """A decimal written with more than SIGNIFICANT digits, shortened; anything else as is."""
    if "." not in field and "e" not in field.lower():
        return field
    try:
        value = float(field)
    except ValueError:
        return field
    shorter = f"{value:.{SIGNIFICANT}g}"
    return shorter if len(shorter) < len(field) else field


def write_significant(source: Path, target: Path) -> None:
    """A copy of a CSV with every long decimal at SIGNIFICANT significant digits."""
    with source.open(newline="", encoding="utf-8") as handle:
        rows = [[_significant(field) for field in row] for row in csv.reader(handle)]
    with target.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


# the data category's list of the tables it leaves out for their size (render.bounds)
LEFT_OUT = "left_out_of_report.csv"


def data_tables(inputs: Files, outputs: Files, params: Files) -> str:
    """Every tidy CSV of the study with a row into one folder, so ``snakemake --report x.zip``
    carries the data beside the pages that show it (a CSV outside tables/ is named by its
    folder), decimals to SIGNIFICANT digits; a CSV with its header only stays in tables/, out
    of the report. A CSV of more than ROW_LIMIT rows (render.bounds) stays in tables/ too,
    whole: LEFT_OUT lists each, with its rows and its path."""
    folder = Path(outputs["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    with_rows = [Path(source) for source in inputs["tables"] if has_data(source)]
    rows = {source: csv_rows(source) for source in with_rows}
    copied = [source for source in with_rows if not too_many_rows(rows[source])]
    for source in copied:
        name = (
            source.name if source.parent.name == "tables" else f"{source.parent.name}_{source.name}"
        )
        write_significant(source, folder / name)
    large = [source for source in with_rows if source not in copied]
    if large:
        with (folder / LEFT_OUT).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(["table", "rows", "bytes", "path", "why"])
            why = f"more than {ROW_LIMIT:,} rows, too many to embed: every row is at path"
            for source in large:
                size = source.stat().st_size
                writer.writerow([source.name, rows[source], size, str(source), why])
    empty = len(inputs["tables"]) - len(with_rows)
    return (
        f"[dpscale] {len(copied)} tidy tables for the report's data category ({empty} empty, "
        f"{len(large)} of more than {ROW_LIMIT:,} rows left in tables/: {LEFT_OUT})"
    )
