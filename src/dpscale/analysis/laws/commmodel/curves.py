"""The chosen model's img/s over batch sizes for each measured layout (the throughput
figure's lines)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpscale.analysis.laws.commmodel.analysis import GroupModel
from dpscale.analysis.laws.commmodel.model import step_seconds
from dpscale.plan.columns import PLACEMENT


def model_curves(group: GroupModel, batches: np.ndarray) -> pd.DataFrame:
    """The chosen model's img/s over ``batches`` for every measured layout (as measured,
    on this machine), for the throughput figure."""
    if group.chosen is None:
        return pd.DataFrame()
    fit = group.fits[group.chosen]
    layouts = group.obs[[*PLACEMENT, "gradient_bytes"]].drop_duplicates()
    frames = []
    for layout in layouts.itertuples(index=False):
        frame = pd.DataFrame({**layout._asdict(), "batch_per_device": batches})
        step = step_seconds(fit.values, fit.design(frame, emulation=True))
        frame["img_s"] = frame["world_size"] * batches / step
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
