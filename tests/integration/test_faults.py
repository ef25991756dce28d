"""Real faults end in a recorded status within a bounded time, and leave no process behind.

Each test starts a real cell through the launcher (framework environments built once under
.envs/) and breaks it for real: a rank is SIGKILLed while it measures, a rank never reaches
the first all-reduce (of a synthetic or a training cell), an MXNet worker stops after its
first step, a cell runs under an address-space cap it does not fit in, a dataset is damaged.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from functools import cache
from pathlib import Path

import pytest

from conftest import MULTI_PROCESS
from dpscale.launch import launcher
from dpscale.launch.setup.envs import ensure_env
from dpscale.plan.cell import Cell, Measure, ModelConfig
from dpscale.plan.result import read_result
from dpscale.registry import strategy
from helpers.processes import GRACE_S, cmdline, environ, marked, wait_for

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]

MODEL = ModelConfig("resnet18", "imagenet", 32, 10)
# Short enough that the tests waiting it out cost little, long above a tiny step on 2 cores.
COLLECTIVE_TIMEOUT_S = 6
# Per launch kind: how its launcher tells a rank its number ((variable, value) pairs of
# rank 1's worker), and how the cell's reason names the killed rank (mxnet_ps: by its launch
# index). Every multi-process strategy of the registry is tested; a new kind must add itself.
RANK_1 = {
    "torch": {"RANK": "1"},
    "horovod": {"HOROVOD_RANK": "1"},
    "mxnet": {"DMLC_ROLE": "worker", "DPSCALE_LOCAL_RANK": "1"},
}
KILLED = {
    "torch": "rank 1 was killed by SIGKILL",
    "horovod": "rank 1 was killed by SIGKILL",
    "mxnet": "worker 1 was killed by SIGKILL",
}


@cache
def prefix_for(name: str) -> Path:
    return ensure_env(strategy(name).env)


class Background:
    """launcher.launch in a thread, so the test can break the cell while it runs."""

    def __init__(self, cell: Cell, tmp_path: Path) -> None:
        self.cell, self.out = cell, cell.result_path(tmp_path / "results")
        self.log = tmp_path / "cell.log"
        self.status: list[str] = []
        prefix = prefix_for(cell.strategy)
        self.thread = threading.Thread(
            target=lambda: self.status.append(launcher.launch(cell, self.out, prefix, self.log))
        )
        self.thread.start()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def join(self, timeout_s: float) -> tuple[str, dict]:
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), f"launch still running after {timeout_s} s"
        result = read_result(self.out)
        assert result["status"] == self.status[0]
        return self.status[0], result


def cell_of(name: str, **measure) -> Cell:
    return Cell("faults", name, MODEL, "synthetic", 1, 2, 2, measure=Measure(**measure))


def rank_1_worker(name: str, mark: str) -> int | None:
    module = strategy(name).runner
    for pid in marked(mark):
        env = environ(pid)
        wanted = RANK_1[strategy(name).launch]
        if module in cmdline(pid) and all(env.get(k) == v for k, v in wanted.items()):
            return pid
    return None


@pytest.mark.parametrize("name", MULTI_PROCESS)
def test_a_rank_killed_mid_measurement_fails_the_cell_naming_rank_and_signal(tmp_path, mark, name):
    cell = cell_of(name, warmup_steps=1, windows=1000, steps_per_window=1, timeout_s=300)
    run = Background(cell, tmp_path)
    wait_for(lambda: "window 1/" in run.log_text(), cell.measure.timeout_s, "first window")
    victim = wait_for(lambda: rank_1_worker(name, mark), 10, "rank 1's process")
    killed_at = time.monotonic()
    subprocess.run(["kill", "-KILL", str(victim)], check=True)

    status, result = run.join(cell.measure.timeout_s + GRACE_S)
    print(f"{name}: {time.monotonic() - killed_at:.1f} s after the kill: {result['reason']}")
    print([line for line in run.log_text().splitlines() if "leftover" in line])
    assert status == "failed"
    assert result["reason"].startswith(KILLED[strategy(name).launch]), (
        result["reason"],
        run.log_text()[-3000:],
    )
    assert "timed out" not in result["reason"]
    assert not marked(mark), "a process of the cell outlived its launch"


def first_arrival(mark: str) -> bool:
    """Whether a rank of the cell has marked its arrival at the first collective."""
    folders = {environ(pid).get("DPSCALE_SCRATCH") for pid in marked(mark)} - {None}
    return any(any(Path(f).glob("arrived.rank*")) for f in folders)


def run_past_first_arrival(cell: Cell, tmp_path: Path, mark: str) -> tuple[str, dict, float]:
    """Launch the cell; its status and result, and the seconds from rank 0's arrival at the
    first collective to the result."""
    run = Background(cell, tmp_path)
    wait_for(lambda: first_arrival(mark), cell.measure.timeout_s, "rank 0 at the collective")
    arrived = time.monotonic()
    status, result = run.join(cell.measure.timeout_s + GRACE_S)
    return status, result, time.monotonic() - arrived


@pytest.mark.parametrize("name", MULTI_PROCESS)
def test_a_rank_that_never_reaches_the_collective_fails_the_cell_after_the_collective_timeout(
    tmp_path, mark, monkeypatch, name
):
    monkeypatch.setenv("DPSCALE_FAULT", "hang_rank:1")
    cell = cell_of(
        name,
        warmup_steps=1,
        windows=2,
        steps_per_window=1,
        timeout_s=300,
        collective_timeout_s=COLLECTIVE_TIMEOUT_S,
    )
    status, result, waited = run_past_first_arrival(cell, tmp_path, mark)
    print(f"{name}: {waited:.1f} s after rank 0 reached the collective: {result['reason']}")
    assert status == "failed"
    assert (
        f"rank 1 did not reach the collective within {COLLECTIVE_TIMEOUT_S} s" in result["reason"]
    ), result["reason"]
    assert waited < cell.measure.collective_timeout_s + GRACE_S  # not the cell's timeout
    assert not marked(mark)


def test_a_cell_that_does_not_fit_its_memory_cap_ends_oom_naming_the_batch(tmp_path, mark):
    cell = Cell(
        "faults",
        "torch-dp",
        MODEL,
        "synthetic",
        1,
        1,
        4096,
        measure=Measure(1, 2, 1, timeout_s=300, memory_limit_mb=1536),
    )
    out = cell.result_path(tmp_path / "results")
    started = time.monotonic()
    done = subprocess.run(  # as the workflow runs it: the job must succeed, the study go on
        [
            sys.executable,
            "-m",
            "dpscale.launch",
            f"--cell={cell.to_json()}",
            f"--env={prefix_for('torch-dp')}",
            f"--out={out}",
            f"--log={tmp_path / 'cell.log'}",
        ],
        capture_output=True,
        text=True,
        timeout=cell.measure.timeout_s + GRACE_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = read_result(out)
    assert result["status"] == "oom", (result["reason"], result["log_tail"][-2000:])
    assert "batch 4096 per device" in result["reason"]
    allocator = [ln for ln in result["log_tail"].splitlines() if "alloc" in ln][:1]
    print(f"{time.monotonic() - started:.1f} s after the start: {result['reason']} {allocator}")


def training_cell(data: Path, measure: Measure) -> Cell:
    """A 2-rank torch-ddp training cell on the prepared digits at ``data``, one epoch."""
    from dpscale.plan.cell import Training

    training = Training(
        "digits", str(data), 1, "none", 0.01, 32, 0.0, "cosine", 0.9, 0.0, False, 0.5
    )
    model = ModelConfig("resnet18", "imagenet", 16, 10)
    return Cell("faults", "torch-ddp", model, "train", 1, 2, 8, measure=measure, training=training)


def test_a_rank_that_never_reaches_the_first_training_step_fails_the_cell(
    tmp_path, mark, monkeypatch
):
    from dpscale.launch.setup.dataprep import prepare_digits

    data = prepare_digits(tmp_path / "data", image_size=16)
    monkeypatch.setenv("DPSCALE_FAULT", "hang_rank:1")
    cell = training_cell(data, Measure(timeout_s=300, collective_timeout_s=COLLECTIVE_TIMEOUT_S))
    status, result, waited = run_past_first_arrival(cell, tmp_path, mark)
    print(f"training: {waited:.1f} s after rank 0 reached the collective: {result['reason']}")
    assert status == "failed"
    assert result["reason"].startswith(
        f"rank 1 did not reach the collective within {COLLECTIVE_TIMEOUT_S} s "
        "(measure.collective_timeout_s)"
    ), result["reason"]
    assert waited < cell.measure.collective_timeout_s + GRACE_S  # not the cell's timeout
    assert not marked(mark)


def steps_entered(mark: str, rank: int) -> int:
    """How many steps a rank of the cell has entered (runner.faults.StepWatchdog's count)."""
    folders = {environ(pid).get("DPSCALE_SCRATCH") for pid in marked(mark)} - {None}
    counts = [Path(f) / f"steps.rank{rank}" for f in folders]
    return max((int(p.read_text() or 0) for p in counts if p.exists()), default=0)


def test_an_mxnet_worker_that_stops_after_its_first_step_fails_the_cell(
    tmp_path, mark, monkeypatch
):
    """ps-lite has no timeout: the step watchdog ends the cell at twice the collective
    timeout, naming the worker that stopped."""
    monkeypatch.setenv("DPSCALE_FAULT", "stall_rank:1")
    cell = cell_of(
        "mxnet-dist",
        warmup_steps=1,
        windows=5,
        steps_per_window=2,
        timeout_s=300,
        collective_timeout_s=COLLECTIVE_TIMEOUT_S,
    )
    run = Background(cell, tmp_path)
    wait_for(lambda: steps_entered(mark, 0) >= 2, cell.measure.timeout_s, "rank 0's step 2")
    stalled = time.monotonic()
    status, result = run.join(cell.measure.timeout_s + GRACE_S)
    waited = time.monotonic() - stalled
    print(f"mxnet-dist: {waited:.1f} s after rank 0 entered step 2: {result['reason']}")
    assert status == "failed"
    assert result["reason"].startswith(
        f"rank 1 stopped after step 1: rank 0 waited {2 * COLLECTIVE_TIMEOUT_S} s"
    ), (
        result["reason"],
        run.log_text()[-3000:],
    )
    assert result["reason"].endswith("(twice measure.collective_timeout_s)")
    assert waited < 2 * cell.measure.collective_timeout_s + GRACE_S  # not the cell's timeout
    assert not marked(mark)


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_corrupt_or_missing_dataset_fails_the_training_cell_naming_the_file(
    tmp_path, mark, damage
):
    from dpscale.launch.setup.dataprep import prepare_digits

    data = prepare_digits(tmp_path / "data", image_size=16)
    if damage == "corrupt":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    else:
        data.unlink()
    cell = training_cell(data, Measure(timeout_s=300))
    status, result = Background(cell, tmp_path).join(cell.measure.timeout_s + GRACE_S)
    print(f"{damage}: {result['reason']}")
    assert status == "failed"
    expected = "is corrupt: sha256" if damage == "corrupt" else "does not exist; prepare it first"
    assert f"DatasetError: dataset file {data} {expected}" in result["reason"], result["reason"]


@pytest.mark.parametrize("name", MULTI_PROCESS)
def test_a_rank_slow_to_initialise_shows_in_the_init_phase(tmp_path, monkeypatch, name):
    """Rank 1 sleeps before the first barrier (DPSCALE_FAULT=stall_init:1): the cell is
    ok, the stall lies in its init phase, and the phases add up to the time from the launch
    to the first timed window."""
    from dpscale.runner.startup import STALL_INIT_S

    monkeypatch.setenv("DPSCALE_FAULT", "stall_init:1")
    cell = cell_of(name, warmup_steps=2, windows=2, steps_per_window=1, timeout_s=300)
    status, result = Background(cell, tmp_path).join(cell.measure.timeout_s + GRACE_S)
    assert status == "ok", result["reason"]
    start = result["startup"]
    print(f"{name}: {start['phases_s']}")
    ranks = start["per_rank_s"]
    assert ranks[1]["initialised"] - ranks[1]["imported"] >= STALL_INIT_S  # rank 1's own
    # the cell's init phase starts when its last rank has imported: all of the stall but
    # the ranks' spread in importing lies in it
    spread = max(r["imported"] for r in ranks) - min(r["imported"] for r in ranks)
    assert start["phases_s"]["init"] >= STALL_INIT_S - spread
    # the cell's first window starts when its last rank starts it (timed_span: its first)
    first_window = max(rank["window"] for rank in ranks)
    assert sum(start["phases_s"].values()) == pytest.approx(first_window, abs=1e-6)
    assert start["to_first_window_s"] == pytest.approx(first_window, abs=1e-6)
    first_rank = result["measurement"]["timed_span"][0] - start["launch_time"]
    assert first_rank <= first_window
