"""Every strategy's runner measures a tiny CPU cell through the real launcher.

Each runs in its framework environment (built once, then cached under .envs/). Multi-process
strategies must end with every rank holding bit-identical parameters.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from dpscale.launch import launcher
from dpscale.launch.envs import ensure_env
from dpscale.plan.cell import Cell, Measure, ModelConfig
from dpscale.plan.result import read_result
from dpscale.registry import STRATEGIES, strategy

pytestmark = pytest.mark.slow

MODEL = ModelConfig("resnet18", "imagenet", 32, 10)
MEASURE = Measure(warmup_steps=1, windows=2, steps_per_window=2, timeout_s=600)


@cache
def prefix_for(env: str) -> Path:
    return ensure_env(env)


def measure(tmp_path: Path, name: str, devices: int, **fields) -> tuple[str, dict]:
    cell = Cell("test", name, MODEL, "synthetic", 1, devices, 2, measure=MEASURE, **fields)
    out = cell.result_path(tmp_path / "results")
    log = tmp_path / "cell.log"
    status = launcher.launch(cell, out, prefix_for(strategy(name).env), log)
    result = read_result(out)  # validates against the schema
    assert result["status"] == status
    return status, result


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_runner_measures_and_ranks_agree(tmp_path, name):
    devices = 1 if strategy(name).one_process else 2  # one device per process on CPU
    status, result = measure(tmp_path, name, devices)
    assert status == "ok", (result["reason"], (tmp_path / "cell.log").read_text()[-3000:])
    measurement = result["measurement"]
    assert len(measurement["per_rank_window_seconds"]) == devices
    assert measurement["summary"]["img_s"]["n"] == MEASURE.windows
    checksums = measurement["rank_param_checksums"]
    assert len(checksums) == devices and len(set(checksums)) == 1, checksums
    assert result["framework"] == strategy(name).framework
    assert result["model_info"]["trainable_params"] == MODEL.spec().trainable_params()


def test_mxnet_dist_with_several_servers(tmp_path):
    status, result = measure(tmp_path, "mxnet-dist", 2, options=(("mxnet_servers", 2),))
    assert status == "ok", result["reason"]
    assert result["system"]["mxnet_servers"] == 2
    assert len(set(result["measurement"]["rank_param_checksums"])) == 1


def test_unsupported_combination_fails_with_a_clear_reason(tmp_path):
    status, result = measure(tmp_path, "mxnet-dist", 2, memory_format="channels_last")
    assert status == "failed"
    assert "MXNet runners measure precision 'fp32'" in result["reason"], result["reason"]
    assert "'channels_last'" in result["reason"]
