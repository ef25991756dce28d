"""Session fixture ``slurm_cluster``: a real single-node SLURM cluster for tests.

tests/conftest.py lists this module in ``pytest_plugins``, so every test module shares one
cluster (importing the fixture into each module would start one cluster per module).

The fixture runs ``ci/slurm/install.sh`` (apt, no-op when installed) and
``ci/slurm/start.sh STATE`` (munged, mariadbd + slurmdbd, slurmctld, slurmd; one
node at 127.0.0.1), yields a :class:`SlurmCluster`, and always runs
``ci/slurm/stop.sh STATE`` at the end of the session. Every subprocess has a
timeout, so a broken cluster fails the tests instead of hanging them.

Environment:
  DPSCALE_SLURM_TESTS=0    skip every test that uses the fixture.
  DPSCALE_SLURM_REQUIRED=1 fail instead of skipping when SLURM tests cannot run here
                           (no root, no apt); .ci/run sets it: CI must run them.
  DPSCALE_SLURM_DBD=0      start without slurmdbd/mariadb (status via squeue).
  DPSCALE_SLURM_STATE=DIR  use DIR as the state folder; if a cluster started by
                           ci/slurm/start.sh DIR is already up, reuse it and
                           leave it running.
  DPSCALE_SLURM_KEEP=1     keep the state folder (logs) after the session.
  DPSCALE_SLURM_NODES=N    nodes to declare (default 2: dpscale-n1, dpscale-n2, each
                           its own slurmd on this machine with all its CPUs), so that
                           multi-node cells get a real multi-node allocation; 1 gives
                           one node named after this host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CI_DIR = REPO / "ci" / "slurm"
TEST_PROFILE = REPO / "tests" / "slurm_profile"

INSTALL_TIMEOUT_S = 1200
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 120
QUERY_TIMEOUT_S = 30


def skip_reason() -> str | None:
    """Why SLURM tests cannot run here, or None when they can."""
    if os.environ.get("DPSCALE_SLURM_TESTS", "1").strip() == "0":
        return "SLURM tests disabled (DPSCALE_SLURM_TESTS=0)"
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "SLURM tests need root (they install packages and start slurmctld/slurmd)"
    if shutil.which("apt-get") is None and shutil.which("slurmctld", path=_path()) is None:
        return "SLURM tests need a Debian-like system (apt-get) or SLURM already installed"
    return None


def _path() -> str:
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


@dataclass(frozen=True)
class SlurmCluster:
    """What the tests need to know about the running cluster."""

    state_dir: Path
    node: str
    cpus: int
    mem_mb: int
    partition: str
    accounting: bool  # slurmdbd is running: sacct has the jobs
    nodes: tuple[str, ...] = ()  # every node (node is the first); CPUs are per node
    profile: Path = TEST_PROFILE
    env: dict = field(default_factory=dict, repr=False)

    @property
    def status_command(self) -> str:
        """Value for the plugin's --slurm-status-command on this cluster."""
        return "sacct" if self.accounting else "squeue"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"

    def run(self, *args: str, timeout: float = QUERY_TIMEOUT_S) -> subprocess.CompletedProcess:
        """Run a SLURM client command (sacct, squeue, ...) against this cluster."""
        return subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def log_tails(self, lines: int = 30) -> str:
        """Last lines of every daemon log, for assertion messages."""
        out = []
        for log in sorted(self.log_dir.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"==== {log}\n" + "\n".join(text))
        return "\n".join(out)


def _run_script(name: str, *args: str, timeout: float, env: dict) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["bash", str(CI_DIR / name), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        return timed_out(exc, f"{name} timed out after {timeout}s")


def timed_out(exc: subprocess.TimeoutExpired, why: str) -> subprocess.CompletedProcess:
    """A CompletedProcess with rc 124 and whatever output the killed command left."""

    def text(data: bytes | str | None) -> str:
        return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")

    return subprocess.CompletedProcess(
        exc.cmd, 124, text(exc.stdout), text(exc.stderr) + "\n" + why
    )


def _read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _cluster_is_up(state: Path, env: dict) -> bool:
    if not (state / "cluster.env").is_file():
        return False
    try:
        ping = subprocess.run(
            ["scontrol", "ping"], env=env, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return ping.returncode == 0 and "UP" in ping.stdout


@pytest.fixture(scope="session")
def slurm_cluster(request: pytest.FixtureRequest) -> SlurmCluster:
    reason = skip_reason()
    disabled = os.environ.get("DPSCALE_SLURM_TESTS", "1").strip() == "0"
    if reason and not disabled and os.environ.get("DPSCALE_SLURM_REQUIRED", "0") == "1":
        pytest.fail(f"DPSCALE_SLURM_REQUIRED=1 but {reason}", pytrace=False)
    if reason:
        pytest.skip(reason)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env.setdefault("DPSCALE_SLURM_NODES", "2")
    env["PATH"] = _path()

    given = os.environ.get("DPSCALE_SLURM_STATE")
    # Short path under /tmp: the munge socket lives in it (unix sockets: < 108 chars).
    state = Path(given) if given else Path(tempfile.mkdtemp(prefix="dpscale-slurm-", dir="/tmp"))
    env["SLURM_CONF"] = str(state / "etc" / "slurm.conf")
    # the jobs' cells take the bench lock shared: their own folder, so the suite's SLURM
    # studies do not wait for the cells other tests measure beside them (nor they for these)
    env["DPSCALE_LOCK_DIR"] = str(state)

    reuse = bool(given) and _cluster_is_up(state, env)
    if not reuse:
        install = _run_script("install.sh", timeout=INSTALL_TIMEOUT_S, env=env)
        if install.returncode != 0:
            pytest.fail(
                f"ci/slurm/install.sh failed:\n{install.stdout}\n{install.stderr}", pytrace=False
            )

        def stop() -> None:
            result = _run_script("stop.sh", str(state), timeout=STOP_TIMEOUT_S, env=env)
            if result.returncode != 0:  # never raise from a finalizer; say it
                print(f"ci/slurm/stop.sh failed:\n{result.stdout}\n{result.stderr}")
            if not given and os.environ.get("DPSCALE_SLURM_KEEP", "0") != "1":
                shutil.rmtree(state, ignore_errors=True)

        # Registered before start: start.sh may leave daemons behind if killed.
        request.addfinalizer(stop)
        start = _run_script("start.sh", str(state), timeout=START_TIMEOUT_S, env=env)
        if start.returncode != 0:
            pytest.fail(
                f"ci/slurm/start.sh {state} failed (rc {start.returncode}):\n"
                f"{start.stdout}\n{start.stderr}",
                pytrace=False,
            )

    info = _read_env_file(state / "cluster.env")
    return SlurmCluster(
        state_dir=state,
        node=info["NODE"],
        cpus=int(info["CPUS"]),
        mem_mb=int(info["MEM_MB"]),
        partition=info["PARTITION"],
        accounting=info.get("DBD", "1") != "0",
        nodes=tuple(info.get("NODES", info["NODE"]).split(",")),
        env=env,
    )
