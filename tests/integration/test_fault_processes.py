"""Fault handling that only real processes show: the first-collective deadline ends a
rank that waits for a missing one, and nothing outlives its killed parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = pytest.mark.side_by_side

DEADLINE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from dpscale.runner.faults import FirstCollectiveDeadline
    folder, arrives = Path(sys.argv[1]), sys.argv[2] == "both"
    if arrives:
        (folder / "arrived.rank1").touch()
    deadline = FirstCollectiveDeadline(0, 2, 1, folder, 0)
    deadline.arrive()
    time.sleep(0 if arrives else 30)  # the first step, its collective waiting for rank 1
    deadline.passed()
    time.sleep(2)  # past the deadline: only a pending deadline ends the process now
    print("finished")
    """
)


def run_deadline(tmp_path, arrives: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", DEADLINE, str(tmp_path), arrives],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


def test_first_collective_deadline_names_the_rank_that_never_arrived(tmp_path):
    done = run_deadline(tmp_path, "rank0")
    assert done.returncode == 3
    assert "[dpscale rank 0] rank 1 did not reach the collective within 1 s" in done.stderr
    assert "finished" not in done.stdout


def test_first_collective_deadline_is_cancelled_once_the_step_finished(tmp_path):
    done = run_deadline(tmp_path, "both")
    assert done.returncode == 0, done.stderr
    assert "finished" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arrived.rank0", "arrived.rank1"]


ORPHAN = textwrap.dedent(
    """
    import subprocess, sys, time
    # this process starts a child and prints its pid, then is SIGKILLed by the test
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
    print(child.pid, flush=True)
    time.sleep(60)
    """
)


GUARDED = (
    "import os, sys; "
    "os.execvp(sys.executable, [sys.executable, '-m', 'dpscale.launch.guard', '--', 'sleep', '60'])"
)


RUNNER = (
    "import time; from dpscale.runner.faults import exit_with_parent; "
    "exit_with_parent(); time.sleep(60)"
)


def gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


@pytest.mark.parametrize("child", [GUARDED, RUNNER], ids=["guard", "exit_with_parent"])
def test_a_process_dies_with_its_killed_parent(child):
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, child], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    pid = int(parent.stdout.readline())
    try:
        time.sleep(0.5)  # the child has set itself up
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        assert gone(pid, timeout_s=10), "the child outlived its killed parent"
    finally:
        if not gone(pid, timeout_s=0):
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait(timeout=10)
        parent.stdout.close()
