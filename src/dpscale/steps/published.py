"""Published multi-GPU results predicted from a borrowed one-device profile (in rule
comm_model's job, steps.model): the cases file and the bucket timeline ->
tables/published_cases.csv, its page (the summary's sentences above every case) and the
landing page's one sentence. Nothing is measured."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.analysis.answers import published_check, published_summary
from dpscale.analysis.answers.published_model import Profile
from dpscale.analysis.laws.commmodel.buckets import timelines
from dpscale.plan.cell import MODEL_KEY
from dpscale.plan.paths import WORKFLOW_ROOT
from dpscale.plan.published import read_cases
from dpscale.plan.user_files import Unreadable
from dpscale.render.published_page import published_html
from dpscale.steps.io import read_given, write, write_lines

Files = Mapping[str, Any]


def shown_path(path: str | Path) -> str:
    """A path as a reader finds it: from the workflow's folder where it lies inside it."""
    resolved = Path(path).resolve()
    if resolved.is_relative_to(WORKFLOW_ROOT.resolve()):
        return resolved.relative_to(WORKFLOW_ROOT.resolve()).as_posix()
    return str(path)


def profiles(path: str | Path) -> list[Profile]:
    """The profile table's one-rank timelines, one per (model, precision), each with the
    words naming it in a row (its file is named once, in the summary)."""
    try:  # checked at plan time (plan.published): read within the same bound
        table = read_given(path)
    except Unreadable as error:
        raise SystemExit(f"dpscale: published_cases.profile: {path} {error}") from None
    for column, unknown in (("precision", ""), ("gpus", "")):
        if column not in table:
            table[column] = unknown  # a study's bucket_timeline.csv from before they existed
    table[["precision", "gpus"]] = table[["precision", "gpus"]].fillna("").astype(str)
    found = []
    # by precision, as plan.published checks the table (one strategy per model and
    # precision): a (model, precision) timed on several GPUs is one timeline naming them all
    for precision, rows in table.groupby("precision", sort=True):
        for (strategy, model), timeline in timelines(rows).items():
            match = MODEL_KEY.fullmatch(model)
            name = match["name"] if match else model
            timed = rows.loc[rows["model"] == model, "gpus"]
            gpus = " and ".join(sorted(set(timed) - {""})) or "device"
            batches = ", ".join(f"{batch:g}" for batch in timeline.batches)
            words = (
                f"compute shape borrowed from one {gpus} {name} "
                f"{precision or '(precision not recorded)'} {strategy} timeline "
                f"({len(timeline.share)} buckets, batch {batches})"
            )
            found.append(Profile(timeline, words, name, precision))
    if not found:
        raise SystemExit(f"dpscale: published_cases.profile: {path} holds no one-rank timeline")
    return found


def check_table(cases_path: str | Path, profile_path: str | Path) -> pd.DataFrame:
    """Every case of the cases file, checked (plan.published.read_cases) and predicted over
    the profile table (what the rule and benchmarks/published_check.py print)."""
    return published_check.check(read_cases(cases_path), profiles(profile_path))


def published_cases(inputs: Files, outputs: Files, params: Files) -> str:
    """cases file + borrowed profile -> the table, its page led by the summary's sentences,
    and the landing page's one sentence (``top``)."""
    table = check_table(inputs["cases"], inputs["profile"])
    lines = published_summary.summary_lines(table, shown_path(inputs["profile"]))
    write(table, outputs["table"])
    write_lines([published_summary.landing_line(table)], outputs["top"])
    title = f"Published multi-GPU results, predicted ({published_check.KIND})"
    Path(outputs["html"]).write_text(published_html(table, lines, title), encoding="utf-8")
    return f"[dpscale] published cases: {' '.join(lines)}"
