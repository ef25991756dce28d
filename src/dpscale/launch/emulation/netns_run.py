"""srun for emulated nodes: start one task per rank inside the nodes' network namespaces.

    python -m dpscale.launch.emulation.netns_run --namespaces N0,N1 --tasks-per-node D \
        [--timeout T] -- CMD...
    python -m dpscale.launch.emulation.netns_run --namespaces N0,N1 --ntasks S \
        --distribution=cyclic ...

Task i runs ``ip netns exec N<i // D> CMD...`` with the variables srun gives a task under
block distribution (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NUM_TASKS,
SLURM_STEP_NUM_NODES, SLURM_STEP_TASKS_PER_NODE, SLURMD_NODENAME = the namespace), so the
same ``dpscale.launch.slurm.task`` shim turns them into each framework's rank variables, and
every launch kind starts its ranks on emulated nodes exactly as on a SLURM allocation. Under
``--distribution=cyclic`` (srun's, for ``--ntasks`` tasks) task i runs in ``N<i mod nodes>``:
how mxnet-dist spreads its parameter servers (dpscale.launch.slurm.allocation.srun_spread).

As ``srun --kill-on-bad-exit``: when a task fails the others are stopped and its status is
returned (124 after ``--timeout``); on SIGTERM every task is stopped. Every wait is bounded;
no task outlives this process (each gets the parent-death signal SIGKILL, so not even when
this one is killed). Stdlib only.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

POLL_S = 0.2
STOP_GRACE_S = 10.0
TIMED_OUT = 124


def task_nodes(nodes: int, tasks: int, cyclic: bool = False) -> list[int]:
    """The node index of each task: block (as many tasks on each node in turn) or cyclic
    (dealt round robin: task i on node i mod ``nodes``)."""
    if cyclic:
        return [rank % nodes for rank in range(tasks)]
    per_node = -(-tasks // nodes)
    return [rank // per_node for rank in range(tasks)]


def per_node_text(counts: Sequence[int]) -> str:
    """``[2, 2]`` -> ``2(x2)``, ``[2, 1]`` -> ``2,1`` (SLURM_STEP_TASKS_PER_NODE)."""
    runs: list[list[int]] = []
    for count in counts:
        if runs and runs[-1][0] == count:
            runs[-1][1] += 1
        else:
            runs.append([count, 1])
    return ",".join(f"{count}(x{n})" if n > 1 else str(count) for count, n in runs)


def task_env(
    base: dict[str, str], rank: int, namespaces: Sequence[str], nodes: Sequence[int]
) -> dict[str, str]:
    """Task ``rank``'s variables; ``nodes``: every task's node index (:func:`task_nodes`)."""
    env = dict(base)
    node = nodes[rank]
    env.update(
        SLURM_PROCID=str(rank),
        SLURM_LOCALID=str(list(nodes[:rank]).count(node)),
        SLURM_NODEID=str(node),
        SLURM_STEP_NUM_TASKS=str(len(nodes)),
        SLURM_STEP_NUM_NODES=str(len(namespaces)),
        SLURM_STEP_TASKS_PER_NODE=per_node_text(
            [list(nodes).count(n) for n in range(len(namespaces))]
        ),
        SLURMD_NODENAME=namespaces[node],
    )
    return env


def die_with_parent() -> None:
    """In each task (preexec_fn): SIGKILL when this process dies (PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)


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


def run(
    command: list[str], namespaces: list[str], nodes: Sequence[int], timeout_s: float | None
) -> int:
    """Task i in ``namespaces[nodes[i]]`` (:func:`task_nodes`)."""
    tasks: list[subprocess.Popen] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        for rank, node in enumerate(nodes):
            env = task_env(dict(os.environ), rank, namespaces, nodes)
            tasks.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", namespaces[node], *command],
                    env=env,
                    preexec_fn=die_with_parent,
                )
            )
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
    parser.add_argument("--tasks-per-node", type=int, help="block distribution's tasks per node")
    parser.add_argument("--ntasks", type=int, help="cyclic distribution's tasks")
    parser.add_argument("--distribution", choices=("block", "cyclic"), default="block")
    parser.add_argument("--timeout", type=float)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    cyclic = args.distribution == "cyclic"
    if (args.ntasks if cyclic else args.tasks_per_node) is None:
        parser.error("block needs --tasks-per-node, cyclic needs --ntasks")
    namespaces = args.namespaces.split(",")
    tasks = args.ntasks if cyclic else len(namespaces) * args.tasks_per_node
    sys.exit(run(command, namespaces, task_nodes(len(namespaces), tasks, cyclic), args.timeout))


if __name__ == "__main__":
    main()
