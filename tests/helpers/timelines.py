"""A bucket timeline with a known shape for prediction tests: four equal buckets, ready at
quarters of the backward pass, 0.1 s of forward and backward at batch 64."""

from __future__ import annotations

import numpy as np

from dpscale.analysis.laws.commmodel.buckets import BucketTimeline

FOUR = BucketTimeline(
    forward_share=1 / 3,
    optimizer_s=0.002,
    fb_slope=0.1 / 64,
    fb_intercept=0.0,
    ready=np.array([0.25, 0.5, 0.75, 1.0]),
    share=np.array([0.25, 0.25, 0.25, 0.25]),
    batches=(64,),
)
