"""Published multi-GPU results predicted from a borrowed one-device profile (in rule
comm_model's job, steps.model): the cases file and the bucket timeline ->
tables/published_cases.csv, its page (the summary's sentences above every case) and the
landing page's one sentence. Nothing is measured.

``dpscale published FILE`` runs the same on any cases file outside a study: every bad field
one line, else the table printed, and with ``--out`` the step's own three files."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dpscale.analysis.answers import (
    published_check,
    published_intervals,
    published_series,
    published_summary,
)
from dpscale.analysis.answers.published_model import Profile
from dpscale.analysis.laws.commmodel.buckets import timelines
from dpscale.analysis.laws.conformal import Band
from dpscale.plan.cell import MODEL_KEY
from dpscale.plan.paths import WORKFLOW_ROOT
from dpscale.plan.published import DEFAULTS, cases_file_problems, published_files, read_cases
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
    """cases file + borrowed profile -> the table (each efficiency with its interval), its
    page led by the summary's sentences with the published series below, and the landing
    page's one sentence (``top``)."""
    table, lines, series = checked(inputs["cases"], inputs["profile"])
    _write(table, lines, series, outputs)
    return f"[dpscale] published cases: {' '.join(lines)}"


def checked(
    cases_path: str | Path, profile_path: str | Path
) -> tuple[pd.DataFrame, list[str], pd.DataFrame]:
    """The cases predicted, each efficiency row with its leave-one-source-out interval (the
    other sources: the file's own and the workflow's series), the summary's sentences, and
    the calibrated check of every series the two hold."""
    cases, found = read_cases(cases_path), profiles(profile_path)
    table = published_check.check(cases, found)
    own = {case["id"] for case in cases}
    extra = [case for case in read_cases(str(WORKFLOW_ROOT / SERIES)) if case["id"] not in own]
    everything = pd.concat([table, published_check.check(extra, found)], ignore_index=True)
    rows = published_intervals.held_out(
        published_intervals.efficiency_rows([*cases, *extra], everything)
    )
    mine = rows[rows["id"].isin(own)]
    table = table.merge(
        mine[["id", "lo", "hi", "inside"]].rename(
            columns={"lo": "interval_lo", "hi": "interval_hi", "inside": "inside_interval"}
        ),
        on="id",
        how="left",
    )
    series = published_series.series_table([*cases, *extra], everything)
    lines = [
        *published_summary.summary_lines(table, shown_path(profile_path)),
        published_intervals.interval_line(mine),
        published_series.verdict_line(series),
        *_own_record(cases, table, extra),
    ]
    return table, lines, series


def _own_record(cases: list, table: pd.DataFrame, extra: list) -> list[str]:
    """The given file's own series' record apart, where the workflow's series file adds
    others to it (``extra``: its cases the given file does not hold; none where the given
    file is that series file itself)."""
    if not extra:
        return []
    own = published_series.series_table(cases, table)
    if own.empty:
        return []
    return [f"This file's own series alone: {published_series.record_words(own)}."]


def _write(table: pd.DataFrame, lines: list[str], series: pd.DataFrame, outputs: Files) -> None:
    """The step's three outputs: the table, its summary sentences and its page."""
    write(table, outputs["table"])
    write_lines([published_summary.landing_line(table)], outputs["top"])
    title = f"Published multi-GPU results, predicted ({published_check.KIND})"
    page = published_html(table, lines, title, series)
    Path(outputs["html"]).write_text(page, encoding="utf-8")


# the printed table's columns (every column is in the CSV)
SHOWN = ("id", "link", "predicted", "published", "error_points", "error_pct", "status")
# what --out writes, named as the study's tables/ names them
OUT_FILES = {
    "table": "published_cases.csv",
    "top": "published_cases_top.json",
    "html": "published_cases.html",
}


def table_text(table: pd.DataFrame) -> str:
    """The table as a terminal shows it: one row per case, then each case's metric, compute,
    assumptions and reason."""
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        lines = [table[list(SHOWN)].round(2).to_string(index=False), ""]
    for row in table.itertuples():
        lines.append(f"{row.id}: {row.metric}\n  compute: {row.compute_source}")
        lines.append(f"  assumptions: {row.assumptions if row.status != 'not predicted' else ''}")
        if row.reason:
            lines.append(f"  reason: {row.reason}")
    return "\n".join(lines)


def published_file(
    cases: str | Path, profile: str | Path | None = None, out: str | Path | None = None
) -> str:
    """``dpscale published``: a cases file checked (every bad field one line, raised as
    SystemExit) and predicted over ``profile`` (default: the workflow's own); the printed
    table and summary; the step's three files under ``out`` where given."""
    problems = cases_file_problems(cases, str(cases))
    if problems:
        raise SystemExit("\n".join(f"dpscale: {line}" for line in problems))
    profile = profile or WORKFLOW_ROOT / DEFAULTS["profile"]
    table, lines, series = checked(cases, profile)
    text = [table_text(table), "", *lines]
    if out:
        outputs = {name: Path(out) / file for name, file in OUT_FILES.items()}
        _write(table, lines, series, outputs)
        text.append(f"dpscale: wrote {outputs['html']} and its table")
    return "\n".join(text)


# -- the band a link-only prediction carries (docs/decisions/published-conformal-intervals.md)

SERIES = "studies/published/series.yaml"


def interval_table() -> pd.DataFrame:
    """Every published case with an efficiency (the workflow's own cases and series, its
    default profile): link-only, published and its leave-one-source-out interval."""
    files = published_files({})
    cases = [*read_cases(files["cases"]), *read_cases(str(WORKFLOW_ROOT / SERIES))]
    check = published_check.check(cases, profiles(files["profile"]))
    return published_intervals.held_out(published_intervals.efficiency_rows(cases, check))


@functools.lru_cache(maxsize=1)
def published_bands() -> dict[str, tuple[Band, str, str]]:
    """Per scale group (published_intervals.SCALES), the 80% band of the published sources'
    residuals from their link-only predictions (the pooled one where the group holds too
    few sources), the words saying what it stands on, and its leave-one-source-out
    coverage in short; under POOLED, the band over every group."""
    table = interval_table()
    bands = {}
    for found in published_intervals.scale_summaries(table).to_dict("records"):
        band = Band(found["band_lo_points"], found["band_hi_points"], found["cases"])
        words = published_intervals.band_words(found)
        bands[found["scale"]] = (band, words, f"coverage {found['inside']} of {found['judged']}")
    everything = published_intervals.coverage_summary(table)
    pooled = {**everything, "scale": "of any scale", "pooled": False}
    band = Band(everything["band_lo_points"], everything["band_hi_points"], everything["cases"])
    coverage = f"coverage {everything['inside']} of {everything['judged']}"
    bands[published_intervals.POOLED] = (band, published_intervals.band_words(pooled), coverage)
    return bands


@functools.lru_cache(maxsize=1)
def series_record() -> str:
    """How the calibrated law fared on the workflow's published series (their frozen
    protocol, docs/decisions/calibrated-published-series.md), for a calibrated prediction."""
    files = published_files({})
    series = read_cases(str(WORKFLOW_ROOT / SERIES))
    check = published_check.check(series, profiles(files["profile"]))
    return published_series.record_words(published_series.series_table(series, check))
