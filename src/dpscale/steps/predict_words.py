"""The words ``dpscale predict`` prints: each row with its range and what carried it
(calibrated, term by term, or the published band), and the sentence for the largest row."""

from __future__ import annotations

import pandas as pd

from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.answers import term_prediction


def shown(table: pd.DataFrame) -> str:
    """The printed table: each number with its range."""
    lines = []
    for _, row in table.iterrows():
        if row["status"] != cp.OK:
            lines.append(
                f"{row['nodes']:>5} nodes {row['world_size']:>6} devices  {row['status']}: "
                f"{row['reason']}  [{_label(row)}]"
            )
            continue
        lines.append(
            f"{row['nodes']:>5} nodes {row['world_size']:>6} devices  "
            f"step {row['step_time_s'] * 1e3:.1f} ms "
            f"({row['step_time_lo_s'] * 1e3:.1f}-{row['step_time_hi_s'] * 1e3:.1f})  "
            f"{row['img_s']:.0f} img/s  speedup {row['speedup']:.2f}x "
            f"({row['speedup_lo']:.2f}-{row['speedup_hi']:.2f})  "
            f"efficiency {100 * row['efficiency']:.0f}%  "
            f"compress {row['compression_for_90pct']:.3g}x for 90%{_carried_words(row)}  "
            f"[{_label(row)}]"
        )
    return "\n".join(lines)


def _carried_words(row: pd.Series) -> str:
    """A printed row's calibrated efficiency, or its published band, where it has one."""
    if pd.notna(row.get("calibrated_efficiency", float("nan"))):
        return (
            f"  calibrated{_for_folder(row)} {100 * row['calibrated_efficiency']:.0f}% "
            f"({100 * row['calibrated_efficiency_lo']:.0f}-"
            f"{100 * row['calibrated_efficiency_hi']:.0f}%){term_prediction.printed(row)}"
        )
    if pd.notna(row.get("efficiency_band_lo", float("nan"))):
        return (
            f"  published band {100 * row['efficiency_band_lo']:.0f}-"
            f"{100 * row['efficiency_band_hi']:.0f}%"
        )
    return ""


def _for_folder(row: pd.Series) -> str:
    """The printed row's words where the small run's folder cells calibrated it."""
    return " for folder training" if row.get("calibrated_mode") == "folder" else ""


def _label(row: pd.Series) -> str:
    """A row's kind, and "nominal link" where a nominal rate and latency priced it."""
    return f"{row['kind']}; nominal link" if row["algorithm"] == cp.NOMINAL else row["kind"]


def _folder_words(row: pd.Series) -> str:
    """What a prediction calibrated on folder cells is for, in the sentence."""
    if row.get("calibrated_mode") != "folder":
        return ""
    return "'s folder cells, so for training from its image folder (against one device reading it)"


def _arithmetic_words(row: pd.Series) -> str:
    """What arithmetic makes of the same measured points at this row, and the law's record
    against it; nothing where the row is not beyond the points."""
    if pd.isna(row.get("hold_efficiency")):
        return ""
    return (
        f" Arithmetic on the same points: the largest one's efficiency held, "
        f"{_percent(row['hold_efficiency'])}; its last drop repeated per doubling, "
        f"{_percent(row['repeat_efficiency'])}. {row['baselines_record'].capitalize()}."
    )


def _percent(efficiency: float) -> str:
    """An efficiency in whole percent; the repeated drop may use it all up."""
    return f"{100 * efficiency:.0f}%" if efficiency >= 0.005 else "none left"


def carried_sentence(table: pd.DataFrame) -> str:
    """The sentence for the largest layout: calibrated (its kind and what it stands on), or
    the link-only figure within the published band."""
    row = table.sort_values("world_size").iloc[-1]
    if "calibrated_efficiency" in table and pd.notna(row["calibrated_efficiency"]):
        return (
            f"Calibrated on the small run{_folder_words(row)}: "
            f"{100 * row['calibrated_efficiency']:.0f}% efficient "
            f"({100 * row['calibrated_efficiency_lo']:.0f}-"
            f"{100 * row['calibrated_efficiency_hi']:.0f}%), speed-up "
            f"{row['calibrated_speedup']:.1f}x ({row['calibrated_speedup_lo']:.1f}-"
            f"{row['calibrated_speedup_hi']:.1f}), {row['calibrated_kind']}; "
            f"{row['calibration']}. The link-only figure above is its upper bound."
            + _arithmetic_words(row)
        )
    if "efficiency_band_lo" in table and pd.notna(row["efficiency_band_lo"]):
        return (
            f"Without a small run on the cluster: {100 * row['efficiency_band_lo']:.0f}-"
            f"{100 * row['efficiency_band_hi']:.0f}% efficient ({row['band_basis']}); the "
            "link-only figure is its upper bound. A small run here (dpscale predict "
            "--calibrate) narrows it."
        )
    return ""  # not resolved: the answer sentence says why
