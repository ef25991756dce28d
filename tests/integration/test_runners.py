"""Every strategy's runner measures a tiny CPU cell through the real launcher.

Each runs in its framework environment (built once, then cached under .envs/). Multi-process
strategies must end with every rank holding bit-identical parameters.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from dpscale.analysis.results import horovod_timeline as hvt
from dpscale.launch import launcher
from dpscale.launch.setup.envs import ensure_env
from dpscale.plan.cell import Cell, Collectives, Measure, ModelConfig
from dpscale.plan.remedies import Comm, parse, wire_bytes
from dpscale.plan.result import read_result
from dpscale.registry import STRATEGIES, strategy

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]

MODEL = ModelConfig("resnet18", "imagenet", 32, 10)
MEASURE = Measure(warmup_steps=1, windows=2, steps_per_window=2, timeout_s=600)


@cache
def prefix_for(env: str) -> Path:
    return ensure_env(env)


def measure(
    tmp_path: Path, name: str, devices: int, protocol: Measure = MEASURE, **fields
) -> tuple[str, dict]:
    cell = Cell("test", name, MODEL, "synthetic", 1, devices, 2, measure=protocol, **fields)
    out = cell.result_path(tmp_path / "results")
    log = tmp_path / "cell.log"
    status = launcher.launch(cell, out, prefix_for(strategy(name).env), log)
    result = read_result(out)  # validates against the schema
    assert result["status"] == status
    return status, result


# horovod-tf's run here also keeps Horovod's own timeline (its cell option), checked after it
KEEP_TIMELINE = (("horovod_timeline", True),)


def check_horovod_timeline(tmp_path: Path, result: dict) -> None:
    """Horovod's timeline lies beside the result, which names it, and every step read from
    it splits its all-reduce time into hidden and exposed parts."""
    cells = tmp_path / "results" / "cells"
    out = cells / f"{result['cell']['cell_id']}.json"
    name = result["system"]["horovod_timeline"]
    assert name == f"{out.stem}.horovod-timeline.json"
    steps = hvt.step_overlap(
        hvt.activities(hvt.read_events(out.parent / name)), MEASURE.warmup_steps
    )
    assert len(steps) >= 1 and (steps["tensors"] > 1).all(), steps
    assert (steps["allreduce_s"] > 0).all()
    assert list(steps["hidden_s"] + steps["exposed_s"]) == pytest.approx(steps["allreduce_s"])
    assert hvt.timeline_table([result], cells)["steps"].tolist() == [len(steps)]


def check_cpu_kernels(result: dict, name: str) -> None:
    """The cell's framework named the CPU kernels it ran, and a setting its adapter gives
    the ranks (Strategy.environment: horovod-tf's TF_ENABLE_ONEDNN_OPTS=1) is the one the
    framework read."""
    kernels = result["system"]["cpu_kernels"]
    assert kernels["library"] and isinstance(kernels["onednn"], bool) and kernels["why"], kernels
    given = strategy(name).rank_environment(Cell.from_dict(result["cell"]))
    if given:
        assert kernels["why"] in {f"{key}={value}" for key, value in given.items()}, kernels
        assert kernels["onednn"], kernels


# A target every window meets: the ranks stop together after the first ``windows``
# (test_several_ranks_measure_adaptively_together has the target no window meets).
MET_AT_ONCE = replace(MEASURE, target_ci=10.0, max_windows=4)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_runner_measures_and_ranks_agree(tmp_path, monkeypatch, name):
    devices = 1 if strategy(name).one_process else 2  # one device per process on CPU
    options = KEEP_TIMELINE if name == "horovod-tf" else ()
    users_temporary = tmp_path / "users-tmp"  # the ranks' TMPDIR, as the user's /tmp
    users_temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(users_temporary))
    status, result = measure(tmp_path, name, devices, MET_AT_ONCE, options=options)
    assert status == "ok", (result["reason"], (tmp_path / "cell.log").read_text()[-3000:])
    # what the cell's Python processes wrote there (TensorFlow's autograph sources,
    # torchrun's log folder) went to the launch's scratch folder, removed with it
    # (dpscale.runner.temporary)
    assert not sorted(users_temporary.iterdir()), sorted(users_temporary.rglob("*"))[:5]
    measurement = result["measurement"]
    assert len(measurement["per_rank_window_seconds"]) == devices
    assert measurement["summary"]["img_s"]["n"] == MEASURE.windows
    assert measurement["adaptive"]["windows_run"] == MEASURE.windows
    assert [len(w) for w in measurement["per_rank_window_seconds"]] == [MEASURE.windows] * devices
    checksums = measurement["rank_param_checksums"]
    assert len(checksums) == devices and len(set(checksums)) == 1, checksums
    assert result["framework"] == strategy(name).framework
    assert result["model_info"]["trainable_params"] == MODEL.spec().trainable_params()
    check_cpu_kernels(result, name)
    if name == "horovod-tf":
        check_horovod_timeline(tmp_path, result)


@pytest.mark.parametrize("name", sorted(n for n in STRATEGIES if not strategy(n).one_process))
def test_several_ranks_measure_adaptively_together(tmp_path, name):
    """A target no window meets: the ranks add windows together (Rank.agree) up to
    max_windows (the target met at once: test_runner_measures_and_ranks_agree)."""
    windows_run = 4
    adaptive = Measure(
        warmup_steps=1,
        windows=2,
        steps_per_window=1,
        timeout_s=600,
        target_ci=1e-9,
        max_windows=windows_run,
    )
    cell = Cell("test", name, MODEL, "synthetic", 1, 2, 2, measure=adaptive)
    out = cell.result_path(tmp_path / "results")
    status = launcher.launch(cell, out, prefix_for(strategy(name).env), tmp_path / "cell.log")
    result = read_result(out)
    assert status == "ok", (result["reason"], (tmp_path / "cell.log").read_text()[-3000:])
    measurement = result["measurement"]
    assert measurement["adaptive"]["windows_run"] == windows_run
    assert [len(w) for w in measurement["per_rank_window_seconds"]] == [windows_run] * 2
    assert len(set(measurement["rank_param_checksums"])) == 1


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


def declared_remedies() -> list[tuple[str, Comm]]:
    """Every remedy each strategy declares it applies on CPU; its bucket size and fusion
    cycle time, where it sets them, ride on its first remedy's cell (each is checked as
    applied, and a 2-rank cell, Horovod's above all, is among the suite's slowest)."""
    found = []
    for name, declared in sorted(STRATEGIES.items()):
        support = declared.comm
        options = {
            "bucket_mb": 1.0 if support.bucket else None,
            "cycle_ms": 5.0 if support.cycle else None,
        }
        cells = [parse(r) for r in support.remedies if r not in dict(support.cuda_only)]
        if any(options.values()):
            cells = [replace((cells or [Comm()])[0], **options), *cells[1:]]
        found += [(name, comm) for comm in cells]
    return found


@pytest.mark.parametrize(("name", "comm"), declared_remedies(), ids=str)
def test_every_declared_remedy_runs_and_leaves_the_ranks_identical(tmp_path, name, comm):
    status, result = measure(tmp_path, name, 2, comm=comm)
    assert status == "ok", (result["reason"], (tmp_path / "cell.log").read_text()[-3000:])
    assert len(set(result["measurement"]["rank_param_checksums"])) == 1
    applied = result["system"]["comm"]
    assert applied["remedy"] == comm.key
    if comm.bucket_mb is not None:
        assert applied["bucket_mb"] == comm.bucket_mb
    if comm.cycle_ms is not None:
        assert applied["cycle_ms"] == comm.cycle_ms
    if comm.name != "none":
        assert applied["wire_ratio"] >= 1  # recorded as applied, not as configured


@pytest.mark.parametrize(
    ("name", "remedy"),
    [(n, r) for n, s in sorted(STRATEGIES.items()) for r in s.comm.collectives if r != "bf16"],
)
def test_collectives_time_each_remedy_s_own_path_with_its_bytes_on_the_wire(tmp_path, name, remedy):
    comm = parse(remedy)
    cell = Cell(
        "test",
        name,
        MODEL,
        "collectives",
        1,
        2,
        0,
        measure=MEASURE,
        collectives=Collectives(4, 65536, 16),  # PowerSGD: a 1 x 1 matrix, then larger
        comm=comm,
    )
    out = cell.result_path(tmp_path / "results")
    status = launcher.launch(cell, out, prefix_for(strategy(name).env), tmp_path / "cell.log")
    result = read_result(out)
    assert status == "ok", result["reason"]
    assert comm.key in result["collectives"]["op"]
    for size in result["collectives"]["sizes"]:
        assert size["wire_bytes"] == wire_bytes(comm, size["message_bytes"])
        if size["message_bytes"] >= 4096 and comm.nominal_ratio != 1.0:  # it compresses
            assert size["wire_bytes"] < size["message_bytes"]
        if comm.nominal_ratio == 1.0:  # push-pull: 2-bit's path, nothing compressed
            assert size["wire_bytes"] == size["message_bytes"]


BF16_ON_CPU = """
import os
import sys
import tempfile
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
try:
    model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    model(torch.ones(1, 2)).sum().backward()
    print("applied")
except Exception as error:
    print(error)
sys.stdout.flush()
os._exit(0)  # no interpreter finalization beside gloo's worker (docs/decisions/gloo-exit.md)
"""


def test_the_bf16_refusal_quoted_in_the_skip_reason_is_torch_s_own():
    """bf16 on a CPU cell is skipped at plan time with torch's words: torch still says them."""
    refusal = dict(STRATEGIES["torch-ddp"].comm.cuda_only)["bf16"]
    python = prefix_for("torch") / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", BF16_ON_CPU], capture_output=True, text=True, timeout=120, check=True
    )
    said = done.stdout.strip().splitlines()[-1]
    assert said != "applied" and f"'{said}'" in refusal, (said, refusal)
