"""Runs a helper script in a framework's environment and reads the JSON it prints last: how
the integration tests compare what a framework did with a numpy reference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dpscale.launch.setup.envs import ensure_env, env_python
from dpscale.plan.paths import REPO_ROOT, SRC_DIR


def run_script(env: str | None, script: Path, *args: str, timeout_s: float = 300) -> Any:
    """``script`` with ``args`` in environment ``env`` (built where it is not; None: this
    interpreter), one thread per process, dpscale and tests/ importable; its last stdout
    line, parsed as JSON. A failing script fails the test with the end of its stderr."""
    python = sys.executable if env is None else str(env_python(ensure_env(env)))
    done = subprocess.run(
        [python, str(script), *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=f"{SRC_DIR}:{REPO_ROOT / 'tests'}", OMP_NUM_THREADS="1"),
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
