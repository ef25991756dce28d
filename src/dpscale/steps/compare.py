"""Two studies' tables -> their comparison (analysis.answers.compare): tables and one page. Run by
``dpscale compare A B`` and by the workflow's ``compare`` rule."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.analysis.answers import compare as cmp
from dpscale.plan.user_files import Unreadable
from dpscale.render.compare_page import compare_html
from dpscale.steps.io import read_given, write

Files = Mapping[str, Any]


def study_tables(folder: str | Path, name: str | None = None) -> cmp.Study:
    """A study's results folder (``<results_dir>/<study>``) as the comparison reads it; one
    clear line where it has no cells table yet."""
    folder = Path(folder)
    tables = folder / "tables"
    if not (tables / "cells.csv").is_file():
        raise SystemExit(
            f"dpscale: compare: {folder} has no tables/cells.csv; give a study's results "
            "folder (results/<study>) after its analysis ran"
        )
    return cmp.Study(
        name=name or folder.name,
        cells=_table(tables / "cells.csv"),
        fits=_table(tables / "fits.csv", optional=True),
        comm_fits=_table(tables / "comm_fits.csv", optional=True),
        folder=str(folder.resolve()),
    )


def _table(path: Path, optional: bool = False) -> pd.DataFrame:
    """A study table a person points compare at, read within the bound for a table (two
    folders from anywhere: a wrong or huge file is one line naming it, not a traceback)."""
    if optional and not path.is_file():
        return pd.DataFrame()
    try:
        return read_given(path)
    except Unreadable as error:
        if optional and _blank(path):  # a table written without a single column
            return pd.DataFrame()
        raise SystemExit(f"dpscale: compare: {path} {error}") from None


def _blank(path: Path) -> bool:
    with open(path, "rb") as handle:
        return not handle.read(64).strip()


def compare(inputs: Files, outputs: Files, params: Files) -> str:
    """params a: the reference study's results folder; b: the compared one, else the study
    whose tables/cells.csv is the input (the rule's, so that it waits for them); labels:
    ``{"A": ..., "B": ...}`` to name them (``--label``); outputs: ratios, only, fits, links,
    html (and sides, where given)."""
    a_folder = Path(params["a"])
    b_folder = Path(params.get("b") or Path(inputs["cells"]).parent.parent)
    name_a, name_b = cmp.side_names(a_folder.resolve(), b_folder.resolve(), params.get("labels"))
    a, b = study_tables(a_folder, name_a), study_tables(b_folder, name_b)
    ratios, only = cmp.point_ratios(a, b)
    ratios = cmp.ratio_table_sorted(ratios)
    fits, links = cmp.fit_changes(a, b), cmp.link_changes(a, b)
    sides = cmp.sides_table(a, b)
    paragraph = cmp.compare_paragraph(a, b, ratios, only, links)
    tables = {"ratios": ratios, "only": only, "fits": fits, "links": links, "sides": sides}
    for name, frame in tables.items():
        if name in outputs:
            write(frame, outputs[name])
    page = compare_html(paragraph, ratios, only, fits, links, (a.name, b.name), sides)
    Path(outputs["html"]).write_text(page, encoding="utf-8")
    return f"[dpscale] {paragraph}"
