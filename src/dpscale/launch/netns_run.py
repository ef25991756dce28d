"""srun for emulated nodes: start one task per rank inside the nodes' network namespaces.

    python -m dpscale.launch.netns_run --namespaces N0,N1 --tasks-per-node D [--timeout T] -- CMD...

Task i runs ``ip netns exec N<i // D> CMD...`` with the variables srun gives a task under
block distribution (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NUM_TASKS,
SLURM_STEP_NUM_NODES, SLURM_STEP_TASKS_PER_NODE, SLURMD_NODENAME = the namespace), so the
same ``dpscale.launch.slurm_task`` shim turns them into each framework's rank variables, and every
launch kind starts its ranks on emulated nodes exactly as on a SLURM allocation.

As ``srun --kill-on-bad-exit``: when a task fails the others are stopped and its status is
returned (124 after ``--timeout``); on SIGTERM every task is stopped. Every wait is bounded;
no task outlives this process. Stdlib only.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

POLL_S = 0.2
STOP_GRACE_S = 10.0
TIMED_OUT = 124


def task_env(base: dict[str, str], rank: int, namespaces: Sequence[str], per_node: int) -> dict:
    env = dict(base)
    env.update(
        SLURM_PROCID=str(rank),
        SLURM_LOCALID=str(rank % per_node),
        SLURM_NODEID=str(rank // per_node),
        SLURM_STEP_NUM_TASKS=str(len(namespaces) * per_node),
        SLURM_STEP_NUM_NODES=str(len(namespaces)),
        SLURM_STEP_TASKS_PER_NODE=f"{per_node}(x{len(namespaces)})",
        SLURMD_NODENAME=namespaces[rank // per_node],
    )
    return env


def stop(tasks: list[subprocess.Popen]) -> None:
    for task in tasks:
        if task.poll() is None:
            task.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for task in tasks:
        try:
            task.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            task.kill()
            task.wait()


def run(command: list[str], namespaces: list[str], per_node: int, timeout_s: float | None) -> int:
    tasks: list[subprocess.Popen] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        for rank in range(len(namespaces) * per_node):
            namespace = namespaces[rank // per_node]
            env = task_env(dict(os.environ), rank, namespaces, per_node)
            tasks.append(subprocess.Popen(["ip", "netns", "exec", namespace, *command], env=env))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            codes = [task.poll() for task in tasks]
            failed = [code for code in codes if code not in (None, 0)]
            if failed:
                print(f"[dpscale netns_run] a task exited with {failed[0]}", file=sys.stderr)
                return failed[0]
            if all(code == 0 for code in codes):
                return 0
            if deadline is not None and time.monotonic() > deadline:
                print(f"[dpscale netns_run] timed out after {timeout_s} s", file=sys.stderr)
                return TIMED_OUT
            time.sleep(POLL_S)
    finally:
        stop(tasks)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespaces", required=True, help="comma-separated, node order")
    parser.add_argument("--tasks-per-node", type=int, required=True)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    sys.exit(run(command, args.namespaces.split(","), args.tasks_per_node, args.timeout))


if __name__ == "__main__":
    main()
