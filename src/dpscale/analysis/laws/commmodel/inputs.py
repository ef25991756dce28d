"""What the model knows before fitting: quantities in the config, the links between ranks
(reference bandwidth and latency) and one observation per measured configuration."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from dpscale.plan import ring
from dpscale.plan.columns import PLACEMENT, RUN
from dpscale.plan.layout import HOST_NETWORK
from dpscale.plan.link import INTRA_NODE, Link

INTRA = INTRA_NODE  # the link of one-node cells: their ranks talk inside the machine


OBS_COLUMNS = [*RUN, *PLACEMENT, "batch_per_device"]


def links_from_config(
    configured: Sequence[Link], comm_fits: pd.DataFrame | None, strategy: str
) -> dict[str, Link]:
    """The study's links for one strategy: the intra-node link and each configured network
    (plan.model_inputs.configured_links); a network's collectives fit where it has one, else its
    configured rate (emulated), else fitted."""
    links = {INTRA: _link_from_comm_fits(HOST_NETWORK, comm_fits, strategy, intra=True)}
    for link in configured:
        measured = _link_from_comm_fits(link.name, comm_fits, strategy, intra=False)
        known = not math.isnan(measured.bytes_per_s)
        links[link.name] = replace(measured, emulated=link.emulated) if known else link
    return links


def _link_from_comm_fits(
    name: str, comm_fits: pd.DataFrame | None, strategy: str, intra: bool
) -> Link:
    unknown = Link(INTRA if intra else name)
    if comm_fits is None or comm_fits.empty:
        return unknown
    rows = comm_fits[
        (comm_fits["strategy"] == strategy)
        & (comm_fits["network"] == name)
        & (comm_fits["status"] == "ok")
        & ((comm_fits["nodes"] == 1) if intra else (comm_fits["nodes"] > 1))
    ]
    rows = rows[np.isfinite(rows["beta_GB_s"].astype(float)) & (rows["beta_GB_s"] > 0)]
    if rows.empty:
        return unknown
    beta = float(rows["beta_GB_s"].median())
    alpha = float(rows["alpha_s"].clip(lower=0).median())
    return Link.from_alpha_beta(unknown.name, alpha_s=alpha, beta_gb_s=beta)


def observations(windows: pd.DataFrame, trainable_params: dict[str, int]) -> pd.DataFrame:
    """One row per measured configuration (repeats pooled): mean step time over its timed
    windows, contaminated cells left out, synthetic mode only."""
    frame = windows[windows["mode"] == "synthetic"] if "mode" in windows else windows
    if "quality" in frame:
        frame = frame[frame["quality"].fillna("") != "contaminated"]
    columns = [*OBS_COLUMNS, "step_time_s", "windows", "gradient_bytes"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    frame = frame[np.isfinite(frame["step_time_s"]) & (frame["step_time_s"] > 0)]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    grouped = frame.groupby(OBS_COLUMNS, sort=True)["step_time_s"]
    table = grouped.agg(step_time_s="mean", windows="size").reset_index()
    table["gradient_bytes"] = [
        ring.gradient_bytes(int(trainable_params.get(m, 0))) for m in table["model"]
    ]
    return table.reindex(columns=columns)
