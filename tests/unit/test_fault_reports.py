"""How a failed rank is named: the launchers' own failure reports (as they print them) and
the first-collective deadline, without starting a framework."""

from __future__ import annotations

from conftest import make_cell
from dpscale.launch import failures
from dpscale.launch.kinds import kind
from dpscale.launch.rank_exits import RankExit, describe_exit, first_cause, in_causal_order

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
# The race CI met: rank 1 SIGKILLed, gloo aborted rank 0 within the same second, and
# torchrun, breaking the tie by local rank, named the survivor's abort as the root cause.
TORCHRUN_SAME_SECOND = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
======================================================
dpscale.strategies.torch_ddp FAILED
------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-26_10:00:07
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 7546)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 7546
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_10:00:07
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 7545)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 7545
======================================================
"""


def test_exit_codes_name_the_signal_whether_popen_or_shell_reports_it():
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(137) == "was killed by SIGKILL"
    assert describe_exit(143) == "was killed by SIGTERM"
    assert describe_exit(1) == "exited with code 1"
    assert describe_exit(255) == "exited with code 255"


def test_each_launch_kind_reads_its_launcher_s_report_of_the_first_failed_rank():
    assert kind("torch").rank_failure(TORCHRUN) == (
        "rank 1 was killed by SIGKILL, then rank 0 was killed by SIGTERM"
    )
    assert kind("horovod").rank_failure(HOROVODRUN) == (
        "rank 1 was killed by SIGKILL, then rank 0 was killed by SIGTERM"
    )
    assert kind("mxnet").rank_failure(MXNET_PS) == "worker 1 was killed by SIGKILL"
    for name in ("single", "torch", "horovod", "mxnet"):
        assert kind(name).rank_failure("ValueError: bad cell\n") is None


def test_the_failed_rank_is_the_reason_unless_memory_ran_out():
    cell = make_cell(strategy="torch-ddp", devices=2, batch=64)
    assert failures.failure_reason(cell, 1, TORCHRUN) == (
        "failed",
        "rank 1 was killed by SIGKILL, then rank 0 was killed by SIGTERM "
        "(the launcher exited with code 1)",
    )
    oom = "RuntimeError: DefaultCPUAllocator: can't allocate memory\n" + TORCHRUN
    assert failures.failure_reason(cell, 1, oom) == (
        "oom",
        "ran out of memory at batch 64 per device (global 128): "
        "RuntimeError: DefaultCPUAllocator: can't allocate memory",
    )


# what torch 2.11 printed when ResNet-101 at batch 4096 ran out of an H200's memory
# (evidence/2026-11-27-nvidia-h200/gpu_oom_then_next)
CUDA_OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.25 GiB. GPU 0 "
    "has a total capacity of 139.80 GiB of which 4.28 GiB is free. Including non-PyTorch "
    "memory, this process has 135.51 GiB memory in use. If reserved but unallocated memory is "
    "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
)


def test_a_cuda_oom_reason_says_what_was_asked_and_what_the_gpu_had_not_the_advice():
    cell = make_cell(strategy="torch-ddp", devices=1, batch=4096)
    status, reason = failures.failure_reason(cell, 1, "warming up\n" + CUDA_OOM + TORCHRUN)
    assert status == "oom"
    assert reason == (
        "ran out of memory at batch 4096 per device (global 4096): torch.OutOfMemoryError: "
        "CUDA out of memory. Tried to allocate 12.25 GiB. GPU 0 has a total capacity of "
        "139.80 GiB of which 4.28 GiB is free"
    )


def test_a_framework_s_out_of_memory_message_counts_for_its_own_strategy():
    log = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating\n"
    tf_cell = make_cell(strategy="horovod-tf", devices=2, batch=64)
    assert failures.failure_reason(tf_cell, 1, log)[0] == "oom"
    torch_cell = make_cell(strategy="torch-ddp", devices=2, batch=64)
    assert failures.failure_reason(torch_cell, 1, log)[0] == "failed"


def test_a_rank_that_raised_keeps_its_exception_in_the_reason():
    cell = make_cell(strategy="horovod-tf", devices=2)
    log = (
        "[1]<stderr>:ValueError: MXNet runners measure precision 'fp32' only\n"
        + HOROVODRUN.replace("137", "1")
    )
    assert failures.failure_reason(cell, 1, log) == (
        "failed",
        "rank 1 exited with code 1, then rank 0 was killed by SIGTERM; "
        "runner exited with code 1: "
        "ValueError: MXNet runners measure precision 'fp32' only",
    )


def test_torchrun_s_rank_prefix_is_stripped_and_an_early_exception_found():
    cell = make_cell(strategy="torch-ddp", devices=2)
    log = (
        "[rank0]: dpscale.runner.datasets.DatasetError: dataset file d.npz is corrupt\n"
        + "launcher noise\n" * 2000
        + TORCHRUN.replace("-9 (pid: 7546)  (SIGKILL)", "1 (pid: 7546)")
    )
    status, reason = failures.failure_reason(cell, 1, log)
    assert reason == (
        "rank 1 exited with code 1, then rank 0 was killed by SIGTERM; "
        "runner exited with code 1: "
        "dpscale.runner.datasets.DatasetError: dataset file d.npz is corrupt"
    )


def test_a_missed_collective_is_the_reason_whatever_the_launcher_says_next():
    cell = make_cell(strategy="mxnet-dist", devices=2)
    log = "[dpscale rank 0] rank 1 did not reach the collective within 15 s\n" + MXNET_PS
    status, reason = failures.failure_reason(cell, 3, log)
    assert status == "failed"
    assert reason.startswith("rank 1 did not reach the collective within 15 s")


def test_a_kill_stamped_in_the_same_second_as_the_survivor_s_abort_is_named_first():
    cell = make_cell(strategy="torch-ddp", devices=2, batch=64)
    assert failures.failure_reason(cell, 1, TORCHRUN_SAME_SECOND) == (
        "failed",
        "rank 1 was killed by SIGKILL, then rank 0 was killed by SIGABRT "
        "(the launcher exited with code 1)",
    )


def test_the_earlier_stamp_wins_over_how_a_rank_ended():
    later_kill = TORCHRUN_SAME_SECOND.replace(
        "10:00:07\n  host      : localhost\n  rank      : 1",
        "10:00:09\n  host      : localhost\n  rank      : 1",
    )
    assert kind("torch").rank_failure(later_kill) == (
        "rank 0 was killed by SIGABRT, then rank 1 was killed by SIGKILL"
    )


def test_ends_in_one_stamp_go_kill_crash_error_abort_stop():
    exits = [
        RankExit("rank 4", -15),
        RankExit("rank 3", -6),
        RankExit("rank 2", 1),
        RankExit("rank 1", -11),
        RankExit("rank 0", -9),
        RankExit("rank 0", -6),  # the same rank reported again keeps its first end
    ]
    assert [end.who for end in in_causal_order(exits)] == [f"rank {i}" for i in range(5)]
    assert first_cause([]) is None


def test_a_rank_that_raised_before_the_others_were_stopped_is_the_cause():
    cell = make_cell(strategy="torch-ddp", devices=2, batch=64)
    log = "[rank1]: ValueError: bad batch\n" + TORCHRUN.replace(
        "-9 (pid: 7546)  (SIGKILL)", "1 (pid: 7546)"
    )
    assert failures.failure_reason(cell, 1, log) == (
        "failed",
        "rank 1 exited with code 1, then rank 0 was killed by SIGTERM; "
        "runner exited with code 1: ValueError: bad batch",
    )
