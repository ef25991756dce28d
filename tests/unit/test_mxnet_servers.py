"""mxnet-dist's parameter servers across emulated nodes: server k in node k mod N's namespace,
started by dpscale.launch.starters.mxnet_ps as one command beside the workers' (the SLURM command
lines are in test_slurm_launch.py)."""

from __future__ import annotations

import shlex

import pytest

from conftest import make_cell
from dpscale.launch.emulation import netns_run
from dpscale.launch.kinds import HOST_PYTHON, kind, netns_placement, runner_argv
from dpscale.launch.starters import mxnet_ps
from dpscale.plan.cell import Network

PY = ["/envs/mxnet/bin/python"]
RUNNER = runner_argv("dpscale.strategies.mxnet_dist", "cell.json", "out.json")
NAMESPACES, ADDRESSES = ["dps1n0", "dps1n1"], ["10.77.1.1", "10.77.1.2"]


def render(servers: int):
    cell = make_cell(
        "mxnet-dist",
        nodes=2,
        network=Network("lan", rate="1gbit"),
        options=(("mxnet_servers", servers),),
    )
    placement = netns_placement(cell, NAMESPACES, ADDRESSES)
    return kind("mxnet").tasks(cell, PY, RUNNER, placement, 1)


def option(argv: list[str], name: str) -> list[str] | None:
    found = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
    return shlex.split(found[0]) if found else None


def test_two_servers_on_two_emulated_nodes_start_in_both_namespaces():
    launch = render(2)
    netns_run = [
        HOST_PYTHON,
        "-m",
        "dpscale.launch.emulation.netns_run",
        "--namespaces=dps1n0,dps1n1",
    ]
    task = [*PY, "-m", "dpscale.launch.slurm.task", "mxnet", "--", *PY, *RUNNER]
    assert option(launch.argv, "server-command") == [
        *netns_run,
        "--ntasks=2",
        "--distribution=cyclic",
        "--timeout=60",
        "--",
        *task,
    ]
    assert option(launch.argv, "worker-command") == [
        *netns_run,
        "--tasks-per-node=1",
        "--timeout=60",
        "--",
        *task,
    ]
    assert "--host=10.77.1.1" in launch.argv  # the scheduler stays on the first node
    assert launch.env["DPSCALE_MXNET_SERVER_NODES"] == "0,1"


def test_one_server_starts_beside_the_scheduler_as_before():
    launch = render(1)
    assert option(launch.argv, "server-command") is None
    assert launch.env["DPSCALE_MXNET_SERVER_NODES"] == "0"


def test_netns_run_deals_cyclic_tasks_as_srun_does():
    nodes = netns_run.task_nodes(2, 3, cyclic=True)
    assert nodes == [0, 1, 0]
    third = netns_run.task_env({}, 2, NAMESPACES, nodes)
    assert third == {
        "SLURM_PROCID": "2",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "0",
        "SLURM_STEP_NUM_TASKS": "3",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_TASKS_PER_NODE": "2,1",
        "SLURMD_NODENAME": "dps1n0",
    }


def test_netns_run_s_block_tasks_are_unchanged():
    nodes = netns_run.task_nodes(2, 4)
    assert nodes == [0, 0, 1, 1]
    env = netns_run.task_env({}, 3, NAMESPACES, nodes)
    assert (env["SLURM_LOCALID"], env["SLURM_NODEID"], env["SLURMD_NODENAME"]) == (
        "1",
        "1",
        "dps1n1",
    )
    assert env["SLURM_STEP_TASKS_PER_NODE"] == "2(x2)"


class FakePopen:
    started: list[tuple[list[str], dict[str, str]]] = []

    def __init__(self, argv, env, preexec_fn=None):
        FakePopen.started.append((list(argv), dict(env)))


@pytest.mark.parametrize("server_command", [[], ["start-servers"]])
def test_mxnet_ps_starts_servers_as_one_command_or_each_itself(monkeypatch, server_command):
    monkeypatch.setattr(mxnet_ps.subprocess, "Popen", FakePopen)
    FakePopen.started = []
    job = mxnet_ps.Job(["runner"], 2, 2, "127.0.0.1", ["start-workers"], server_command)
    job.start()
    roles = [(argv, env["DMLC_ROLE"], env.get("DMLC_NODE_HOST")) for argv, env in FakePopen.started]
    if server_command:  # each task registers with its own node's address
        servers = [(["start-servers"], "server", None)]
    else:
        servers = [(["runner"], "server", "127.0.0.1")] * 2
    assert roles == [
        (["runner"], "scheduler", "127.0.0.1"),
        *servers,
        (["start-workers"], "worker", None),
    ]
    assert all(env["OMP_NUM_THREADS"] == "1" for _, env in FakePopen.started[1:-1])
    assert [name for name, _ in job.infra] == ["scheduler"] + (
        ["servers"] if server_command else ["server 0", "server 1"]
    )


def test_the_result_records_the_servers_nodes_as_the_launch_kind_placed_them(monkeypatch):
    from dpscale.strategies import mxnet_dist

    cell = make_cell("mxnet-dist", devices=2, options=(("mxnet_servers", 2),))
    monkeypatch.delenv("DPSCALE_MXNET_SERVER_NODES", raising=False)
    assert mxnet_dist.server_nodes(cell) == [0, 0]  # started on this machine alone
    monkeypatch.setenv("DPSCALE_MXNET_SERVER_NODES", "0,1")
    assert mxnet_dist.server_nodes(cell) == [0, 1]
