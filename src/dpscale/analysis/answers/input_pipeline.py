"""What a user's image folder costs: per layout, the synthetic cell's img/s beside the same
layout reading the folder through its framework's pipeline (mode folder) and that loader
alone, and which binds (the loader, the training step: device and network, or a tie);
and, per strategy and model, that verdict at the largest layout measured as a finding,
with the folder's own speed-up over one device beside the synthetic one."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpscale.analysis.answers.answer_table import UNRESOLVED
from dpscale.analysis.answers.verdicts import UNRESOLVED_FRACTION
from dpscale.analysis.laws.fits import intervals_overlap
from dpscale.analysis.laws.words import is_known, readable_model
from dpscale.analysis.results.rows import with_comm
from dpscale.plan.columns import NETWORK, NODES, RUN, SPREAD, WORLD_SIZE
from dpscale.plan.layout import Layout
from dpscale.plan.remedies import NO_REMEDY

LAYOUT_KEY = [*RUN, NETWORK, *SPREAD, "batch_per_device"]
COLUMNS = [
    *LAYOUT_KEY,
    "input_pipeline",
    "synthetic_img_s",
    "folder_img_s",
    "loader_alone_img_s",
    "folder_over_synthetic",
    "binds",
    "images_skipped",
]
LOADER, STEP, TIE = "the loader", "the training step (device and network)", "a tie"


def img_s_words(mean: float, half: float) -> str:
    """ "148 [141, 155] img/s"; "not measured" where there is no mean."""
    if not (isinstance(mean, float | int) and math.isfinite(mean)):
        return "not measured"
    if not (isinstance(half, float | int) and math.isfinite(half)):
        return f"{_number(mean)} img/s (no interval)"
    return f"{_number(mean)} [{_number(mean - half)}, {_number(mean + half)}] img/s"


def _number(value: float) -> str:
    """Three significant digits below 1,000, whole numbers with separators above."""
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


@dataclass(frozen=True)
class Rate:
    """An img/s mean with its 95% half-width (NaN: not measured) and the windows behind it."""

    mean: float = math.nan
    half: float = math.nan
    windows: float = math.nan

    @property
    def known(self) -> bool:
        return is_known(self.mean) and math.isfinite(self.mean)

    def too_wide(self) -> bool:
        """Wider than the report resolves (answer_table.UNRESOLVED_FRACTION of the mean)."""
        half = self.half if is_known(self.half) else math.inf
        return half > UNRESOLVED_FRACTION * abs(self.mean)

    def overlaps(self, other: Rate) -> bool:
        return intervals_overlap(self.mean, self.half, other.mean, other.half)

    def windows_to_resolve(self) -> int | None:
        """Windows per cell that would bring the interval within UNRESOLVED_FRACTION of the
        mean (a half-width shrinks as one over the root of the windows); None if unknown."""
        if not (is_known(self.windows) and is_known(self.half) and math.isfinite(self.half)):
            return None
        wanted = UNRESOLVED_FRACTION * abs(self.mean)
        return math.ceil(self.windows * (self.half / wanted) ** 2)

    def words(self) -> str:
        return img_s_words(self.mean, self.half)


def binding(folder: Rate, synthetic: Rate, loader: Rate, cell_says_loader: bool) -> tuple[str, str]:
    """Which binds a folder cell, and why, from the three intervals: the loader where
    reading the folder costs img/s (folder below synthetic data); the training step where
    the folder costs nothing the intervals tell and the loader alone delivers more than
    training takes; a tie where the loader alone delivers about what training takes; and
    unresolved where an interval too wide to tell overlaps. Without a synthetic cell of the
    layout, the cell's own check (the loader alone under 1.2x what training reached)."""
    if not synthetic.known:
        kind = LOADER if cell_says_loader else STEP
        return kind, "no synthetic cell of this layout: by the cell's own check"
    if not folder.overlaps(synthetic):
        if folder.mean < synthetic.mean:
            cost = f"reading the folder costs {1 - folder.mean / synthetic.mean:.0%} of the img/s"
            if loader.known and not loader.overlaps(synthetic) and loader.mean > synthetic.mean:
                cost += (
                    "; alone the loader delivers more than training takes, so it slows the "
                    "step by sharing the CPU with it"
                )
            return LOADER, cost
        return STEP, "the folder ran faster than synthetic data: nothing waits for the loader"
    wide = [r for r in (folder, synthetic) if r.too_wide()]
    if wide:
        return UNRESOLVED, _resolve(wide, "folder and synthetic img/s overlap")
    same = "the folder costs nothing the intervals tell (tie)"
    if not loader.known or (not loader.overlaps(synthetic) and loader.mean > synthetic.mean):
        return STEP, same
    if loader.too_wide():
        return UNRESOLVED, _resolve([loader], f"{same}; the loader alone overlaps training")
    return TIE, (
        f"{same}, but the loader alone delivers no more than training takes: a faster "
        "device or more devices per node would wait for it"
    )


def _resolve(wide: list[Rate], what: str) -> str:
    """What an unresolved verdict lacks and what would resolve it: more windows."""
    needed = [n for n in (r.windows_to_resolve() for r in wide) if n is not None]
    ran = [r.windows for r in wide if is_known(r.windows)]
    more = (
        f"about {max(needed)} windows per cell (measure.windows; these ran {min(ran):.0f}) "
        "would narrow it within half its value"
        if needed and ran
        else "more windows per cell (measure.windows) would narrow it"
    )
    return f"{what} and an interval is too wide to tell; {more}"


def _ok(cells: pd.DataFrame, mode: str) -> pd.DataFrame:
    return cells[(cells["mode"] == mode) & (cells["status"] == "ok") & (cells["comm"] == NO_REMEDY)]


def _cell_rate(row: Any, prefix: str) -> Rate:
    """One cell's rate (a row of cells.csv, as a dict or a series)."""
    return Rate(row[f"{prefix}_mean"], row[f"{prefix}_ci95"], row["windows"])


def pipeline_table(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per folder cell that ran, beside the synthetic cell of its layout (where
    measured); every img/s with its 95% interval."""
    if cells.empty or "mode" not in cells or "pipeline_img_s_mean" not in cells:
        return pd.DataFrame(columns=COLUMNS)
    folder = _ok(cells, "folder")
    synthetic = _ok(cells, "synthetic").set_index(LAYOUT_KEY)
    rows = []
    for row in folder.to_dict("records"):
        key = tuple(row[column] for column in LAYOUT_KEY)
        base = synthetic.loc[[key]].iloc[0] if key in synthetic.index else None
        s = _cell_rate(base, "img_s") if base is not None else Rate()
        f, loader = _cell_rate(row, "img_s"), _cell_rate(row, "pipeline_img_s")
        kind, why = binding(f, s, loader, row["bound_by"] == "loader")
        rows.append(
            {
                **dict(zip(LAYOUT_KEY, key, strict=True)),
                "input_pipeline": row["input_pipeline"],
                "synthetic_img_s": s.words(),
                "folder_img_s": f.words(),
                "loader_alone_img_s": loader.words(),
                "folder_over_synthetic": f.mean / s.mean if s.known else math.nan,
                "binds": f"{kind}; {why}",
                "images_skipped": row["images_skipped"],
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def _pooled(group: pd.DataFrame, prefix: str) -> Rate:
    """A point's repeats as one rate: the mean of their means, the root sum of squares of
    their half-widths over their count (as scaling.point_means pools them)."""
    means, halves = group[f"{prefix}_mean"].astype(float), group[f"{prefix}_ci95"].astype(float)
    windows = float(group["windows"].mean()) if "windows" in group else math.nan
    return Rate(float(means.mean()), float(np.sqrt((halves**2).sum())) / len(group), windows)


# the three img/s of a folder point, each with its 95% half-width (pipeline_points)
RATES = ("synthetic", "folder", "loader_alone")


def _same_point(frame: pd.DataFrame, key: tuple) -> pd.DataFrame:
    return frame[
        np.logical_and.reduce([frame[k] == v for k, v in zip(LAYOUT_KEY, key, strict=True)])
    ]


def pipeline_points(cells: pd.DataFrame) -> pd.DataFrame:
    """Per layout and per-device batch with an ok folder cell (no remedy), its repeats
    pooled: synthetic, folder and loader-alone img/s with their 95% half-widths and the
    windows per cell behind each, and whether a folder cell's own check named the loader."""
    columns = [*LAYOUT_KEY, *(f"{r}_{c}" for r in RATES for c in ("img_s", "ci95", "windows"))]
    if cells.empty or "mode" not in cells or "pipeline_img_s_mean" not in cells:
        return pd.DataFrame(columns=[*columns, "cell_says_loader"])
    cells = with_comm(cells)
    folder, synthetic = _ok(cells, "folder"), _ok(cells, "synthetic")
    rows = []
    for key, here in folder.groupby(LAYOUT_KEY, sort=True):
        base = _same_point(synthetic, key)
        rates = (
            _pooled(base, "img_s") if not base.empty else Rate(),
            _pooled(here, "img_s"),
            _pooled(here, "pipeline_img_s"),
        )
        row: dict[str, Any] = dict(zip(LAYOUT_KEY, key, strict=True))
        for name, rate in zip(RATES, rates, strict=True):
            row.update({f"{name}_img_s": rate.mean, f"{name}_ci95": rate.half})
            row[f"{name}_windows"] = rate.windows
        row["cell_says_loader"] = bool((here["bound_by"] == "loader").any())
        rows.append(row)
    return pd.DataFrame(rows, columns=[*columns, "cell_says_loader"])


def point_rates(point: pd.Series | dict[str, Any]) -> tuple[Rate, Rate, Rate]:
    """A pipeline_points row's synthetic, folder and loader-alone rates."""
    return tuple(  # type: ignore[return-value]
        Rate(point[f"{r}_img_s"], point[f"{r}_ci95"], point[f"{r}_windows"]) for r in RATES
    )


def _largest(points: pd.DataFrame) -> pd.Series:
    """The largest layout measured (most devices, then most nodes), at its largest batch."""
    order = [WORLD_SIZE, NODES, NETWORK, "batch_per_device"]
    return points.sort_values(order).iloc[-1]


def _scaling_words(scaling: pd.DataFrame, point: pd.Series) -> str:
    """'with your input pipeline, 2 devices give speed-up 1.4x [1.3, 1.5] over 1 device
    reading the same folder (synthetic data: 1.9x [1.8, 2.0])' at this point's batch."""
    if point[WORLD_SIZE] == 1 or scaling.empty:
        return ""
    same = _same_point(scaling[scaling["comm"] == NO_REMEDY], tuple(point[LAYOUT_KEY]))
    folder, synthetic = (same[same["mode"] == mode] for mode in ("folder", "synthetic"))
    if folder.empty:
        return "; with your input pipeline, no speed-up: no one-device folder cell at this batch"
    beside = _speedup_words(synthetic.iloc[0]) if not synthetic.empty else "not measured"
    return (
        f"; with your input pipeline, {int(point[WORLD_SIZE])} devices give speed-up "
        f"{_speedup_words(folder.iloc[0])} over 1 device reading the same folder (synthetic "
        f"data: {beside})"
    )


def _speedup_words(row: pd.Series) -> str:
    value, half = float(row["speedup"]), float(row["speedup_ci95"])
    if not (is_known(half) and math.isfinite(half)):
        return f"{value:.2f}x (no interval)"
    text = f"{value:.2f}x [{value - half:.2f}, {value + half:.2f}]"
    return f"{UNRESOLVED}: {text}" if half > UNRESOLVED_FRACTION * value else text


def _finding(
    run: tuple[str, str], group: pd.DataFrame, points: pd.DataFrame, scaling: pd.DataFrame
) -> str:
    """One strategy and model's folder finding at its largest layout measured."""
    strategy, model = run
    name = f"{strategy}, {readable_model(model)}, with your image folder"
    mine = points[(points["strategy"] == strategy) & (points["model"] == model)]
    if mine.empty:
        reasons = sorted({str(r) for r in group["reason"].dropna()}) or ["no folder cell ran"]
        return f"{name}: not measured ({'; '.join(reasons)})."
    point = _largest(mine)
    synthetic, folder, loader = point_rates(point)
    kind, why = binding(folder, synthetic, loader, bool(point["cell_says_loader"]))
    where = Layout.from_row(point).words(point[NETWORK])
    verdict = f"{kind} binds" if kind in (LOADER, STEP) else kind
    return (
        f"{name} on {where} at per-device batch {int(point['batch_per_device'])}: {verdict} "
        f"({why}): with the folder {folder.words()}, synthetic data {synthetic.words()}, the "
        f"loader alone {loader.words()}{_scaling_words(scaling, point)}."
    )


def pipeline_findings(cells: pd.DataFrame, scaling: pd.DataFrame) -> list[str]:
    """Per strategy and model with folder cells: which binds at the largest layout measured
    (the loader, the training step, a tie, or unresolved and what would resolve it), with
    the three img/s and their 95% intervals, and the folder's speed-up beside the synthetic
    one; no lines for a study without folder cells."""
    if cells.empty or "mode" not in cells or "pipeline_img_s_mean" not in cells:
        return []
    cells, scaling = with_comm(cells), with_comm(scaling)
    folder = cells[(cells["mode"] == "folder") & (cells["comm"] == NO_REMEDY)]
    points = pipeline_points(cells)
    return [_finding(run, group, points, scaling) for run, group in folder.groupby(RUN, sort=True)]
