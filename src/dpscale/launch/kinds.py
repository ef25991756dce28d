"""How a strategy's ranks start: one renderer per launch kind, in one place.

A kind is named after the runtime that tells each process its rank; a strategy's adapter
names its kind (``Strategy.launch``) and nothing else does. Each kind renders

* ``local``: the command that starts a cell's processes on this machine;
* ``tasks``: the command that starts them as tasks placed on nodes (kinds with one process
  per device): SLURM tasks of an allocation (:func:`srun_placement`; dpscale.launch runs
  it after the probe step, see dpscale.launch.slurm.allocation), or tasks in the network
  namespaces of emulated nodes (:func:`netns_placement`, started by
  dpscale.launch.emulation.netns_run the way srun does).
  mxnet-dist's parameter servers, when they are spread over the nodes, start the same way
  (:attr:`Placement.spread`);
* ``rank_env``: the variables one task sets from its SLURM ids before it becomes the
  runner (``python -m dpscale.launch.slurm.task <kind> -- RUNNER...``);
* ``rank_failure``: which rank ended the cell and how (a signal or an exit code), read from
  the launcher's own failure report in the cell's log; each launcher reports it its own way
  (torchrun's "Root Cause" table, horovodrun's "Process name / Exit code",
  dpscale.launch.starters.mxnet_ps's "worker N was killed by SIG..."), so the kind that renders the
  launcher also reads it.

and declares ``interface_variables`` (what its runtime reads to pick the network interface
of a real interconnect) and ``rank_prefix`` (what its launcher puts before each line a rank
prints, stripped to find the rank's own exception).

Every runner gets the same arguments, ``--cell-file`` and ``--out`` (:func:`runner_argv`).
``python`` is the command that starts the framework's interpreter from this host: a built
environment's ``bin/python``, a site interpreter, or a command prefix ending in one
(``apptainer exec IMAGE python3``); its last word is what a process already started by it
(torchrun, horovodrun, a task shim inside the container) runs to start a rank. Launchers
that come with the framework run as its modules (``-m torch.distributed.run``, ``-m
horovod.runner.launch``); dpscale's own launch helpers that start tasks (netns_run,
mxnet_ps, horovod_gloo) run with this host's Python (:data:`HOST_PYTHON`), since srun and
``ip netns exec`` are not found inside a container. Stdlib only.
"""

from __future__ import annotations

import datetime
import json
import re
import shlex
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from dpscale.launch.rank_exits import RankExit, first_cause
from dpscale.launch.slurm import allocation as slurm
from dpscale.launch.slurm import rank as slurm_rank
from dpscale.plan.cell import Cell

HOST_PYTHON = sys.executable  # the launcher's interpreter (stdlib helpers only)
Python = Sequence[str]  # the interpreter command (see the module docstring)


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]  # added to the launcher's environment (srun passes it to the tasks)


@dataclass(frozen=True)
class Placement:
    """Where a cell's ranks run as tasks: ``starter`` starts one task per rank (block
    distribution over ``nodes``, in rank order), each node reachable at its address;
    ``spread(n)`` starts n one-CPU tasks dealt round robin over the nodes (task k on node
    k mod N: mxnet-dist's parameter servers)."""

    starter: list[str]
    nodes: list[str]
    addresses: dict[str, str]
    spread: Callable[[int], list[str]]

    @property
    def first_address(self) -> str:
        return self.addresses.get(self.nodes[0], self.nodes[0])

    def env(self) -> dict[str, str]:
        return {"DPSCALE_NODE_ADDRS": json.dumps(self.addresses, sort_keys=True)}


def srun_placement(cell: Cell, allocation: slurm.Allocation) -> Placement:
    return Placement(
        starter=slurm.srun_prefix(cell, allocation=allocation),
        nodes=list(allocation.nodes[: cell.nodes]),
        addresses=dict(allocation.node_addresses),
        spread=partial(slurm.srun_spread, cell, allocation=allocation),
    )


def netns_starter(cell: Cell, namespaces: Sequence[str], *layout: str) -> list[str]:
    return [
        HOST_PYTHON,
        "-m",
        "dpscale.launch.emulation.netns_run",
        f"--namespaces={','.join(namespaces)}",
        *layout,
        f"--timeout={cell.measure.timeout_s}",
        "--",
    ]


def netns_spread(cell: Cell, namespaces: Sequence[str], tasks: int) -> list[str]:
    """netns_run's srun_spread: ``tasks`` tasks round robin over the first nodes."""
    used = namespaces[: min(tasks, len(namespaces))]
    return netns_starter(cell, used, f"--ntasks={tasks}", "--distribution=cyclic")


def netns_placement(cell: Cell, namespaces: list[str], addresses: list[str]) -> Placement:
    return Placement(
        starter=netns_starter(cell, namespaces, f"--tasks-per-node={cell.devices_per_node}"),
        nodes=list(namespaces),
        addresses=dict(zip(namespaces, addresses, strict=True)),
        spread=partial(netns_spread, cell, list(namespaces)),
    )


def runner_argv(module: str, cell_file: Path, out: Path) -> list[str]:
    """A runner's arguments, after the interpreter."""
    return ["-m", module, "--cell-file", str(cell_file), "--out", str(out)]


def task_shim(kind: str, python: Python) -> list[str]:
    """What each SLURM task runs before the runner: its SLURM ids -> the kind's variables."""
    return [*python, "-m", "dpscale.launch.slurm.task", kind, "--"]


def ranked(kind: str, python: Python, runner: list[str]) -> list[str]:
    """One task's command: the shim, then the runner with the interpreter the shim runs in."""
    return [*task_shim(kind, python), python[-1], *runner]


TORCHRUN_FAILURE = re.compile(
    r"^\s*time\s*:\s*(\S+)\s*$.*?^\s*rank\s*:\s*(\d+).*?^\s*exitcode\s*:\s*(-?\d+)",
    re.M | re.S,
)


def stamp_seconds(text: str) -> float:
    """torchrun's failure stamp (``2026-11-21_21:10:23``) in seconds; 0.0 if unreadable."""
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%d_%H:%M:%S").timestamp()
    except ValueError:
        return 0.0


class LaunchKind:
    """One process per node driving all of its devices (and the base of the other kinds)."""

    name = "single"
    one_process = True
    interface_variables: tuple[str, ...] = ()  # one process per node talks to no other node
    rank_prefix: str | None = None

    def local(self, cell: Cell, python: Python, runner: list[str]) -> list[str]:
        return [*python, *runner]

    def tasks(
        self, cell: Cell, python: Python, runner: list[str], placement: Placement, port: int
    ) -> Launch:
        raise ValueError(f"launch kind {self.name!r} starts one process; nothing to srun")

    def rank_env(self, ids: Mapping[str, int | str], env: Mapping[str, str]) -> dict[str, str]:
        raise ValueError(f"launch kind {self.name!r} has no ranks to start as SLURM tasks")

    def rank_exits(self, log_text: str) -> list[RankExit]:
        """Every rank's end the launcher reported in ``log_text``, in its order."""
        return []

    def rank_failure(self, log_text: str) -> str | None:
        """``rank 1 was killed by SIGKILL, then rank 0 ...``: the rank that failed first and
        those that followed (launch.rank_exits); None when the launcher reported none."""
        return first_cause(self.rank_exits(log_text))


class Torch(LaunchKind):
    """torch.distributed: torchrun locally; under SLURM, env:// rendezvous at rank 0's node
    (``MASTER_ADDR`` = first node, ``MASTER_PORT`` = a port that was free on it)."""

    name = "torch"
    one_process = False
    interface_variables = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
    rank_prefix = r"\[rank\d+\]:"  # torch.distributed prefixes a rank's errors: "[rank1]:"

    def local(self, cell: Cell, python: Python, runner: list[str]) -> list[str]:
        return [
            *python,
            "-m",
            "dpscale.launch.starters.torchrun",  # torchrun, without finalization at the end
            "--standalone",
            f"--nproc_per_node={cell.devices_per_node}",
            *runner,  # torchrun starts "-m MODULE ..." with its own interpreter
        ]

    def tasks(
        self, cell: Cell, python: Python, runner: list[str], placement: Placement, port: int
    ) -> Launch:
        env = placement.env()
        env.update(MASTER_ADDR=placement.first_address, MASTER_PORT=str(port))
        return Launch([*placement.starter, *ranked(self.name, python, runner)], env)

    def rank_env(self, ids: Mapping[str, int | str], env: Mapping[str, str]) -> dict[str, str]:
        out = {  # what init_process_group's env:// reads
            "RANK": str(ids["rank"]),
            "WORLD_SIZE": str(ids["size"]),
            "LOCAL_RANK": str(ids["local_rank"]),
            "LOCAL_WORLD_SIZE": str(ids["local_size"]),
            "GROUP_RANK": str(ids["node_index"]),
        }
        if not env.get("GLOO_SOCKET_IFNAME"):  # gloo would take the hostname's interface
            iface = slurm_rank.interface_for(slurm_rank.node_address(env, str(ids["node"])))
            if iface:
                out["GLOO_SOCKET_IFNAME"] = iface
        return out

    def rank_exits(self, log_text: str) -> list[RankExit]:
        # torchrun's ChildFailedError table, "Failures:" and "Root Cause (first observed
        # failure):", each entry "time : 2026-11-21_21:10:23", "rank : 1 (local_rank: 1)",
        # "exitcode : -9 (pid: 123)"; its root cause is the earliest stamp, ties by local
        # rank, so a survivor's abort in the same second is named first
        _, found, table = log_text.rpartition("ChildFailedError")
        entries = TORCHRUN_FAILURE.findall(table) if found else []
        return [
            RankExit(f"rank {rank}", int(code), stamp_seconds(at)) for at, rank, code in entries
        ]


class Horovod(LaunchKind):
    """Horovod over Gloo (no MPI): ``horovodrun --gloo`` locally; under SLURM,
    dpscale.launch.starters.horovod_gloo runs the rendezvous server on the first node and the
    ranks are srun tasks with horovodrun's slot variables."""

    name = "horovod"
    one_process = False
    interface_variables = ("HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME")
    rank_prefix = r"\[\d+\]<std(?:out|err)>:"  # horovodrun: "[1]<stderr>:"

    def local(self, cell: Cell, python: Python, runner: list[str]) -> list[str]:
        n = cell.devices_per_node
        # horovodrun (bin/horovodrun runs horovod.runner.launch), its build check left to
        # the ranks (dpscale.launch.starters.horovodrun)
        horovodrun = [*python, "-m", "dpscale.launch.starters.horovodrun"]
        return [*horovodrun, "-np", str(n), "-H", f"localhost:{n}", "--gloo", python[-1], *runner]

    def tasks(
        self, cell: Cell, python: Python, runner: list[str], placement: Placement, port: int
    ) -> Launch:
        hosts = ",".join(f"{n}:{cell.devices_per_node}" for n in placement.nodes)
        argv = [
            HOST_PYTHON,
            "-m",
            "dpscale.launch.starters.horovod_gloo",
            f"--hosts={hosts}",
            f"--address={placement.first_address}",
            f"--timeout={cell.measure.timeout_s}",
            f"--python={shlex.join(python)}",  # runs the rendezvous server (horovod)
            "--",
            *placement.starter,
            *ranked(self.name, python, runner),
        ]
        return Launch(argv, placement.env())

    def rank_env(self, ids: Mapping[str, int | str], env: Mapping[str, str]) -> dict[str, str]:
        out = {  # what horovodrun --gloo gives each slot (create_slot_env_vars)
            "HOROVOD_HOSTNAME": str(ids["node"]),
            "HOROVOD_RANK": str(ids["rank"]),
            "HOROVOD_SIZE": str(ids["size"]),
            "HOROVOD_LOCAL_RANK": str(ids["local_rank"]),
            "HOROVOD_LOCAL_SIZE": str(ids["local_size"]),
            "HOROVOD_CROSS_RANK": str(ids["node_index"]),
            "HOROVOD_CROSS_SIZE": str(ids["nodes"]),
        }
        if not env.get("HOROVOD_GLOO_IFACE"):
            iface = slurm_rank.interface_for(slurm_rank.node_address(env, str(ids["node"])))
            if iface:
                out["HOROVOD_GLOO_IFACE"] = iface
        return out

    def rank_exits(self, log_text: str) -> list[RankExit]:
        # horovodrun --gloo: "Process 1 exit with status code 137." as each rank ends, then
        # "The first process to do so was:\nProcess name: 1\nExit code: 137" (slot index =
        # rank; a shell runs each rank, so a signal is 128 + its number)
        found = re.findall(r"Process (\d+) exit with status code (-?\d+)", log_text)
        found = found or re.findall(r"Process name: (\d+)\s+Exit code: (-?\d+)", log_text)[-1:]
        return [RankExit(f"rank {rank}", int(code)) for rank, code in found]


def server_nodes(servers: int, nodes: int) -> list[int]:
    """Each ps-lite server's node index: server k on node k mod N, as MXNet's launcher deals
    them (dmlc-core's tracker: ssh.py starts process i on host i mod H, servers first;
    slurm.py one srun step of S servers on S nodes). The scheduler stays on node 0."""
    return [k % nodes for k in range(servers)]


SERVER_NODES_ENV = "DPSCALE_MXNET_SERVER_NODES"  # read by strategies.mxnet_dist for its result


class MXNetParameterServer(LaunchKind):
    """ps-lite (kvstore dist_sync): dpscale.launch.starters.mxnet_ps starts the scheduler, the
    servers and one worker per device; under SLURM or on emulated nodes the workers are tasks
    (task i is worker i) and the scheduler runs on the first node. Server k runs on node k mod N
    (:func:`server_nodes`): with more than one server they start as tasks of their own
    (``--server-command``, :attr:`Placement.spread`), each at its node's address, so every
    worker's gradients to the servers off its node cross the link, not worker 1's alone; one
    server stays on the first node beside the scheduler, as it always did."""

    name = "mxnet"
    one_process = False
    interface_variables = ("DMLC_INTERFACE",)
    rank_prefix = None  # dpscale.launch.starters.mxnet_ps passes its processes' output through

    @staticmethod
    def servers(cell: Cell) -> int:
        # the strategy's own key (imported here: SLURM tasks import this module, and need
        # no adapter)
        from dpscale.registry import strategy

        return strategy(cell.strategy).option(cell, "mxnet_servers")

    def _job(self, cell: Cell, world: int) -> list[str]:
        return [
            HOST_PYTHON,
            "-m",
            "dpscale.launch.starters.mxnet_ps",
            f"--workers={world}",
            f"--servers={self.servers(cell)}",
            f"--timeout={cell.measure.timeout_s}",
        ]

    def local(self, cell: Cell, python: Python, runner: list[str]) -> list[str]:
        return [*self._job(cell, cell.devices_per_node), "--", *python, *runner]

    def tasks(
        self, cell: Cell, python: Python, runner: list[str], placement: Placement, port: int
    ) -> Launch:
        servers = self.servers(cell)
        placed = server_nodes(servers, len(placement.nodes))
        argv = [*self._job(cell, cell.world_size), f"--host={placement.first_address}"]
        if any(placed):  # a server off the first node: they all start as tasks
            spread = [*placement.spread(servers), *ranked(self.name, python, runner)]
            argv.append(f"--server-command={shlex.join(spread)}")
        workers = [*placement.starter, *ranked(self.name, python, runner)]
        argv += [f"--worker-command={shlex.join(workers)}", "--", *python, *runner]
        env = placement.env()
        env[SERVER_NODES_ENV] = ",".join(map(str, placed))
        return Launch(argv, env)

    def rank_env(self, ids: Mapping[str, int | str], env: Mapping[str, str]) -> dict[str, str]:
        if env.get("DMLC_ROLE") == "server":  # a task of mxnet_ps's --server-command
            out = {"DMLC_ROLE": "server"}
        else:
            out = {"DMLC_ROLE": "worker", "DPSCALE_LOCAL_RANK": str(ids["local_rank"])}
        if not env.get("DMLC_INTERFACE"):
            out["DMLC_NODE_HOST"] = slurm_rank.resolved(
                slurm_rank.node_address(env, str(ids["node"]))
            )
        return out

    def rank_exits(self, log_text: str) -> list[RankExit]:
        # dpscale.launch.starters.mxnet_ps names the worker by its launch index
        # (DPSCALE_LOCAL_RANK); ps-lite numbers the workers' kvstore ranks itself, in the order
        # they register
        found = re.findall(
            r"\[dpscale mxnet_ps\] (worker \d+) (?:was killed by (SIG[A-Z0-9]+)|exited with "
            r"code (-?\d+))",
            log_text,
        )
        return [
            RankExit(who, -signal.Signals[sig].value if sig else int(code))
            for who, sig, code in found
        ]


KINDS: dict[str, LaunchKind] = {
    kind.name: kind for kind in (LaunchKind(), Torch(), Horovod(), MXNetParameterServer())
}


def kind(name: str) -> LaunchKind:
    if name not in KINDS:
        raise ValueError(f"launch kind {name!r} is not one of {sorted(KINDS)}")
    return KINDS[name]


def uses_srun(cell: Cell, launch_kind: str) -> bool:
    """Whether a cell's ranks are SLURM tasks when it runs in a job: one process per device
    and more than one process. (dpscale.launch.slurm.resources shapes such a job with
    ``mpi="srun"``; dpscale.launch starts them locally instead when it already runs inside a job
    step.)"""
    return not kind(launch_kind).one_process and cell.world_size > 1
