"""A study whose cell results are written, not measured: every cell of a config's matrix gets
a result that follows a known throughput law (or the skip reason the matrix gives it), and
the framework environments are marked ready, so Snakemake runs only the analysis and the
report. Seconds, no framework needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from conftest import REPO
from dpscale.analysis.laws import fits
from dpscale.launch.setup.envs import READY_MARKER, env_folder_name
from dpscale.plan.matrix import expand
from dpscale.plan.result import make_result, now_iso, write_result
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES
from dpscale.runner.timing import throughput_measurement

PEAK = {"tflop_s": 0.08, "ci95": 0.002, "n": 5, "dtype": "fp32", "framework": "torch"}
SYSTEM = {"host": "fake", "cpu_model": "fake cpu", "python": "3.11", "matmul_peak": PEAK}
# (v0 img/s per device, t_c seconds) by world size, per strategy: DDP pays more constant time
LAWS = {
    "torch-ddp": {1: (60.0, 0.02), 2: (58.0, 0.08)},
    "torch-dp": {1: (55.0, 0.03), 2: (50.0, 0.12)},
}


def study_config(config_file: Path, results_dir: Path, env_dir: Path) -> dict[str, Any]:
    with open(REPO / "config.yaml", encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    with open(config_file, encoding="utf-8") as handle:
        config.update(yaml.safe_load(handle))
    config.update(results_dir=str(results_dir), env_dir=str(env_dir))
    return plan_study(config, STRATEGIES)[0]


# a control cell's law (plan.controls): local steps at one device's rate with a little
# contention and none of the exchange; barrier adds a few milliseconds of waiting
CONTROL_LAWS = {"local": (0.95, 0.01), "barrier": (0.95, 0.015)}


def _law(strategy: str, world: int, control: str) -> tuple[float, float]:
    v0, t_c = LAWS[strategy][world]
    if control in CONTROL_LAWS:
        share, constant = CONTROL_LAWS[control]
        return LAWS[strategy][1][0] * (share if world > 1 else 1.0), constant
    return v0, t_c


def _measurement(strategy: str, world: int, batch: int, rng: np.random.Generator, control: str):
    v0, t_c = _law(strategy, world, control)
    steps = 2
    seconds = [steps * fits.step_time(batch, v0, t_c) * (1 + rng.normal(0, 0.01)) for _ in range(4)]
    return throughput_measurement(seconds, steps, batch, world)


def write_fake_study(config_file: Path, results_dir: Path, env_dir: Path) -> dict[str, Any]:
    """Every cell's result under results_dir/<study>/cells, env markers under env_dir."""
    config = study_config(config_file, results_dir, env_dir)
    rng = np.random.default_rng(0)
    root = results_dir / config["study"]
    for cell in expand(config, STRATEGIES):
        if cell.skip_reason:
            result = make_result(
                cell, "skipped", started_at=now_iso(), system=SYSTEM, reason=cell.skip_reason
            )
        else:
            measurement = _measurement(
                cell.strategy, cell.world_size, cell.batch_per_device, rng, cell.control
            )
            result = make_result(
                cell, "ok", started_at=now_iso(), system=SYSTEM, measurement=measurement
            )
        write_result(cell.result_path(root), result)
    for name in {STRATEGIES[s].env for s in config["strategies"]}:
        marker = env_dir / env_folder_name(name) / READY_MARKER
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return config
