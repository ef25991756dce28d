"""Start a Horovod (Gloo) job whose ranks another launcher starts, e.g. srun.

    python -m dpscale.launch.starters.horovod_gloo --hosts=n1:4,n2:4 --address=n1 --python=PYTHON
        [--timeout=T] -- COMMAND...

What ``horovodrun --gloo`` does, without ssh: start Horovod's rendezvous server here (the
first node), publish it to the ranks (``HOROVOD_GLOO_RENDEZVOUS_ADDR``/``PORT``,
``HOROVOD_CONTROLLER=gloo``), then run COMMAND, which starts every rank (``srun ...
python -m dpscale.launch.slurm.task horovod -- RUNNER``: each task sets its ``HOROVOD_RANK``,
``HOROVOD_LOCAL_RANK``, ... from its SLURM ids, in the order of ``--hosts``). Exits with
COMMAND's status (124 after ``--timeout`` seconds).

This process needs only the standard library, so it runs with the launching host's Python
and can start srun; the rendezvous server (``--serve``, it imports horovod.runner) runs as
its child with ``--python``, the framework's interpreter command (a container's included).
"""

from __future__ import annotations

import argparse
import os
import select
import shlex
import signal
import subprocess
import sys

TIMED_OUT = 124
SERVER_START_S = 120.0  # importing horovod in a cold container can take a while
PORT_LINE = "DPSCALE-RENDEZVOUS-PORT "


def log(message: str) -> None:
    print(f"[dpscale horovod_gloo] {message}", file=sys.stderr, flush=True)


def serve(hosts: str) -> None:
    """The rendezvous server, until its standard input closes (the parent is gone)."""
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
    from horovod.runner.http.http_server import RendezvousServer

    slots = sum(host.slots for host in parse_hosts(hosts))
    server = RendezvousServer()
    port = server.start()
    server.init(get_host_assignments(parse_hosts(hosts), slots))
    print(f"{PORT_LINE}{port}", flush=True)
    try:
        sys.stdin.read()
    finally:
        server.stop()


def start_server(python: list[str], hosts: str) -> tuple[subprocess.Popen, int]:
    """The server child and its port (its first line), within :data:`SERVER_START_S`."""
    server = subprocess.Popen(
        [*python, "-m", "dpscale.launch.starters.horovod_gloo", "--serve", f"--hosts={hosts}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    ready, _, _ = select.select([server.stdout], [], [], SERVER_START_S)
    line = server.stdout.readline() if ready else ""
    if not line.startswith(PORT_LINE):
        stop_server(server)
        raise RuntimeError(f"the rendezvous server did not start: {line.strip() or 'no output'}")
    return server, int(line[len(PORT_LINE) :])


def stop_server(server: subprocess.Popen) -> None:
    if server.stdin:
        server.stdin.close()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def run(
    command: list[str], hosts: str, address: str, timeout_s: float | None, python: list[str]
) -> int:
    server, port = start_server(python, hosts)
    env = dict(os.environ)
    env.update(
        HOROVOD_GLOO_RENDEZVOUS_ADDR=address,
        HOROVOD_GLOO_RENDEZVOUS_PORT=str(port),
        HOROVOD_CONTROLLER="gloo",
        HOROVOD_CPU_OPERATIONS="gloo",
        PYTHONUNBUFFERED="1",
    )
    log(f"rendezvous on {address}:{port} for the ranks on {hosts}: {' '.join(command)}")
    process = subprocess.Popen(command, env=env)

    def stop(signum, _frame):
        process.send_signal(signal.SIGTERM)
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        log(f"ranks still running after {timeout_s:.0f} s; stopping them")
        process.terminate()  # srun passes SIGTERM on to every task
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return TIMED_OUT
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop_server(server)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", required=True, help="host:slots,... in rank order")
    parser.add_argument("--serve", action="store_true", help="be the rendezvous server")
    parser.add_argument("--address", help="this node's address, for the ranks")
    parser.add_argument("--python", help="the framework's interpreter command (shell words)")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.hosts)
        return
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or not args.address or not args.python:
        parser.error("need --address, --python and a command after --")
    sys.exit(run(command, args.hosts, args.address, args.timeout, shlex.split(args.python)))


if __name__ == "__main__":
    main()
