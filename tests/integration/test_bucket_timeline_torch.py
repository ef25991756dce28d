"""torch-ddp's bucket timeline (frameworks.torch_timeline) is what a step does: every bucket
is ready within backward, the first layers' bucket last, the buckets hold every gradient,
and no hook outlives the timeline.

tests/helpers/bucket_timeline.py records it in the torch environment on one gloo rank, as
run_cell records it (DistributedTorchRank.bucket_timeline).
"""

from __future__ import annotations

from functools import cache

import pytest

from dpscale.plan.paths import REPO_ROOT
from helpers.env_script import run_script

# slow: builds the torch environment where it is not built; side_by_side: no test here
# asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]

SCRIPT = REPO_ROOT / "tests" / "helpers" / "bucket_timeline.py"
STEPS = 2


@cache
def recorded() -> dict:
    return run_script("torch", SCRIPT, str(STEPS))


def test_every_bucket_is_ready_within_backward_the_first_layers_last():
    for timeline in recorded()["timelines"]:
        assert timeline["clock"] == "perf_counter" and timeline["steps"] == STEPS
        assert len(timeline["buckets"]) == 3  # the helper's cap splits the network in three
        for step, backward in enumerate(timeline["backward_s"]):
            ready = [bucket["ready_s"][step] for bucket in timeline["buckets"]]
            assert all(0 <= seconds <= backward for seconds in ready), (ready, backward)
            assert ready[-1] == max(ready)  # reverse parameter order: the first layers last
        for part in ("forward_s", "optimizer_s"):
            assert len(timeline[part]) == STEPS and min(timeline[part]) > 0


def test_the_buckets_hold_every_gradient_in_float32():
    found = recorded()
    for timeline in found["timelines"]:
        assert [b["index"] for b in timeline["buckets"]] == [0, 1, 2]
        assert sum(b["bytes"] for b in timeline["buckets"]) == 4 * found["trainable_params"]
        assert sum(b["parameters"] for b in timeline["buckets"]) == 6  # 3 weights, 3 biases


def test_no_hook_outlives_a_timeline_not_even_one_that_raised():
    found = recorded()
    assert found["hooks_left"] == 0
    assert found["raised"] and found["hooks_left_after_raise"] == 0
