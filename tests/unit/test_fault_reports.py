"""How a failed rank is named: the launchers' own failure reports (as they print them) and
the first-collective deadline, without starting a framework."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO, make_cell
from dpscale.launch import launcher
from dpscale.launch.kinds import describe_exit, kind

TORCHRUN = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
dpscale.strategies.torch_ddp FAILED
------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-21_21:10:24
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 7545)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 7545
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-21_21:10:23
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 7546)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 7546
======================================================
"""
HOROVODRUN = """\
Process 1 exit with status code 137.
Terminating remaining workers after failure of Process 1.
Process 0 exit with status code 143.
RuntimeError: Horovod detected that one or more processes exited with non-zero status, \
thus causing the job to be terminated. The first process to do so was:
Process name: 1
Exit code: 137
"""
MXNET_PS = "[dpscale mxnet_ps] worker 1 was killed by SIGKILL; stopping the job\n"


def test_exit_codes_name_the_signal_whether_popen_or_shell_reports_it():
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(137) == "was killed by SIGKILL"
    assert describe_exit(143) == "was killed by SIGTERM"
    assert describe_exit(1) == "exited with code 1"
    assert describe_exit(255) == "exited with code 255"


def test_each_launch_kind_reads_its_launcher_s_report_of_the_first_failed_rank():
    assert kind("torch").rank_failure(TORCHRUN) == "rank 1 was killed by SIGKILL"
    assert kind("horovod").rank_failure(HOROVODRUN) == "rank 1 was killed by SIGKILL"
    assert kind("mxnet").rank_failure(MXNET_PS) == "worker 1 was killed by SIGKILL"
    for name in ("single", "torch", "horovod", "mxnet"):
        assert kind(name).rank_failure("ValueError: bad cell\n") is None


def test_the_failed_rank_is_the_reason_unless_memory_ran_out():
    cell = make_cell(strategy="torch-ddp", devices=2, batch=64)
    assert launcher.failure_reason(cell, 1, TORCHRUN) == (
        "failed",
        "rank 1 was killed by SIGKILL (the launcher exited with code 1)",
    )
    oom = "RuntimeError: DefaultCPUAllocator: can't allocate memory\n" + TORCHRUN
    assert launcher.failure_reason(cell, 1, oom) == (
        "oom",
        "ran out of memory at batch 64 per device (global 128) (see log_tail)",
    )


def test_a_framework_s_out_of_memory_message_counts_for_its_own_strategy():
    log = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating\n"
    tf_cell = make_cell(strategy="horovod-tf", devices=2, batch=64)
    assert launcher.failure_reason(tf_cell, 1, log)[0] == "oom"
    torch_cell = make_cell(strategy="torch-ddp", devices=2, batch=64)
    assert launcher.failure_reason(torch_cell, 1, log)[0] == "failed"


def test_a_rank_that_raised_keeps_its_exception_in_the_reason():
    cell = make_cell(strategy="horovod-tf", devices=2)
    log = (
        "[1]<stderr>:ValueError: MXNet runners measure precision 'fp32' only\n"
        + HOROVODRUN.replace("137", "1")
    )
    assert launcher.failure_reason(cell, 1, log) == (
        "failed",
        "rank 1 exited with code 1; runner exited with code 1: "
        "ValueError: MXNet runners measure precision 'fp32' only",
    )


def test_torchrun_s_rank_prefix_is_stripped_and_an_early_exception_found():
    cell = make_cell(strategy="torch-ddp", devices=2)
    log = (
        "[rank0]: dpscale.runner.datasets.DatasetError: dataset file d.npz is corrupt\n"
        + "launcher noise\n" * 2000
        + TORCHRUN.replace("-9 (pid: 7546)  (SIGKILL)", "1 (pid: 7546)")
    )
    status, reason = launcher.failure_reason(cell, 1, log)
    assert reason == (
        "rank 1 exited with code 1; runner exited with code 1: "
        "dpscale.runner.datasets.DatasetError: dataset file d.npz is corrupt"
    )


def test_a_missed_collective_is_the_reason_whatever_the_launcher_says_next():
    cell = make_cell(strategy="mxnet-dist", devices=2)
    log = "[dpscale rank 0] rank 1 did not reach the collective within 15 s\n" + MXNET_PS
    status, reason = launcher.failure_reason(cell, 3, log)
    assert status == "failed"
    assert reason.startswith("rank 1 did not reach the collective within 15 s")


DEADLINE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from dpscale.runner.faults import first_collective_deadline
    folder, arrives = Path(sys.argv[1]), sys.argv[2] == "both"
    if arrives:
        (folder / "arrived.rank1").touch()
    step, sync = first_collective_deadline(
        lambda: time.sleep(0 if arrives else 30), lambda: None, 0, 2, 1, folder, 0
    )
    step(); sync()
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
