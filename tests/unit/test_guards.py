"""What keeps a hung rank from hanging its cell, without starting a framework: the first
collective's deadline and the step watchdog (runner.faults), wired around a rank's steps and
its training backend (runner.measure.Guards), and the reasons the launcher makes of them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from conftest import make_cell
from dpscale.launch import failures
from dpscale.runner.faults import stalled_line
from dpscale.runner.measure import Guards


@dataclass
class FakeRank:
    rank: int = 0
    size: int = 2
    times_out_collectives: bool = False


class FakeBackend:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def planned(self, total_steps: int, warmup_steps: int) -> None:
        self.calls.append("planned")

    def set_lr(self, lr: float) -> None:
        self.calls.append("set_lr")

    def train_step(self, images, labels):
        self.calls.append("train_step")
        return 1.0, 1

    def evaluate(self, images, labels):
        self.calls.append("evaluate")
        return 1.0, 1

    def sync(self) -> None:
        self.calls.append("sync")

    def reduce_sum(self, values):
        self.calls.append("reduce_sum")
        return list(values)

    def reduce_max(self, values):
        return list(values)


def test_the_ranks_behind_the_others_are_named():
    assert stalled_line({0: 5, 1: 1}, rank=0, bound_s=30) == (
        "rank 1 stopped after step 1: rank 0 waited 30 s at step 5"
    )
    assert stalled_line({0: 5, 1: 3, 2: 3}, rank=0, bound_s=30).startswith(
        "ranks 1, 2 stopped after step 3"
    )
    assert stalled_line({0: 4, 1: 4}, rank=1, bound_s=30) == (
        "every rank entered step 4; it did not end within 30 s"
    )


def test_a_stalled_rank_is_the_reason_whatever_the_launcher_says_next():
    cell = make_cell(strategy="mxnet-dist", devices=2)
    log = (
        "[dpscale rank 0] rank 1 stopped after step 1: rank 0 waited 30 s at step 3\n"
        "[dpscale mxnet_ps] worker 0 exited with code 5; stopping the job\n"
    )
    assert failures.failure_reason(cell, 5, log) == (
        "failed",
        "rank 1 stopped after step 1: rank 0 waited 30 s at step 3 "
        "(twice measure.collective_timeout_s)",
    )


def test_steps_are_counted_and_the_first_collective_deadline_passes(tmp_path):
    guards = Guards(make_cell(devices=2), tmp_path / "cell.json", FakeRank())
    ran: list[str] = []
    step, sync = guards.steps(lambda: ran.append("step"), lambda: ran.append("sync"))
    for _ in range(3):
        step()
    sync()
    folder = guards.deadline.folder
    assert ran == ["step", "step", "step", "sync"]
    assert (folder / "arrived.rank0").exists()
    assert (folder / "steps.rank0").read_text() == "3"
    assert not guards.deadline.pending  # the first sync passed the deadline
    assert guards.watchdog.waiting_since is None  # no call under the clock any more


def test_a_training_backend_s_first_step_is_under_the_deadline(tmp_path):
    fake = FakeBackend()
    guards = Guards(make_cell(devices=2), tmp_path / "cell.json", FakeRank())
    backend = guards.backend(fake)
    assert backend.train_step(None, None) == (1.0, 1)
    assert not guards.deadline.pending  # passed as the first step returned
    backend.evaluate(None, None)
    assert backend.reduce_sum([1.0]) == [1.0]
    assert fake.calls == ["train_step", "evaluate", "reduce_sum"]
    assert (guards.deadline.folder / "steps.rank0").read_text() == "1"


@pytest.mark.parametrize(
    ("rank", "expected"),
    [(FakeRank(size=1), (False, False)), (FakeRank(times_out_collectives=True), (True, False))],
    ids=["one process", "framework with its own timeout"],
)
def test_guards_apply_only_where_needed(tmp_path, rank, expected):
    guards = Guards(make_cell(devices=rank.size), tmp_path / "cell.json", rank)
    assert (guards.deadline is not None, guards.watchdog is not None) == expected
