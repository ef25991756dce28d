"""torchvision imports in the torch environment through dpscale.frameworks.torchvision_import,
whether or not its C++ extension loads beside that environment's torch."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dpscale.launch.setup.envs import ensure_env

# side_by_side: it times nothing; slow: it needs the torch environment (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]
SRC = Path(__file__).resolve().parents[2] / "src"
PROBE = """
import json, torch
from dpscale.frameworks import torchvision_import as tv_import
loads = tv_import.extension_loads()
torchvision, has_ops = tv_import.import_torchvision()
net = torchvision.models.get_model("mobilenet_v3_small", weights=None, num_classes=3)
out = net(torch.zeros(2, 3, 32, 32))
try:
    torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)
    nms = "ran"
except RuntimeError as error:
    nms = "refused"
print(json.dumps({"loads": loads, "has_ops": has_ops, "declared": len(tv_import._declared),
                  "shape": list(out.shape), "nms": nms}))
"""


def test_torchvision_imports_and_builds_a_model_its_operators_loaded_or_not():
    python = ensure_env("torch") / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [str(python), "-c", PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["shape"] == [2, 3]
    # the schemas are declared exactly where the extension did not load, and then the
    # operators stay torchvision's to refuse; where it loads, nothing is declared
    assert seen["has_ops"] == seen["loads"]
    assert seen["declared"] == (0 if seen["loads"] else 1)
    assert seen["nms"] == ("ran" if seen["loads"] else "refused")
