"""The words ``dpscale predict`` prints: first the range a user can act on (calibrated, or
the published band) with the link-only figure as its upper bound; each row with its range
and what carried it (calibrated, term by term, or the published band); then the link-only
sentence, labelled as the upper bound, and what the range stands on."""

from __future__ import annotations

import pandas as pd

from dpscale.analysis.answers import cluster_prediction as cp
from dpscale.analysis.answers import term_prediction
from dpscale.analysis.laws.cluster_link import CollectiveCurve
from dpscale.plan.cluster_file import ClusterFile


def shown(table: pd.DataFrame) -> str:
    """The printed table: each row's range first, then the link-only figures (its upper
    bound) with their own ranges."""
    lines = []
    for _, row in table.iterrows():
        if row["status"] != cp.OK:
            lines.append(
                f"{row['nodes']:>5} {_plural(row['nodes'], 'node'):<5} "
                f"{row['world_size']:>6} {_plural(row['world_size'], 'device'):<7}  "
                f"{row['status']}: {row['reason']}  [{_label(row)}]"
            )
            continue
        lines.append(
            f"{row['nodes']:>5} {_plural(row['nodes'], 'node'):<5} "
            f"{row['world_size']:>6} {_plural(row['world_size'], 'device'):<7}"
            f"{_carried_words(row)}  link-only (upper bound): "
            f"efficiency {100 * row['efficiency']:.0f}%, speedup {row['speedup']:.2f}x "
            f"({row['speedup_lo']:.2f}-{row['speedup_hi']:.2f}), "
            f"step {row['step_time_s'] * 1e3:.1f} ms "
            f"({row['step_time_lo_s'] * 1e3:.1f}-{row['step_time_hi_s'] * 1e3:.1f}), "
            f"{row['img_s']:.0f} img/s  "
            f"compress {row['compression_for_90pct']:.3g}x for 90%  [{_label(row)}]"
        )
    return "\n".join(lines)


def _plural(count: int, noun: str) -> str:
    return noun if int(count) == 1 else f"{noun}s"


def _largest(table: pd.DataFrame) -> pd.Series:
    return table.sort_values("world_size").iloc[-1]


def _range(row: pd.Series) -> tuple[float, float, str] | None:
    """The largest row's efficiency range a user acts on and its words: calibrated (its
    upper end at most the link-only figure), else the published band; None where neither."""
    link_only = float(row["efficiency"])
    if pd.notna(row.get("calibrated_efficiency", float("nan"))):
        low, high = row["calibrated_efficiency_lo"], row["calibrated_efficiency_hi"]
        words = f"calibrated on the small run{_folder_words(row)}, {row['calibrated_kind']}"
        return float(low), min(float(high), link_only), words
    if pd.notna(row.get("efficiency_band_lo", float("nan"))):
        words = f"without a small run on the cluster: {row['band_basis']}"
        low, high = row["efficiency_band_lo"], row["efficiency_band_hi"]
        return float(low), min(float(high), link_only), words
    return None


def lead_sentence(table: pd.DataFrame) -> str:
    """The first line: the largest layout's range with its speed-up range, then the
    link-only figure labelled as its upper bound; where the row is not resolved, why."""
    row = _largest(table)
    if row["status"] != cp.OK:
        return cp.sentence(table)
    where = (
        f"On {row['cluster']}, {row['world_size']} devices at per-device batch "
        f"{row['batch_per_device']} ({row['kind']})"
    )
    bound = (
        f"at most {100 * row['efficiency']:.0f}%, {cp.times(row['speedup'])}x: the link-only "
        "figure, an upper bound (nothing lost but the exchange it prices)"
    )
    found = _range(row)
    if found is None:
        return f"{where}: no range (no band or small run narrows it); {bound}."
    low, high, words = found
    size = int(row["world_size"])
    return (
        f"{where}: {100 * low:.0f}-{100 * high:.0f}% efficient, speed-up "
        f"{cp.times(low * size)}-{cp.times(high * size)}x ({words}); {bound}."
    )


def upper_bound_sentence(table: pd.DataFrame) -> str:
    """The link-only sentence, labelled as the upper bound; "" where the row is not resolved
    (the first line said why)."""
    if _largest(table)["status"] != cp.OK:
        return ""
    return f"The link-only figure, an upper bound: {cp.sentence(table)}"


def _carried_words(row: pd.Series) -> str:
    """A printed row's calibrated efficiency, or its published band, where it has one."""
    if pd.notna(row.get("calibrated_efficiency", float("nan"))):
        return (
            f"  calibrated{_for_folder(row)} {100 * row['calibrated_efficiency']:.0f}% "
            f"({100 * row['calibrated_efficiency_lo']:.0f}-"
            f"{100 * row['calibrated_efficiency_hi']:.0f}%){term_prediction.printed(row)}"
        )
    if pd.notna(row.get("efficiency_band_lo", float("nan"))):
        group = (
            f" ({row['band_group']}, {row['band_coverage']})"
            if pd.notna(row.get("band_group"))
            else ""
        )
        return (
            f"  published band{group} {100 * row['efficiency_band_lo']:.0f}-"
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
    """What the first line's range stands on, for the largest layout: the calibration and
    the arithmetic baselines, or how a small run would narrow the band."""
    row = _largest(table)
    if "calibrated_efficiency" in table and pd.notna(row["calibrated_efficiency"]):
        return (
            f"Calibrated on the small run{_folder_words(row)}: "
            f"{100 * row['calibrated_efficiency']:.0f}% efficient "
            f"({100 * row['calibrated_efficiency_lo']:.0f}-"
            f"{100 * row['calibrated_efficiency_hi']:.0f}%), speed-up "
            f"{row['calibrated_speedup']:.1f}x ({row['calibrated_speedup_lo']:.1f}-"
            f"{row['calibrated_speedup_hi']:.1f}), {row['calibrated_kind']}; "
            f"{row['calibration']}." + _arithmetic_words(row)
        )
    if "efficiency_band_lo" in table and pd.notna(row["efficiency_band_lo"]):
        return (
            "The band is the published cases' spread below the link-only figure; a small run "
            "here (dpscale predict --calibrate) narrows it."
        )
    return ""  # not resolved: the answer sentence says why


# -- the header: what the prediction stands on -------------------------------------------


def device_mismatch(cluster: ClusterFile, device: cp.OneDevice) -> str:
    """The words where the cluster file's ``device`` is not the profile's; "" where it is or
    where the file names none."""
    if cluster.device is None or device.is_named(cluster.device):
        return ""
    return (
        f"device: the cluster file names {cluster.device!r}, but the one-device profile is "
        f"{device.words()}"
    )


def inter_words(cluster: ClusterFile, curve: CollectiveCurve | None) -> str:
    """The printed header's words for the inter-node link: its log, or its nominal numbers."""
    if curve is None:
        return f"inter-node link {cluster.rate.words()} ({cp.NOMINAL})"
    return f"inter-node log {cluster.log.name} at {cluster.ranks} ranks; {curve.algorithm}"


def intra_words(cluster: ClusterFile) -> str:
    """The printed header's words for the intra-node log, where the file gives one."""
    if cluster.intra is None:
        return ""
    intra = cluster.intra
    if intra.nominal:
        return f"; one-node rows: intra-node link {intra.rate.words()} ({cp.NOMINAL})"
    return f"; one-node rows: intra-node log {intra.log.name} at {intra.ranks} ranks"


def profile_words(device: cp.OneDevice, cluster: ClusterFile) -> str:
    """The profile's device and host, and what a CPU profile means for a cluster that does
    not name its device (it may be a GPU cluster) or one that names another."""
    words = device.words()
    mismatch = device_mismatch(cluster, device)
    if mismatch:
        return f"{words} (not the cluster's {cluster.device!r}: predicted anyway, as asked)"
    if device.on_cpu and cluster.device is None:
        return (
            f"{words}; a CPU profile: for a GPU cluster, one device measured there predicts its "
            "GPUs (name the cluster's device in its file, device: <GPU>, to have it checked)"
        )
    return words
