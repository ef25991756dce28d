"""Start a Horovod (Gloo) job whose ranks another launcher starts, e.g. srun.

    python -m dpscale.launch.horovod_gloo --hosts=n1:4,n2:4 --address=n1 [--timeout=T] -- COMMAND...

What ``horovodrun --gloo`` does, without ssh: start Horovod's rendezvous server here (the
first node), publish it to the ranks (``HOROVOD_GLOO_RENDEZVOUS_ADDR``/``PORT``,
``HOROVOD_CONTROLLER=gloo``), then run COMMAND, which starts every rank (``srun ...
python -m dpscale.launch.slurm_task horovod -- RUNNER``: each task sets its ``HOROVOD_RANK``,
``HOROVOD_LOCAL_RANK``, ... from its SLURM ids, in the order of ``--hosts``). Exits with
COMMAND's status (124 after ``--timeout`` seconds). Runs with the tf-horovod environment's
Python (it imports horovod.runner).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
from horovod.runner.http.http_server import RendezvousServer

TIMED_OUT = 124


def log(message: str) -> None:
    print(f"[dpscale horovod_gloo] {message}", file=sys.stderr, flush=True)


def run(command: list[str], hosts: str, address: str, timeout_s: float | None) -> int:
    slots = sum(host.slots for host in parse_hosts(hosts))
    server = RendezvousServer()
    port = server.start()
    server.init(get_host_assignments(parse_hosts(hosts), slots))
    env = dict(os.environ)
    env.update(
        HOROVOD_GLOO_RENDEZVOUS_ADDR=address,
        HOROVOD_GLOO_RENDEZVOUS_PORT=str(port),
        HOROVOD_CONTROLLER="gloo",
        HOROVOD_CPU_OPERATIONS="gloo",
        PYTHONUNBUFFERED="1",
    )
    log(f"rendezvous on {address}:{port} for {slots} ranks on {hosts}: {' '.join(command)}")
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
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", required=True, help="host:slots,... in rank order")
    parser.add_argument("--address", required=True, help="this node's address, for the ranks")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("need a command after --")
    sys.exit(run(command, args.hosts, args.address, args.timeout))


if __name__ == "__main__":
    main()
