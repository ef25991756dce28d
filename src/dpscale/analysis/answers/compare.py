"""Two studies side by side (``dpscale compare A B``): did the upgrade help? Per measured point
present in both, B's img/s over A's with its 95% interval; per fitted law, how v0 and t_c
moved; per link, how the all-reduce's alpha and beta moved; and the points only one of them
measured. Works on two results folders from different machines: nothing but their tables.

A point's img/s is the mean of its repeats with the half-width of their window intervals
(scaling.point_means); a ratio's interval is first-order propagation of the two
(fits.ratio_ci95), as everywhere else in the report (docs/decisions/intervals-on-ratios.md).
A ratio whose interval holds 1 is a tie, and is named as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

import numpy as np
import pandas as pd

from dpscale.analysis.answers.kernels import kernels_by_strategy
from dpscale.analysis.laws.fits import Z95, ratio_ci95
from dpscale.analysis.laws.scaling import point_means
from dpscale.analysis.results.rows import with_comm
from dpscale.plan.columns import FIT_GROUP, NETWORK, POINT, SPREAD, SYSTEM_HOST
from dpscale.plan.layout import Layout
from dpscale.plan.remedies import NO_REMEDY

RATIO_COLUMNS = [
    *POINT,
    "img_s_a",
    "img_s_a_ci95",
    "img_s_b",
    "img_s_b_ci95",
    "ratio",
    "ratio_ci95",
    "verdict",
]
ONLY_COLUMNS = [*POINT, "measured_in"]
FIT_COLUMNS = [
    *FIT_GROUP,
    "v0_a",
    "v0_b",
    "v0_ratio",
    "v0_ratio_ci95",
    "t_c_a",
    "t_c_b",
    "t_c_change_s",
    "t_c_change_ci95",
]
LINK_KEY = ["strategy", NETWORK, "comm", *SPREAD]
LINK_COLUMNS = [
    *LINK_KEY,
    "beta_a_GB_s",
    "beta_a_range",
    "beta_b_GB_s",
    "beta_b_range",
    "alpha_a_us",
    "alpha_b_us",
    "beta_verdict",
]


@dataclass(frozen=True)
class Study:
    """One study's tables as the comparison reads them (cells.csv, fits.csv, comm_fits.csv)
    and what it is called in the sentences."""

    name: str
    cells: pd.DataFrame
    fits: pd.DataFrame
    comm_fits: pd.DataFrame
    folder: str = ""


SIDE_COLUMNS = [
    "side",
    "name",
    "folder",
    SYSTEM_HOST,
    "cpu_model",
    "cpu_vector_extensions",
    "cpu_kernels",
    "gpus",
    "dpscale_commit",
    "measured",
    "cells_ok",
]


def side_names(a: PurePath, b: PurePath, labels: dict[str, str] | None = None) -> tuple[str, str]:
    """What the sentences call the two studies: ``labels`` (``--label A=... B=...``) where
    given, else each folder's name; where the names are the same, "A (...)" and "B (...)"
    with the nearest parent folders that tell them apart (two machines' copies of one study
    are the usual comparison)."""
    labels = labels or {}
    names = [labels.get("A") or a.name, labels.get("B") or b.name]
    if names[0] != names[1]:
        return names[0], names[1]
    if labels.get("A") or labels.get("B"):
        return f"A ({names[0]})", f"B ({names[1]})"
    return f"A ({_distinct(a, b)})", f"B ({_distinct(b, a)})"


def _distinct(mine: PurePath, other: PurePath) -> str:
    """The name of ``mine``'s nearest parent folder that differs from ``other``'s at the same
    depth (``2026-11-26-nvidia-h100`` for ``.../2026-11-26-nvidia-h100/default``); the
    whole path where none does."""
    mine_parts, other_parts = mine.parts, other.parts
    for depth in range(1, len(mine_parts)):
        if depth >= len(other_parts) or mine_parts[-1 - depth] != other_parts[-1 - depth]:
            return mine_parts[-1 - depth]
    return str(mine)


def sides_table(a: Study, b: Study) -> pd.DataFrame:
    """One row per study: its name, folder, the machine it ran on (host, CPU and its vector
    extensions, GPUs), the dpscale commit and the dates its cells started."""
    rows = [{"side": side, **_side(study)} for side, study in (("A", a), ("B", b))]
    return pd.DataFrame(rows).reindex(columns=SIDE_COLUMNS)


def _values(cells: pd.DataFrame, column: str, most: int = 3) -> str:
    """The distinct values of a cells column, at most ``most`` then "+N more"; "not
    recorded" where the column is absent or empty."""
    if column not in cells:
        return "not recorded"
    values = sorted({str(v) for v in cells[column].dropna() if str(v).strip()})
    if not values:
        return "not recorded"
    shown = "; ".join(values[:most])
    return shown + (f" +{len(values) - most} more" if len(values) > most else "")


def _side(study: Study) -> dict[str, object]:
    cells = study.cells
    measured = _measured(cells)
    commits = _values(cells, "dpscale_commit")
    ok = int((cells["status"] == "ok").sum()) if "status" in cells else 0
    return {
        "name": study.name,
        "folder": study.folder or "not given",
        SYSTEM_HOST: _values(cells, SYSTEM_HOST),
        "cpu_model": _values(cells, "cpu_model", 2),
        "cpu_vector_extensions": _values(cells, "cpu_vector_extensions", 2),
        "cpu_kernels": "; ".join(
            f"{name}: {words}" for name, words in kernels_by_strategy(cells).items()
        )
        or "not recorded",
        "gpus": _values(cells, "gpus", 2).replace("not recorded", "none"),
        "dpscale_commit": ", ".join(_short_commit(c) for c in commits.split("; ")),
        "measured": measured,
        "cells_ok": f"{ok} of {len(cells)}",
    }


def _measured(cells: pd.DataFrame) -> str:
    """The dates the cells started, first to last; "not recorded" where none is known."""
    if "started_at" not in cells:
        return "not recorded"
    started = pd.to_datetime(cells["started_at"], errors="coerce", utc=True).dropna()
    if started.empty:
        return "not recorded"
    return _date_range(started.min().date().isoformat(), started.max().date().isoformat())


def _short_commit(commit: str) -> str:
    """A git commit as people quote it (``713fa06``, ``713fa06-dirty``); other words kept."""
    head, dirty = commit.removesuffix("-dirty"), commit.endswith("-dirty")
    if len(head) == 40 and all(c in "0123456789abcdef" for c in head):
        return head[:7] + ("-dirty" if dirty else "")
    return commit


def _date_range(first: str, last: str) -> str:
    return first if first == last else f"{first} to {last}"


def _verdict(ratio: float, half: float) -> str:
    if not np.isfinite(half):
        return "no interval"
    if ratio - half > 1:
        return "faster"
    if ratio + half < 1:
        return "slower"
    return "tie"


def point_ratios(a: Study, b: Study) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per point measured ok in both, B's img/s over A's with its interval and verdict; and
    the points only one of them measured."""
    means = [
        point_means(with_comm(s.cells)).rename(
            columns={"img_s": f"img_s_{k}", "img_s_ci95": f"img_s_{k}_ci95"}
        )
        for s, k in ((a, "a"), (b, "b"))
    ]
    merged = means[0].merge(means[1], on=POINT, how="outer", indicator=True)
    both = merged[merged["_merge"] == "both"].copy()
    both["ratio"] = both["img_s_b"] / both["img_s_a"]
    both["ratio_ci95"] = [
        ratio_ci95(r.img_s_b, r.img_s_b_ci95, r.img_s_a, r.img_s_a_ci95)
        for r in both.itertuples(index=False)
    ]
    both["verdict"] = [
        _verdict(r, h) for r, h in zip(both["ratio"], both["ratio_ci95"], strict=True)
    ]
    only = merged[merged["_merge"] != "both"].copy()
    only["measured_in"] = np.where(only["_merge"] == "left_only", a.name, b.name)
    return both.reindex(columns=RATIO_COLUMNS), only.reindex(columns=ONLY_COLUMNS)


def fit_changes(a: Study, b: Study) -> pd.DataFrame:
    """Per fit group fitted in both: v0's ratio and t_c's change, with 95% intervals from the
    fits' standard errors."""
    ok = [with_comm(s.fits) for s in (a, b)]
    ok = [f[f["status"] == "ok"] if "status" in f else f.iloc[0:0] for f in ok]
    if ok[0].empty or ok[1].empty:
        return pd.DataFrame(columns=FIT_COLUMNS)
    merged = ok[0].merge(ok[1], on=FIT_GROUP, suffixes=("_a", "_b"))
    merged["v0_ratio"] = merged["v0_b"] / merged["v0_a"]
    merged["v0_ratio_ci95"] = [
        ratio_ci95(r.v0_b, Z95 * r.v0_se_b, r.v0_a, Z95 * r.v0_se_a)
        for r in merged.itertuples(index=False)
    ]
    merged["t_c_change_s"] = merged["t_c_b"] - merged["t_c_a"]
    merged["t_c_change_ci95"] = Z95 * np.hypot(merged["t_c_se_a"], merged["t_c_se_b"])
    return merged.reindex(columns=FIT_COLUMNS)


def _range(low: float, high: float) -> str:
    high_text = "unbounded" if not np.isfinite(high) else f"{high:.3g}"
    return f"{low:.3g}-{high_text}"


def link_changes(a: Study, b: Study) -> pd.DataFrame:
    """Per link fitted in both (comm_fits.csv): beta and alpha of each, and whether beta's
    intervals separate them."""
    fitted = [s.comm_fits for s in (a, b)]
    fitted = [f[f["status"] == "ok"] if "status" in f else f.iloc[0:0] for f in fitted]
    if fitted[0].empty or fitted[1].empty:
        return pd.DataFrame(columns=LINK_COLUMNS)
    merged = fitted[0].merge(fitted[1], on=LINK_KEY, suffixes=("_a", "_b"))
    rows = []
    for r in merged.to_dict("records"):
        if r["beta_lo_GB_s_b"] > r["beta_hi_GB_s_a"]:
            verdict = "faster"
        elif r["beta_hi_GB_s_b"] < r["beta_lo_GB_s_a"]:
            verdict = "slower"
        else:
            verdict = "tie"
        rows.append(
            {
                **{k: r[k] for k in LINK_KEY},
                "beta_a_GB_s": r["beta_GB_s_a"],
                "beta_a_range": _range(r["beta_lo_GB_s_a"], r["beta_hi_GB_s_a"]),
                "beta_b_GB_s": r["beta_GB_s_b"],
                "beta_b_range": _range(r["beta_lo_GB_s_b"], r["beta_hi_GB_s_b"]),
                "alpha_a_us": r["alpha_s_a"] * 1e6,
                "alpha_b_us": r["alpha_s_b"] * 1e6,
                "beta_verdict": verdict,
            }
        )
    return pd.DataFrame(rows).reindex(columns=LINK_COLUMNS)


def _machine(study: Study) -> str:
    """Where a study ran, in words: host, CPU (with its vector extensions where recorded),
    GPUs, the dpscale commit and the dates."""
    cells = study.cells
    if cells.empty or "cpu_model" not in cells:
        return "a machine not recorded"
    side = _side(study)
    cpu = str(side["cpu_model"])
    if side["cpu_vector_extensions"] != "not recorded":
        cpu += f", {side['cpu_vector_extensions']}"
    gpus = side["gpus"] if side["gpus"] != "none" else "no GPU"
    text = f"{side[SYSTEM_HOST]} ({cpu}; {gpus})"
    if side["dpscale_commit"] != "not recorded":
        text += f" at dpscale {side['dpscale_commit']}"
    if side["measured"] != "not recorded":
        text += f", {side['measured']}"
    return text


def _point_words(row: pd.Series) -> str:
    layout = Layout.from_row(row).short(row["network"])
    comm = f", {row['comm']}" if row["comm"] != NO_REMEDY else ""
    return (
        f"{row['strategy']} {layout}{comm} at batch {row['batch_per_device']}: "
        f"{row['ratio']:.2f}x (±{row['ratio_ci95']:.2f})"
    )


def compare_paragraph(
    a: Study, b: Study, ratios: pd.DataFrame, only: pd.DataFrame, links: pd.DataFrame
) -> str:
    """The comparison in a few sentences: how many points moved which way (ties named), the
    largest change each way, the links, what only one study measured, and where each ran."""
    where = f"{a.name} ran on {_machine(a)}; {b.name} on {_machine(b)}."
    if ratios.empty:
        return (
            f"{b.name} and {a.name} share no point measured ok in both, so nothing is "
            f"compared ({len(only)} points measured in one only). {where}"
        )
    counts = ratios["verdict"].value_counts()
    text = (
        f"{b.name} against {a.name}, over the {len(ratios)} points measured ok in both: "
        f"faster at {counts.get('faster', 0)}, slower at {counts.get('slower', 0)}, a tie "
        f"(the 95% interval of the img/s ratio holds 1) at {counts.get('tie', 0)}; median "
        f"ratio {ratios['ratio'].median():.2f}x (range {ratios['ratio'].min():.2f}-"
        f"{ratios['ratio'].max():.2f})."
    )
    for verdict, pick in (("faster", "idxmax"), ("slower", "idxmin")):
        moved = ratios[ratios["verdict"] == verdict]
        if not moved.empty:
            row = moved.loc[getattr(moved["ratio"], pick)()]
            text += f" Most {verdict}: {_point_words(row)}."
    changed = links[links["beta_verdict"] != "tie"] if not links.empty else links
    if not links.empty:
        text += (
            f" Links: the all-reduce's bandwidth (beta) changed beyond its interval on "
            f"{len(changed)} of {len(links)}"
            + (
                " ("
                + "; ".join(
                    f"{r.network} {r.beta_a_GB_s:.3g} to {r.beta_b_GB_s:.3g} GB/s"
                    for r in changed.itertuples(index=False)
                )
                + ")"
                if not changed.empty
                else ""
            )
            + "."
        )
    if not only.empty:
        counts_only = only["measured_in"].value_counts()
        text += (
            " Measured in one only: "
            + ", ".join(f"{n} in {name}" for name, n in counts_only.items())
            + " (listed below, not compared)."
        )
    return f"{text} {where}"


def ratio_table_sorted(ratios: pd.DataFrame) -> pd.DataFrame:
    """The point ratios, the largest changes first."""
    if ratios.empty:
        return ratios
    order = (ratios["ratio"] - 1).abs().sort_values(ascending=False).index
    return ratios.loc[order].reset_index(drop=True)
