"""Start an MXNet parameter-server (ps-lite) job on this node and wait for it.

    python -m dpscale.launch.starters.mxnet_ps --workers N --servers S [--timeout T] -- COMMAND...

COMMAND (a dpscale runner) is started 1 + S + N times: once as the scheduler, S times as a
server and N times as a worker, told apart by ``DMLC_ROLE``. Importing mxnet in a scheduler
or server process runs its event loop and exits, so one command serves every role.  All
processes meet at ``DMLC_PS_ROOT_URI=127.0.0.1:DMLC_PS_ROOT_PORT`` (a free port picked here)
and bind to 127.0.0.1 only.

Across nodes (dpscale.launch.slurm.allocation, emulated nodes): ``--host ADDR`` puts the
scheduler and servers on this node's address instead, and ``--worker-command 'srun ... python -m
dpscale.launch.slurm.task mxnet -- python -m RUNNER ...'`` starts all N workers as one command
(the launcher's tasks; each sets its own ``DPSCALE_LOCAL_RANK`` and ``DMLC_NODE_HOST``)
instead of N local processes. ``--server-command`` does the same for the S servers (tasks
dealt round robin over the nodes, server k on node k mod N, as MXNet's own launcher places
them; each registers with its own node's ``DMLC_NODE_HOST``); the scheduler stays here.

Workers keep the caller's environment (``OMP_NUM_THREADS`` = the cell's threads per device)
and get ``DPSCALE_LOCAL_RANK`` (0..N-1, for device pinning); the scheduler and servers get
one thread each: they only move and add gradients, and spare threads would spin on cores
the workers compute on.

Exit status: 0 when every worker exited 0; otherwise the first failing worker's status
(128 + N for a worker killed by signal N, 124 on timeout, 1 when the scheduler or a server
died while workers were running). A failed worker is named in one line, ``worker 1 was
killed by SIGKILL`` or ``worker 1 exited with code 3`` (by its launch index,
``DPSCALE_LOCAL_RANK``), which dpscale.launch.kinds reads into the cell's reason.  Every
wait is bounded, and whatever happens, no process of the job outlives this one: each is
started with the parent-death signal SIGKILL, so not even a SIGKILL of this one leaves them.

Framework-free: runs with any Python 3.11 (stdlib only).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

from dpscale.launch.ports import free_port
from dpscale.launch.rank_exits import RankExit, in_causal_order

POLL_S = 0.2
# After the workers finish, the scheduler and servers shut down on their own within a
# moment (ps-lite's finalize); past this they are stopped.
SHUTDOWN_GRACE_S = 20.0
# A scheduler or server that exits 0 while workers are still running may just be a step
# ahead of the last worker's exit; one that stays ahead longer than this broke the job.
INFRA_EXIT_GRACE_S = 10.0
TIMED_OUT = 124


def die_with_parent() -> None:
    """In each child (preexec_fn): SIGKILL when this process dies, even by SIGKILL, so no
    scheduler or server outlives the job (PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)


def log(message: str) -> None:
    print(f"[dpscale mxnet_ps] {message}", file=sys.stderr, flush=True)


def role_env(
    base: dict[str, str], role: str, port: int, servers: int, workers: int, host: str = "127.0.0.1"
) -> dict[str, str]:
    env = dict(base)
    env.update(
        DMLC_ROLE=role,
        DMLC_PS_ROOT_URI=host,
        DMLC_PS_ROOT_PORT=str(port),
        DMLC_NODE_HOST=host,
        DMLC_NUM_SERVER=str(servers),
        DMLC_NUM_WORKER=str(workers),
    )
    if role != "worker":
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return env


class Job:
    def __init__(
        self,
        command: Sequence[str],
        workers: int,
        servers: int,
        host: str = "127.0.0.1",
        worker_command: Sequence[str] = (),
        server_command: Sequence[str] = (),
    ) -> None:
        self.command = list(command)
        self.workers_n, self.servers_n = workers, servers
        self.host, self.worker_command = host, list(worker_command)
        self.server_command = list(server_command)
        self.port = free_port(host if host == "127.0.0.1" else "")
        self.infra: list[tuple[str, subprocess.Popen]] = []
        self.workers: list[subprocess.Popen] = []

    def _start(self, role: str, extra: dict[str, str] | None = None) -> subprocess.Popen:
        env = role_env(dict(os.environ), role, self.port, self.servers_n, self.workers_n, self.host)
        env.update(extra or {})
        tasks = {"worker": self.worker_command, "server": self.server_command}.get(role)
        if tasks:
            env.pop("DMLC_NODE_HOST")  # each task sets its own node's
            return subprocess.Popen(tasks, env=env, preexec_fn=die_with_parent)
        return subprocess.Popen(self.command, env=env, preexec_fn=die_with_parent)

    def start(self) -> None:
        log(
            f"scheduler on {self.host}:{self.port}, {self.servers_n} server(s), "
            f"{self.workers_n} worker(s): {' '.join(self.command)}"
        )
        self.infra.append(("scheduler", self._start("scheduler")))
        if self.server_command:  # one command starts every server
            self.infra.append(("servers", self._start("server")))
        for index in range(0 if self.server_command else self.servers_n):
            self.infra.append((f"server {index}", self._start("server")))
        if self.worker_command:  # one command starts every worker
            self.workers.append(self._start("worker"))
            return
        for index in range(self.workers_n):
            self.workers.append(self._start("worker", {"DPSCALE_LOCAL_RANK": str(index)}))

    def wait_workers(self, timeout_s: float | None) -> int:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        infra_exited_at: float | None = None
        while True:
            codes = [worker.poll() for worker in self.workers]
            # every worker that ended since the last poll, the likely cause first
            ended = in_causal_order(
                RankExit(f"worker {index}", code)
                for index, code in enumerate(codes)
                if code not in (None, 0)
            )
            for end in ended:
                log(f"{end.words}; stopping the job")
            if ended:
                return ended[0].code if ended[0].code > 0 else 128 - ended[0].code
            if all(code == 0 for code in codes):
                return 0
            for name, process in self.infra:
                code = process.poll()
                if code is None:
                    continue
                if code != 0:
                    log(f"{name} exited with {code} while workers were running")
                    return 1
                infra_exited_at = infra_exited_at or time.monotonic()
                if time.monotonic() - infra_exited_at > INFRA_EXIT_GRACE_S:
                    log(f"{name} exited while workers were still running")
                    return 1
            if deadline is not None and time.monotonic() > deadline:
                log(f"workers still running after {timeout_s:.0f} s; stopping the job")
                return TIMED_OUT
            time.sleep(POLL_S)

    def shut_down(self, grace_s: float) -> None:
        """Give every process ``grace_s`` to exit, then terminate, then kill."""
        processes = [process for _, process in self.infra] + self.workers
        deadline = time.monotonic() + grace_s
        while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        for sig, wait_s in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
            alive = [p for p in processes if p.poll() is None]
            if not alive:
                return
            for process in alive:
                process.send_signal(sig)
            deadline = time.monotonic() + wait_s
            while any(p.poll() is None for p in alive) and time.monotonic() < deadline:
                time.sleep(POLL_S / 4)


def run(
    command: Sequence[str],
    workers: int,
    servers: int,
    timeout_s: float | None = None,
    host: str = "127.0.0.1",
    worker_command: Sequence[str] = (),
    server_command: Sequence[str] = (),
) -> int:
    with contextlib.suppress(OSError):  # ps-lite hands hosts to every node as given: an IP
        host = socket.gethostbyname(host)
    job = Job(command, workers, servers, host, worker_command, server_command)

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    code = 1
    try:
        job.start()
        code = job.wait_workers(timeout_s)
    finally:
        # Normal end: the servers and the scheduler follow the workers out on their own.
        job.shut_down(SHUTDOWN_GRACE_S if code == 0 else 0.0)
        signal.signal(signal.SIGTERM, previous)
    return code


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=None, help="seconds for the workers")
    parser.add_argument("--host", default="127.0.0.1", help="scheduler and servers' address")
    parser.add_argument(
        "--worker-command", default="", help="command line that starts all workers (srun ...)"
    )
    parser.add_argument(
        "--server-command", default="", help="command line that starts all servers (srun ...)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.workers < 1 or args.servers < 1:
        parser.error("need --workers >= 1, --servers >= 1 and a command after --")
    workers, servers = shlex.split(args.worker_command), shlex.split(args.server_command)
    sys.exit(run(command, args.workers, args.servers, args.timeout, args.host, workers, servers))


if __name__ == "__main__":
    main()
