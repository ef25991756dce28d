"""A folder cell's loader workers count as CPUs beside its ranks' threads: the launcher's
check skips a cell whose ranks x (threads + workers) exceed the machine's CPUs, and the
contention record names such a cell oversubscribed, as it does for ranks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conftest import make_cell
from dpscale.launch import checks
from dpscale.launch import contention as c
from dpscale.plan.cell import FolderInput, Measure

TICK = c.CLOCK_TICKS


def folder_cell(devices: int = 2, workers: int = 2, threads: int = 1, **measure):
    return replace(
        make_cell(devices=devices, mode="folder", threads_per_device=threads),
        image_folder=FolderInput("images", workers=workers),
        measure=Measure(windows=3, steps_per_window=2, **measure),
    )


@pytest.fixture
def four_cpus(monkeypatch):
    monkeypatch.setattr(checks, "usable_cpus", lambda: 4)


def test_loader_workers_beside_each_rank_can_oversubscribe_the_machine(four_cpus):
    """2 ranks x (1 thread + 2 workers) = 6 CPUs on 4: skipped, naming the workers; the
    same ranks with synthetic data (2 CPUs) run."""
    reason = checks.runtime_skip_reason(folder_cell())
    assert reason is not None and reason.startswith(
        "needs 2 device(s) x (1 thread(s) + 2 loader worker(s), image_folder.workers) "
        "= 6 CPUs, this machine has 4: oversubscribed timings are meaningless"
    )
    assert checks.runtime_skip_reason(make_cell(devices=2)) is None


@pytest.mark.parametrize(
    ("devices", "workers", "threads", "fits"),
    [
        (2, 1, 1, True),  # 2 x (1 + 1) = 4: exactly the machine
        (1, 3, 1, True),  # 1 x (1 + 3) = 4
        (1, 2, 2, True),  # 1 x (2 + 2) = 4
        (1, 3, 2, False),  # 1 x (2 + 3) = 5
        (4, 0, 1, True),  # workers 0: the rank loads its own batches, as synthetic
        (3, 1, 1, False),  # 3 x (1 + 1) = 6
    ],
)
def test_the_check_counts_ranks_times_threads_and_workers(
    four_cpus, devices, workers, threads, fits
):
    cell = folder_cell(devices=devices, workers=workers, threads=threads)
    assert cell.cpus_per_rank == threads + workers
    assert (checks.runtime_skip_reason(cell) is None) is fits


def test_an_oversubscribed_folder_cell_runs_where_asked_and_is_named_so(four_cpus):
    """measure.oversubscribe: it runs, and its contention record counts the workers (the
    cores its ranks leave spare, and the oversubscribed verdict)."""
    cell = folder_cell(oversubscribe=True)
    assert checks.runtime_skip_reason(cell) is None
    sampler = c.ContentionSampler(enabled=True, cpus=4)
    busy = 10 * 3.5  # its ranks and workers: 3.5 cores for 10 s, nothing else on the machine
    sampler.samples = [
        c.Sample(wall=0, busy=0, idle=0, steal=0, own=0, loadavg_1m=1.0),
        c.Sample(wall=10, busy=round(busy * TICK), idle=0, steal=0, own=round(busy * TICK),
                 loadavg_1m=1.0),
    ]  # fmt: skip
    result = {"status": "ok", "system": {}, "measurement": {}}
    assert c.annotate(result, sampler, cell) == "contaminated"
    contention = result["system"]["contention"]
    assert contention["cpus_used_by_cell"] == 6 and contention["oversubscribed"] is True
    assert result["quality_reason"].startswith("oversubscribed: 6 CPUs wanted on 4")


def test_a_synthetic_cell_has_no_loader_workers():
    cell = make_cell(devices=2, threads_per_device=3)
    assert cell.loader_workers == 0 and cell.cpus_per_rank == 3
    assert c.cpus_used_by(cell) == 6
