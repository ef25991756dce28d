"""Every framework's synthetic-mode optimiser takes the same step (plan.cell.SYNTHETIC_SGD).

Each framework, in its own environment, starts one tiny model from the same weights and
takes three SGD steps on the same batch with the optimiser its adapter builds; the weights
must agree with each other and with a numpy reference of torch's convention (momentum, L2
weight decay added to the gradient) to float32 rounding.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from dpscale.plan.paths import REPO_ROOT
from helpers.env_script import run_script

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = pytest.mark.side_by_side

SCRIPT = REPO_ROOT / "tests" / "helpers" / "optimizer_step.py"
ENVS = {"torch": "torch", "tensorflow": "tf-horovod", "mxnet": "mxnet"}


@cache
def weights_after_steps(framework: str) -> dict[str, np.ndarray]:
    found = run_script(None if framework == "numpy" else ENVS[framework], SCRIPT, framework)
    return {name: np.asarray(values) for name, values in found.items()}


def test_the_reference_moves_the_weights():
    from helpers.optimizer_step import BIAS, KERNEL  # noqa: PLC0415 (needs no framework)

    reference = weights_after_steps("numpy")
    assert np.abs(reference["kernel"] - KERNEL).max() > 1e-3
    assert np.abs(reference["bias"] - BIAS).max() > 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(ENVS))
def test_one_optimiser_in_every_framework(framework):
    reference = weights_after_steps("numpy")
    found = weights_after_steps(framework)
    for name in ("kernel", "bias"):
        np.testing.assert_allclose(found[name], reference[name], rtol=1e-5, atol=1e-6)
