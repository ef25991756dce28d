"""Every framework builder builds the network the specification describes.

Each builder runs in its own framework environment (built once, then cached) and reports
the trainable parameters and forward FLOPs it counts on the model it actually built; these
must equal the specification's, which in turn must equal torchvision's published counts.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path

import pytest

from dpscale.launch.setup.envs import ensure_env, env_python
from dpscale.plan.paths import REPO_ROOT, SRC_DIR
from dpscale.plan.resnet_spec import parity_specs

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = pytest.mark.side_by_side

# (environment, builder module)
BUILDERS = {
    "torch": ("torch", "dpscale.frameworks.torch_resnet"),
    "keras": ("tf-horovod", "dpscale.frameworks.keras_resnet"),
    "gluon": ("mxnet", "dpscale.frameworks.gluon_resnet"),
}

# torchvision's ResNet v1.5 trainable parameters (see the domain brief).
TORCHVISION_PARAMS = {
    "resnet18-imagenet224-c1000": 11_689_512,
    "resnet50-imagenet224-c1000": 25_557_032,
    "resnet101-imagenet224-c1000": 44_549_160,
    "resnet18-imagenet224-c10": 11_181_642,
    "resnet50-imagenet224-c10": 23_528_522,
    "resnet101-imagenet224-c10": 42_520_650,
}


def _module_path(module: str) -> Path:
    return SRC_DIR.joinpath(*module.split(".")).with_suffix(".py")


@cache
def run_builder(framework: str) -> subprocess.CompletedProcess[str] | None:
    """Run the builder's ``--json`` in its environment; None if the builder is not written."""
    env_name, module = BUILDERS[framework]
    if not _module_path(module).is_file():
        return None
    prefix = ensure_env(env_name)
    env = dict(os.environ, PYTHONPATH=str(SRC_DIR), OMP_NUM_THREADS="1")
    return subprocess.run(
        [str(env_python(prefix)), "-m", module, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )


def builder_counts(framework: str) -> dict[str, dict[str, int]]:
    completed = run_builder(framework)
    if completed is None:
        pytest.skip(f"{framework}: builder module {BUILDERS[framework][1]} does not exist yet")
    if completed.returncode != 0:
        pytest.fail(f"{framework} builder failed:\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_spec_matches_torchvision() -> None:
    specs = parity_specs()
    for key, params in TORCHVISION_PARAMS.items():
        assert specs[key].trainable_params() == params, key


@pytest.mark.slow
@pytest.mark.parametrize("framework", sorted(BUILDERS))
@pytest.mark.parametrize("key", sorted(parity_specs()))
def test_builder_matches_spec(framework: str, key: str) -> None:
    counts = builder_counts(framework)
    spec = parity_specs()[key]
    assert counts[key] == {
        "trainable_params": spec.trainable_params(),
        "forward_flops": spec.forward_flops(),
    }
