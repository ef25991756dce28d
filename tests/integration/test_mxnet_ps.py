"""The ps-lite job starter: roles, exit status, and no process left behind (no MXNet needed)."""

from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

from dpscale.launch.starters import mxnet_ps

# side_by_side: no test here asserts a measured speed or quality (tests/conftest.py)
pytestmark = pytest.mark.side_by_side

# Stands in for a runner: scheduler and servers serve until killed (or until the workers'
# files say they are done), workers do what BEHAVIOUR says.
FAKE = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    role, folder = os.environ["DMLC_ROLE"], Path(sys.argv[1])
    name = role + os.environ.get("DPSCALE_LOCAL_RANK", "") + "-" + str(os.getpid())
    keys = ["DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER",
            "OMP_NUM_THREADS"]
    (folder / name).write_text(" ".join(os.environ.get(k, "-") for k in keys))
    if role != "worker":
        while True:
            if sys.argv[2] == "servers-exit" and len(list(folder.glob("done-*"))) == 2:
                sys.exit(0)
            time.sleep(0.05)
    rank = int(os.environ["DPSCALE_LOCAL_RANK"])
    if sys.argv[2] == "worker-fails" and rank == 1:
        sys.exit(3)
    if sys.argv[2] == "worker-killed" and rank == 1:
        os.kill(os.getpid(), 9)
    if sys.argv[2] == "hang":
        time.sleep(600)
    (folder / f"done-{rank}").write_text("")
    """
)


def run_fake(tmp_path, behaviour: str, timeout_s: float | None = 30) -> int:
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    return mxnet_ps.run(
        [sys.executable, str(script), str(tmp_path), behaviour],
        workers=2,
        servers=2,
        timeout_s=timeout_s,
    )


def started(tmp_path) -> dict[str, list[str]]:
    roles: dict[str, list[str]] = {}
    for path in tmp_path.iterdir():
        if "-" in path.name and not path.name.startswith("done"):
            roles.setdefault(path.name.split("-")[0], []).append(path.read_text())
    return roles


def pids(tmp_path) -> list[int]:
    return [
        int(p.name.rsplit("-", 1)[1])
        for p in tmp_path.iterdir()
        if "-" in p.name and not p.name.startswith("done")
    ]


def all_gone(process_ids: list[int]) -> bool:
    for pid in process_ids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True


@pytest.fixture(autouse=True)
def short_grace(monkeypatch):
    monkeypatch.setattr(mxnet_ps, "SHUTDOWN_GRACE_S", 1.0)


def test_every_role_is_started_with_the_job_s_address(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert run_fake(tmp_path, "servers-exit") == 0
    roles = started(tmp_path)
    assert sorted((role, len(found)) for role, found in roles.items()) == [
        ("scheduler", 1),
        ("server", 2),
        ("worker0", 1),
        ("worker1", 1),
    ]
    addresses = {" ".join(v.split()[:4]) for found in roles.values() for v in found}
    assert len(addresses) == 1 and addresses.pop().startswith("127.0.0.1 ")
    assert all(v.endswith(" 2 2 2") for v in roles["worker0"] + roles["worker1"])
    assert all(v.endswith(" 2 2 1") for v in roles["scheduler"] + roles["server"])


def test_servers_that_outlive_the_workers_are_stopped(tmp_path):
    begin = time.monotonic()
    assert run_fake(tmp_path, "servers-hang") == 0
    assert time.monotonic() - begin < 15
    assert all_gone(pids(tmp_path))


def test_a_failing_worker_fails_the_job_and_stops_the_rest(tmp_path):
    assert run_fake(tmp_path, "worker-fails") == 3
    assert all_gone(pids(tmp_path))


def test_a_killed_worker_is_named_with_its_signal(tmp_path, capsys):
    assert run_fake(tmp_path, "worker-killed") == 128 + 9
    assert "[dpscale mxnet_ps] worker 1 was killed by SIGKILL; stopping the job" in (
        capsys.readouterr().err
    )
    assert all_gone(pids(tmp_path))


def test_no_process_of_the_job_outlives_a_sigkilled_mxnet_ps(tmp_path):
    import signal
    import subprocess

    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dpscale.launch.starters.mxnet_ps",
            "--workers=2",
            "--servers=1",
            "--",
            sys.executable,
            str(script),
            str(tmp_path),
            "hang",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while len(pids(tmp_path)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(pids(tmp_path)) == 4  # scheduler, server, 2 workers
        job.send_signal(signal.SIGKILL)  # no chance to stop its children itself
        job.wait(timeout=10)
        deadline = time.monotonic() + 10  # the parent-death signal is sent at once
        while not all_gone(pids(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all_gone(pids(tmp_path))
    finally:
        for pid in pids(tmp_path):
            if not all_gone([pid]):
                os.kill(pid, signal.SIGKILL)
        job.kill()
        job.wait(timeout=10)


def test_a_hanging_worker_times_out(tmp_path):
    begin = time.monotonic()
    assert run_fake(tmp_path, "hang", timeout_s=2) == mxnet_ps.TIMED_OUT
    assert time.monotonic() - begin < 15
    assert all_gone(pids(tmp_path))
