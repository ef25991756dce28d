"""Two of dpscale's processes at once on one machine, each pair started together in real
processes:

- two builds of one new environment (what the ``build_env`` rule runs): one builds, the
  other waits on the build lock and finds it built; both see the same freeze;
- two launches reaping dead launchers' ``.dpscale-cell-*`` scratch folders: each stale one
  is removed once, by one of them; a live launcher's folder, one without a record yet and
  one of another host are kept;
- two launchers on one machine never measure at once (the per-machine bench lock,
  docs/decisions/benchmark-cells-never-overlap.md); one started as a SLURM job starts it
  (a study beside ``make test``'s SLURM cluster, whose nodes are this machine) takes no
  lock today, so that case is an expected failure until it does.

The machine's lock folder is the test's own (the ``mark`` fixture sets DPSCALE_LOCK_DIR):
no real cell waits for these, and these wait for none.
"""

from __future__ import annotations

import ast
import fcntl
import io
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import SIDE_BY_SIDE, make_cell
from dpscale.launch import supervise
from dpscale.launch.emulation.netns import process_start
from dpscale.launch.setup import envs
from dpscale.plan.columns import SYSTEM_HOST
from dpscale.plan.result import read_result

# side_by_side: no test here asserts a measured speed or quality, and the lock they take is
# the test's own (tests/conftest.py)
pytestmark = SIDE_BY_SIDE

TIMEOUT_S = 120


def start_together(scripts: list[list[str]], go: Path, environments: list[dict]) -> list:
    """Start each ``python -c`` script (with its environment), let them all go at once (each
    waits for ``go``), and return what each printed last (JSON); each must exit 0 and write
    nothing to stderr."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", *script],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for script, env in zip(scripts, environments, strict=True)
    ]
    time.sleep(0.3)  # their interpreters start; each then polls for go
    go.touch()
    outputs = [process.communicate(timeout=TIMEOUT_S) for process in processes]
    for process, (stdout, stderr) in zip(processes, outputs, strict=True):
        assert process.returncode == 0 and not stderr, (process.returncode, stdout, stderr)
    return [json.loads(stdout.splitlines()[-1]) for stdout, _ in outputs]


WAIT_FOR_GO = (
    "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.005)\n"
)


# -- two builds of one new environment -----------------------------------------------------

# what the rule's entry point (envs.main) does, with the test's requirements folder
BUILD = WAIT_FOR_GO + textwrap.dedent(
    """
    import json
    from pathlib import Path
    from dpscale.launch.setup import envs
    envs_dir, env_dir, log_path = map(Path, sys.argv[2:5])
    prefix = envs.env_prefix("tiny", env_dir, envs_dir)
    with open(log_path, "a") as log:
        (env_dir.parent / "arrived" / log_path.stem).touch()
        envs.build_env("tiny", prefix, envs_dir, log=log)
    freeze = (prefix / envs.FREEZE_FILE).read_text()
    print(json.dumps({"prefix": str(prefix), "freeze": freeze, "hash": envs.freeze_hash(prefix)}))
    """
)

# counts the builds, and holds the first until the second has arrived at the lock
POST = """\
echo "$$" >> {counter}
for _ in $(seq 100); do [ "$(ls {arrived} | wc -l)" -ge 2 ] && break; sleep 0.1; done
sleep 0.5
"""


def test_two_builds_of_one_new_environment_build_it_once(tmp_path, mark):
    envs_dir, env_dir, arrived = tmp_path / "envs", tmp_path / "built", tmp_path / "arrived"
    for folder in (envs_dir, env_dir, arrived):
        folder.mkdir()
    counter = tmp_path / "builds"
    (envs_dir / "tiny.txt").write_text("# nothing to install: pip, offline, in seconds\n")
    (envs_dir / "tiny.post.sh").write_text(POST.format(counter=counter, arrived=arrived))
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    go = tmp_path / "go"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    scripts = [[BUILD, str(go), str(envs_dir), str(env_dir), str(log)] for log in logs]
    first, second = start_together(scripts, go, [env, env])

    assert len(counter.read_text().splitlines()) == 1  # the post script ran once
    texts = [log.read_text() for log in logs]
    assert sum(text.count("[dpscale] building environment tiny") for text in texts) == 1
    assert sum(text.count("[dpscale] environment tiny is cached") for text in texts) == 1
    assert not any("removing unfinished environment" in text for text in texts), texts
    prefix = Path(first["prefix"])
    assert second["prefix"] == first["prefix"] and (prefix / envs.COMPLETE_FLAG).is_file()
    assert second["freeze"] == first["freeze"] and second["hash"] == first["hash"]
    assert "pip==" in first["freeze"]
    assert sorted(p.name for p in env_dir.iterdir() if not p.name.startswith(".")) == [prefix.name]


# -- two launches reaping scratch folders --------------------------------------------------

# a launch's first step (supervise.scratch_folder): reap dead launchers' folders, make its own
REAP = WAIT_FOR_GO + textwrap.dedent(
    """
    import io, json
    from pathlib import Path
    from dpscale.launch import supervise
    log = io.StringIO()
    with supervise.scratch_folder(Path(sys.argv[2]), log):
        pass
    said = log.getvalue().split("launchers that died: ", 1)
    print(json.dumps({"removed": said[1].strip() if len(said) > 1 else "[]"}))
    """
)
STALE = 200  # enough that the two walk over the same folders at the same time


def scratch(parent: Path, name: str, owner: dict | None) -> Path:
    folder = parent / f"{supervise.SCRATCH_PREFIX}{name}"
    (folder / "ranks").mkdir(parents=True)
    (folder / "cell.json").write_text("{}")
    for rank in range(4):
        (folder / "ranks" / f"arrived-{rank}").write_text("1")
    if owner is not None:
        (folder / supervise.SCRATCH_OWNER).write_text(json.dumps(owner))
    return folder


def test_two_launches_reap_each_stale_scratch_folder_once(tmp_path, mark):
    parent = tmp_path / "tmp"
    parent.mkdir()
    host = socket.gethostname()
    dead = subprocess.Popen(["true"])  # a launcher that died: its pid runs no more
    dead.wait()
    stale = {
        scratch(parent, f"dead{i:03d}", {SYSTEM_HOST: host, "pid": dead.pid, "start": "1"}).name
        for i in range(STALE)
    }
    me = {SYSTEM_HOST: host, "pid": os.getpid(), "start": process_start(os.getpid())}
    kept = {
        scratch(parent, "live", me).name,  # a launcher that still measures
        scratch(parent, "starting", None).name,  # one that has not recorded itself yet
        scratch(parent, "elsewhere", {**me, SYSTEM_HOST: f"not-{host}", "pid": dead.pid}).name,
    }
    go = tmp_path / "go"
    reaped = start_together([[REAP, str(go), str(parent)]] * 2, go, [dict(os.environ)] * 2)

    removed = [set(ast.literal_eval(r["removed"])) for r in reaped]
    assert removed[0] | removed[1] == stale
    assert removed[0] & removed[1] == set(), "a folder named removed by both launches"
    assert {p.name for p in parent.iterdir()} == kept  # their own folders went with them


# -- two launchers measuring on one machine ------------------------------------------------

# measures until the other launcher is seen waiting for the machine's lock, or measuring too
FAKE_RUNNER = textwrap.dedent(
    """
    import os, time
    from pathlib import Path
    from dpscale.plan.result import now_iso
    from dpscale.runner.records import write_synthetic_result
    from dpscale.runner.support import parse_runner_args
    cell, out = parse_runner_args()
    folder, me, other = (os.environ[k] for k in ("TEST_DIR", "TEST_ME", "TEST_OTHER"))
    folder = Path(folder)
    (folder / f"{me}.start").write_text(repr(time.time()))
    deadline = time.monotonic() + 30  # bounded: a launcher that never shows up
    while time.monotonic() < deadline:
        log = folder / f"{other}.log"
        if (folder / f"{other}.start").exists() or "waiting for" in log.read_text():
            break
        time.sleep(0.05)
    time.sleep(0.2)
    (folder / f"{me}.end").write_text(repr(time.time()))
    write_synthetic_result(cell, out, started_at=now_iso(), per_rank_windows=[[0.5, 0.6]],
        framework="fake", framework_versions={"fake": "1"}, threads_used=1, trainable_params=1)
    """
)

# dpscale.launch's launch of a cell, its strategy's runner the fake one
LAUNCH = WAIT_FOR_GO + textwrap.dedent(
    """
    import json
    from pathlib import Path
    from dpscale.launch import failures, launcher
    from dpscale.plan.cell import Cell
    from dpscale.plan.strategy import Strategy
    cell_file, out, prefix, log = map(Path, sys.argv[2:6])
    fake = Strategy("torch-ddp", "fake", "fake", "single", "fake_runner", False, True)
    launcher.strategy = failures.strategy = lambda name: fake
    status = launcher.launch(Cell.from_json(cell_file.read_text()), out, prefix, log)
    print(json.dumps({"status": status}))
    """
)


class Overlap(AssertionError):
    """Two launchers' runners measured at the same time."""


def slurm_job_env(tmp_path: Path) -> dict[str, str]:
    """What a launcher sees in a one-task SLURM job on this machine (the SLURM executor's
    step); scontrol answers nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "scontrol").chmod(0o755)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": socket.gethostname(),
        "SLURM_NTASKS": "1",
        "SLURM_TASKS_PER_NODE": "1",
        "SLURM_JOB_CPUS_PER_NODE": str(os.cpu_count()),
        "SLURM_STEP_ID": "0",
    }


@pytest.mark.parametrize(
    "kinds",
    [
        ("local", "local"),
        ("slurm-job", "local"),
    ],
    ids=["local+local", "slurm-job+local"],
)
def test_two_launchers_on_one_machine_never_measure_at_once(kinds, tmp_path, mark):
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "fake_runner.py").write_text(FAKE_RUNNER)
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    cell = make_cell(threads_per_device=1)
    cell_file = tmp_path / "cell.json"
    cell_file.write_text(cell.to_json())
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SRUN_"))}
    path = os.pathsep.join(filter(None, [str(modules), os.environ.get("PYTHONPATH")]))
    base.update(PYTHONPATH=path, TEST_DIR=str(tmp_path))
    names = ("a", "b")
    scripts, environments = [], []
    for me, other, kind in zip(names, names[::-1], kinds, strict=True):
        env = dict(base, TEST_ME=me, TEST_OTHER=other)
        if kind == "slurm-job":
            env.update(slurm_job_env(tmp_path))
        (tmp_path / f"{me}.log").touch()
        out = cell.result_path(tmp_path / me)
        log = tmp_path / f"{me}.log"
        scripts.append(
            [LAUNCH, str(tmp_path / "go"), str(cell_file), str(out), str(prefix), str(log)]
        )
        environments.append(env)
    launched = start_together(scripts, tmp_path / "go", environments)

    assert [run["status"] for run in launched] == ["ok", "ok"]
    for me, kind in zip(names, kinds, strict=True):  # each launched as it was meant to
        scheduler = read_result(cell.result_path(tmp_path / me))["system"].get("scheduler") or {}
        assert (scheduler.get("SLURM_JOB_ID") == "4242") == (kind == "slurm-job"), scheduler
    spans = [
        tuple(float((tmp_path / f"{me}.{edge}").read_text()) for edge in ("start", "end"))
        for me in names
    ]
    logs = {me: (tmp_path / f"{me}.log").read_text() for me in names}
    if max(start for start, _ in spans) < min(end for _, end in spans):
        raise Overlap(f"both measured at once: {spans}; their logs: {logs}")
    waited = [me for me in names if "(another cell is measuring)" in logs[me]]
    assert len(waited) == 1, logs  # the second waited for the machine's lock


def test_slurm_jobs_share_the_bench_lock_and_a_local_cell_waits_for_them(tmp_path, monkeypatch):
    """Jobs hold the machine's lock shared (the scheduler keeps them apart): two at once do
    not wait; an exclusive (local) holder waits for them, and they for it."""
    monkeypatch.setenv("DPSCALE_LOCK_DIR", str(tmp_path))
    cell, log = make_cell(), io.StringIO()
    with supervise.bench_lock(cell, log, shared=True), supervise.bench_lock(cell, log, shared=True):
        lock = next(tmp_path.glob("dpscale-bench-*.lock"))
        # what a local cell asks for, without waiting
        with open(lock, "rb") as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert "waiting" not in log.getvalue()
    with open(lock, "rb") as local:
        fcntl.flock(local, fcntl.LOCK_EX)  # a local cell measuring
        with open(lock, "rb") as job, pytest.raises(BlockingIOError):
            fcntl.flock(job, fcntl.LOCK_SH | fcntl.LOCK_NB)
