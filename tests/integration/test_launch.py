"""The launcher always leaves a valid result, whatever the runner does."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from conftest import make_cell
from dpscale.launch import checks, contention, failures, launcher
from dpscale.launch.kinds import kind
from dpscale.plan.result import read_result
from dpscale.plan.strategy import Strategy
from helpers.quiet import machine_bench_lock, wait_for_quiet

FAKE_RUNNER = textwrap.dedent(
    """
    import sys, time
    from dpscale.plan.result import now_iso
    from dpscale.runner.records import write_synthetic_result
    from dpscale.runner.support import parse_runner_args
    cell, out = parse_runner_args()
    behaviour = "{behaviour}"
    if behaviour == "crash":
        raise RuntimeError("boom in the model")
    if behaviour == "oom":
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    if behaviour == "hang":
        time.sleep(600)
    if behaviour == "silent":
        sys.exit(0)
    windows = [[0.5, 0.6, 0.55]]
    if behaviour == "spin":  # CPU-bound timed windows of about 3 s on one core
        from dpscale.runner.timing import time_windows

        def step():
            end = time.perf_counter() + 0.1
            while time.perf_counter() < end:
                pass

        windows = [time_windows(step, lambda: None, 1, 6, 5)]
    write_synthetic_result(cell, out, started_at=now_iso(), per_rank_windows=windows,
        framework="fake", framework_versions={{"fake": "1"}}, threads_used=1, trainable_params=1)
    """
)


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """An 'environment' whose python is this interpreter, and a fake runner module."""
    monkeypatch.setenv("DPSCALE_LOCK_DIR", str(tmp_path))  # not the machine's bench lock
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    modules = tmp_path / "modules"
    modules.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(modules))

    def use(behaviour: str) -> Path:
        (modules / f"fake_runner_{behaviour}.py").write_text(
            FAKE_RUNNER.format(behaviour=behaviour)
        )
        fake = Strategy(
            "torch-ddp", "fake", "fake", "single", f"fake_runner_{behaviour}", False, True
        )
        monkeypatch.setattr(launcher, "strategy", lambda name: fake)
        monkeypatch.setattr(failures, "strategy", lambda name: fake)  # its failure reasons
        return prefix

    return use


def run(cell, prefix, tmp_path):
    out = cell.result_path(tmp_path / "results")
    status = launcher.launch(cell, out, prefix, tmp_path / "cell.log")
    return status, read_result(out)


def test_ok_runner(fake_env, tmp_path):
    status, result = run(make_cell(), fake_env("ok"), tmp_path)
    assert status == "ok" and result["reason"] is None
    assert result["measurement"]["summary"]["img_s"]["n"] == 3


def test_crash_is_a_failed_result_with_the_error(fake_env, tmp_path):
    status, result = run(make_cell(), fake_env("crash"), tmp_path)
    assert status == "failed"
    assert "boom in the model" in result["reason"]
    assert "Traceback" in result["log_tail"]


def test_out_of_memory_is_recognised(fake_env, tmp_path):
    status, result = run(make_cell(), fake_env("oom"), tmp_path)
    assert status == "oom"


def test_runner_that_writes_nothing(fake_env, tmp_path):
    status, result = run(make_cell(), fake_env("silent"), tmp_path)
    assert status == "failed" and "wrote no result" in result["reason"]


def test_timeout_kills_the_runner(fake_env, tmp_path):
    cell = make_cell()
    cell = type(cell)(**{**cell.__dict__, "measure": type(cell.measure)(1, 3, 2, timeout_s=2)})
    status, result = run(cell, fake_env("hang"), tmp_path)
    assert status == "failed" and "timed out after 2 s" in result["reason"]


def test_statically_skipped_cell_needs_no_environment(tmp_path):
    cell = make_cell(strategy="torch-dp", devices=2, skip_reason="one process per node only")
    status, result = run(cell, Path("/nonexistent"), tmp_path)
    assert status == "skipped" and result["reason"] == "one process per node only"


def test_oversubscribed_cpu_cell_is_skipped_with_the_numbers(tmp_path):
    cpus = len(os.sched_getaffinity(0))
    cell = make_cell(devices=cpus + 1)
    status, result = run(cell, Path("/nonexistent"), tmp_path)
    assert status == "skipped"
    assert f"this machine has {cpus}" in result["reason"]


def test_gpu_cell_without_gpus_fails_with_a_clear_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(checks, "nvidia_gpus", lambda: [])
    status, result = run(make_cell(devices=2, accelerator="cuda"), Path("/nonexistent"), tmp_path)
    assert status == "failed"
    assert result["reason"].startswith("cell asks for 2 GPUs per node, the job sees 0")


def test_cell_json_round_trip():
    cell = make_cell(devices=2, batch=32)
    again = type(cell).from_json(cell.to_json())
    assert again == cell
    assert json.loads(cell.to_json())["global_batch"] == 64


def test_reason_is_this_launch_s_error_not_an_earlier_run_s(fake_env, tmp_path):
    (tmp_path / "cell.log").write_text("RuntimeError: CUDA out of memory (an earlier run)\n")
    status, result = run(make_cell(), fake_env("crash"), tmp_path)
    assert status == "failed"
    assert "boom in the model" in result["reason"]
    assert "earlier run" not in result["log_tail"]


def test_reason_is_the_rank_s_exception_not_the_launcher_s_summary():
    log = (
        "[1]<stderr>:Traceback (most recent call last):\n"
        "[1]<stderr>:ValueError: MXNet runners measure precision 'fp32' only\n"
        "RuntimeError: Horovod detected that one or more processes exited with non-zero status\n"
        "Exit code: 1\n"
    )
    status, reason = failures.classify_failure(1, log, rank_prefix=kind("horovod").rank_prefix)
    assert status == "failed"
    assert (
        reason
        == "runner exited with code 1: ValueError: MXNet runners measure precision 'fp32' only"
    )


def test_multi_process_launchers_start_one_process_per_device(tmp_path):
    from dpscale.launch.kinds import HOST_PYTHON, kind, runner_argv

    cell = make_cell(strategy="mxnet-dist", devices=2, options=(("mxnet_servers", 3),))
    python = [str(tmp_path / "env" / "bin" / "python")]
    runner = runner_argv("m", Path("c.json"), Path("o.json"))
    hvd = kind("horovod").local(cell, python, runner)
    assert hvd[:9] == [
        *python,
        "-m",
        "dpscale.launch.starters.horovodrun",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--gloo",
        *python,
    ]
    ps = kind("mxnet").local(cell, python, runner)
    assert ps[:6] == [
        HOST_PYTHON,
        "-m",
        "dpscale.launch.starters.mxnet_ps",
        "--workers=2",
        "--servers=3",
        "--timeout=60",
    ]
    assert ps[ps.index("--") + 1 :] == [
        *python,
        "-m",
        "m",
        "--cell-file",
        "c.json",
        "--out",
        "o.json",
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs: needs root")
def test_a_full_disk_is_one_line_and_the_earlier_result_is_kept(tmp_path):
    import subprocess

    from dpscale.plan.result import make_result, now_iso, write_result

    results = tmp_path / "results"
    results.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(results)], check=True)
    try:
        cell = make_cell(strategy="torch-dp", devices=2, skip_reason="one process per node only")
        out = cell.result_path(results)
        system = {"host": "h", "cpu_model": "c", "python": "3.11"}
        earlier = make_result(cell, "failed", started_at=now_iso(), system=system, reason="old")
        write_result(out, earlier)
        kept = {p: p.read_bytes() for p in results.rglob("*.json")}
        with open(results / "filler", "wb") as filler, pytest.raises(OSError):  # fill it up
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "dpscale.launch",
                f"--cell={cell.to_json()}",
                "--env=/none",
                f"--out={out}",
                f"--log={tmp_path / 'cell.log'}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode != 0
        assert done.stderr.strip().splitlines() == [
            f"dpscale: cannot record {out}: No space left on device"
        ]
        assert {p: p.read_bytes() for p in results.rglob("*.json")} == kept
        assert not list(results.rglob("*.tmp"))
    finally:
        subprocess.run(["umount", str(results)], check=True, timeout=60)


BUSY_NEIGHBOUR = (
    "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
)


@contextmanager
def busy_neighbour(seconds: int = 40) -> Iterator[int]:
    """A CPU-bound process that is not the launcher's descendant (its parent, a shell,
    exits at once), bounded in time by itself and killed on the way out."""
    shell = subprocess.run(
        [
            "sh",
            "-c",
            f'"{sys.executable}" -c "$0" >/dev/null 2>&1 & echo $!',
            BUSY_NEIGHBOUR.format(seconds=seconds),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    pid = int(shell.stdout.strip())
    try:
        time.sleep(0.5)  # running before the cell starts
        yield pid
    finally:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def whole_machine_cell():
    """One CPU-bound process, but a cell that claims every CPU: no core is spare."""
    return make_cell(threads_per_device=len(os.sched_getaffinity(0)))


def test_busy_neighbour_is_flagged(fake_env, tmp_path):
    prefix = fake_env("spin")
    with busy_neighbour() as pid:
        status, result = run(whole_machine_cell(), prefix, tmp_path)
        assert Path(f"/proc/{pid}").exists()  # it ran the whole time
    assert status == "ok"
    contention = result["system"]["contention"]
    assert contention["span"] == "timed windows"
    assert contention["samples"] >= 4
    assert contention["foreign_cpu_cores_mean"] > 0.5  # the neighbour's core
    assert result["quality"] == "contaminated", result["quality_reason"]
    # the cell's own spinning process was seen as the cell's, however busy the machine
    assert contention["cell_cpu_cores_mean"] > 0


def test_cell_on_a_quiet_machine_is_ok(fake_env, tmp_path):
    """On a quiet machine (no dpscale cell measures, other processes below the noise
    threshold) the verdict is ok."""
    from dpscale.launch.contention import NOISY_CORES

    with machine_bench_lock():
        wait_for_quiet(below_cores=NOISY_CORES / 2)
        status, result = run(make_cell(threads_per_device=1), fake_env("spin"), tmp_path)
    contention = result["system"]["contention"]
    assert status == "ok"
    assert contention["spare_cpus"] == contention["cpus"] - 1
    assert result["quality"] == "ok", f"{result['quality_reason']}: {json.dumps(contention)}"


def test_a_child_that_exits_still_counts_as_the_cell_s():
    sampler = contention.ContentionSampler(interval_s=0.1)
    sampler.start()
    try:
        code = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    finally:
        samples = sampler.stop()
    own = (samples[-1].own - samples[0].own) / contention.CLOCK_TICKS
    assert own >= 0.5  # the child's 0.6 CPU-seconds, though it is gone
