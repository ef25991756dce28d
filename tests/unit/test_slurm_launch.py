"""SLURM launch without SLURM: node lists, the allocation, the command every strategy runs in
a 2-node x 4-GPU job, the per-task rank variables, the job's resources (through the SLURM
executor plugin's own sbatch code) and the checks that fail a job that got too little."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import make_cell
from dpscale.launch import checks, kinds
from dpscale.launch.kinds import HOST_PYTHON, kind, runner_argv, srun_placement, uses_srun
from dpscale.launch.slurm import allocation as slurm
from dpscale.launch.slurm import resources as cluster
from dpscale.launch.slurm import task as slurm_task
from dpscale.registry import STRATEGIES
from helpers.slurm_fakes import no_scontrol, node

PY = ["/envs/fw/bin/python"]  # the interpreter command (launch.kinds)
CELL_FILE = Path("/shared/results/.dpscale-cell-x/cell.json")
OUT = Path("/shared/results/cells/x.json")
RUNNER = ["--cell-file", str(CELL_FILE), "--out", str(OUT)]

# What a 2-node x 4-GPU batch job sees (sbatch --nodes=2 --ntasks-per-node=4 --gres=gpu:4).
TWO_BY_FOUR = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_NNODES": "2",
    "SLURM_NTASKS": "8",
    "SLURM_TASKS_PER_NODE": "4(x2)",
    "SLURM_JOB_CPUS_PER_NODE": "32(x2)",
    "SLURM_GPUS_ON_NODE": "4",
    "SLURM_JOB_PARTITION": "gpu",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
}
SRUN_2X4 = [
    "srun",
    "--nodes=2",
    "--ntasks=8",
    "--ntasks-per-node=4",
    "--cpus-per-task=8",
    "--distribution=block",
    "--kill-on-bad-exit=1",
    "--gres=gpu:4",
]
ADDRS = json.dumps({"gpu07": "gpu07", "gpu08": "gpu08"}, sort_keys=True)


def gpu_cell(strategy: str, **kwargs):
    return make_cell(
        strategy, devices=4, nodes=2, accelerator="cuda", threads_per_device=8, **kwargs
    )


def two_by_four() -> slurm.Allocation:
    allocation = slurm.allocation_from_env(TWO_BY_FOUR, run=no_scontrol)
    assert allocation is not None
    return allocation


def render(cell, launch_kind: str, module: str, port: int = 1):
    runner = runner_argv(module, CELL_FILE, OUT)
    return kind(launch_kind).tasks(cell, PY, runner, srun_placement(cell, two_by_four()), port)


# ------------------------------------------------------------------ node lists


@pytest.mark.parametrize(
    ("nodelist", "names"),
    [
        ("node[01-03],gpu5", ["node01", "node02", "node03", "gpu5"]),
        ("gpu5", ["gpu5"]),
        ("n[9-11]", ["n9", "n10", "n11"]),
        ("c[1,3-4]", ["c1", "c3", "c4"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("a[1-2],b,c[07-08]", ["a1", "a2", "b", "c07", "c08"]),
    ],
)
def test_nodelist_expander(nodelist, names):
    assert slurm.expand_nodelist(nodelist) == names
    assert slurm.hostnames(nodelist, run=no_scontrol) == names


def test_hostnames_prefer_scontrol():
    assert slurm.hostnames("x[1-2]", run=lambda c: "x1\nx2\n") == ["x1", "x2"]


def test_per_node_counts():
    assert slurm.expand_tasks_per_node("4(x2)") == [4, 4]
    assert slurm.expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(ValueError):
        slurm.expand_tasks_per_node("two")


# ------------------------------------------------------------------ the allocation


def test_allocation_from_the_environment():
    allocation = two_by_four()
    assert allocation.nodes == ("gpu07", "gpu08")
    assert allocation.ntasks == 8 and allocation.tasks_per_node == (4, 4)
    assert allocation.cpus_per_node == (32, 32) and allocation.gpus_on_node == 4
    assert allocation.first_address == "gpu07" and not allocation.in_step
    assert slurm.allocation_from_env({"PATH": "/bin"}) is None


def test_allocation_from_scontrol_when_the_plugin_stripped_the_environment():
    """snakemake's SLURM jobstep keeps only SLURM_JOB_ID (and a few ids) in the job's env."""
    answers = {
        "job": (
            "JobId=77 JobName=x UserId=me(1) JobState=RUNNING Partition=gpu NodeList=gpu[07-08] "
            "BatchHost=gpu07 NumNodes=2 NumCPUs=64 NumTasks=8 CPUs/Task=8 "
            "TRES=cpu=64,mem=64G,node=2,billing=64,gres/gpu=8 Command=/x/y.sh\n"
        ),
        "node": (
            "NodeName=gpu07 Arch=x86_64 NodeAddr=10.0.0.7 NodeHostName=gpu07 Gres=gpu:a100:4\n"
            "NodeName=gpu08 Arch=x86_64 NodeAddr=10.0.0.8 NodeHostName=gpu08 Gres=gpu:a100:4\n"
        ),
    }

    def run(command):
        if command[:2] == ["scontrol", "show"] and command[2] in answers:
            return answers[command[2]]
        return None

    allocation = slurm.allocation_from_env({"SLURM_JOB_ID": "77"}, run=run)
    assert allocation.source == "scontrol"
    assert allocation.nodes == ("gpu07", "gpu08") and allocation.ntasks == 8
    assert allocation.gpus_total == 8 and allocation.partition == "gpu"
    assert allocation.first_address == "10.0.0.7"


def test_srun_env_drops_inherited_task_layout():
    env = {"SLURM_JOB_ID": "1", "SLURM_NTASKS": "1", "SRUN_CPUS_PER_TASK": "1", "PATH": "/bin"}
    assert slurm.srun_env(env) == {"SLURM_JOB_ID": "1", "PATH": "/bin"}


# ------------------------------------------------------------------ command lines (2 x 4 GPUs)


def test_data_parallel_is_one_task_with_all_the_node_s_gpus():
    cell = make_cell("torch-dp", devices=4, accelerator="cuda")
    assert not checks.ranks_as_tasks(cell, two_by_four())
    runner = runner_argv("dpscale.strategies.torch_dp", CELL_FILE, OUT)
    assert kind("single").local(cell, PY, runner) == [
        *PY,
        "-m",
        "dpscale.strategies.torch_dp",
        *RUNNER,
    ]
    assert cluster.cell_resources(cell, {"mem_mb_per_device": 1000}) == {
        "nodes": 1,
        "tasks": 1,
        "cpus_per_task": 4,
        "mem_mb": 4000,
        "runtime": 11,
        "gres": "gpu:4",
        "tasks_per_gpu": 0,
    }


def test_ddp_is_one_srun_task_per_gpu_with_env_rendezvous():
    cell = gpu_cell("torch-ddp")
    assert checks.ranks_as_tasks(cell, two_by_four())
    launch_ = render(cell, "torch", "dpscale.strategies.torch_ddp", port=29400)
    assert launch_.argv == [
        *SRUN_2X4,
        *PY,
        "-m",
        "dpscale.launch.slurm.task",
        "torch",
        "--",
        *PY,
        "-m",
        "dpscale.strategies.torch_ddp",
        *RUNNER,
    ]
    assert launch_.env == {
        "MASTER_ADDR": "gpu07",
        "MASTER_PORT": "29400",
        "DPSCALE_NODE_ADDRS": ADDRS,
    }


def test_horovod_ranks_are_srun_tasks_around_a_gloo_rendezvous_server():
    cell = gpu_cell("horovod-tf")
    launch_ = render(cell, "horovod", "dpscale.strategies.horovod_tf")
    assert launch_.argv == [
        HOST_PYTHON,  # stdlib only: it starts srun; the rendezvous server runs with --python
        "-m",
        "dpscale.launch.starters.horovod_gloo",
        "--hosts=gpu07:4,gpu08:4",
        "--address=gpu07",
        "--timeout=60",
        "--python=/envs/fw/bin/python",
        "--",
        *SRUN_2X4,
        *PY,
        "-m",
        "dpscale.launch.slurm.task",
        "horovod",
        "--",
        *PY,
        "-m",
        "dpscale.strategies.horovod_tf",
        *RUNNER,
    ]
    assert launch_.env == {"DPSCALE_NODE_ADDRS": ADDRS}


MXNET_TASK = [*PY, "-m", "dpscale.launch.slurm.task", "mxnet", "--"]
MXNET_RUNNER = [*PY, "-m", "dpscale.strategies.mxnet_dist", *RUNNER]


def test_one_mxnet_server_runs_beside_the_scheduler_on_the_first_node_and_workers_as_tasks():
    launch_ = render(gpu_cell("mxnet-dist"), "mxnet", "dpscale.strategies.mxnet_dist")
    assert launch_.argv == [
        HOST_PYTHON,
        "-m",
        "dpscale.launch.starters.mxnet_ps",
        "--workers=8",
        "--servers=1",
        "--timeout=60",
        "--host=gpu07",
        f"--worker-command={' '.join([*SRUN_2X4, *MXNET_TASK, *MXNET_RUNNER])}",
        "--",
        *MXNET_RUNNER,
    ]
    assert launch_.env == {"DPSCALE_NODE_ADDRS": ADDRS, "DPSCALE_MXNET_SERVER_NODES": "0"}


def test_mxnet_servers_are_dealt_over_the_nodes_as_tasks_as_mxnet_s_launcher_does():
    """Server k on node k mod N (dmlc-core's tracker), one srun step beside the workers'."""
    cell = gpu_cell("mxnet-dist", options=(("mxnet_servers", 3),))
    launch_ = render(cell, "mxnet", "dpscale.strategies.mxnet_dist")
    servers = [
        "srun",
        "--nodes=2",
        "--ntasks=3",
        "--cpus-per-task=1",
        "--distribution=cyclic",
        "--overlap",
        "--kill-on-bad-exit=1",
        *MXNET_TASK,
        *MXNET_RUNNER,
    ]
    assert launch_.argv == [
        HOST_PYTHON,
        "-m",
        "dpscale.launch.starters.mxnet_ps",
        "--workers=8",
        "--servers=3",
        "--timeout=60",
        "--host=gpu07",  # the scheduler's
        f"--server-command={' '.join(servers)}",
        f"--worker-command={' '.join([*SRUN_2X4, *MXNET_TASK, *MXNET_RUNNER])}",
        "--",
        *MXNET_RUNNER,
    ]
    assert launch_.env == {"DPSCALE_NODE_ADDRS": ADDRS, "DPSCALE_MXNET_SERVER_NODES": "0,1,0"}


@pytest.mark.parametrize(
    ("servers", "nodes", "placed"),
    [(1, 2, [0]), (2, 2, [0, 1]), (3, 2, [0, 1, 0]), (2, 4, [0, 1]), (2, 1, [0, 0])],
)
def test_server_k_runs_on_node_k_mod_n(servers, nodes, placed):
    assert kinds.server_nodes(servers, nodes) == placed


def test_fewer_servers_than_nodes_take_the_first_nodes():
    cell = make_cell("mxnet-dist", devices=1, nodes=2)
    one_node = slurm.srun_spread(cell, 1, two_by_four())
    assert one_node[:3] == ["srun", "--nodes=1", "--nodelist=gpu07"]
    assert slurm.srun_spread(cell, 2, two_by_four())[:3] == ["srun", "--nodes=2", "--ntasks=2"]


def test_a_server_task_registers_at_its_own_node_s_address():
    env = slurm_task.task_env("mxnet", {**TASK_5, "DMLC_ROLE": "server"})
    assert env == {"DMLC_ROLE": "server", "DMLC_NODE_HOST": "10.0.0.8"}


def test_a_job_with_more_nodes_than_the_cell_names_the_first_ones():
    cell = make_cell("torch-ddp", devices=4, accelerator="cuda", threads_per_device=8)
    argv = render(cell, "torch", "m").argv
    assert argv[:4] == ["srun", "--nodes=1", "--nodelist=gpu07", "--ntasks=4"]
    assert slurm.probe_command(cell, PY, two_by_four())[:3] == argv[:3]


def test_single_process_launcher_has_nothing_to_srun():
    with pytest.raises(ValueError):
        render(gpu_cell("torch-dp"), "single", "m")


def test_cpu_cells_ask_threads_per_device_and_no_gpus():
    cell = make_cell("torch-ddp", devices=2, nodes=2, threads_per_device=3)
    assert slurm.srun_prefix(cell) == [
        "srun",
        "--nodes=2",
        "--ntasks=4",
        "--ntasks-per-node=2",
        "--cpus-per-task=3",
        "--distribution=block",
        "--kill-on-bad-exit=1",
    ]
    probe = slurm.probe_command(cell, PY)
    assert probe[:5] == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=1",
    ]
    assert probe[-3:] == ["-m", "dpscale.launch.slurm.task", "--probe"]


def test_inside_a_job_step_the_processes_start_locally():
    in_step = slurm.allocation_from_env({**TWO_BY_FOUR, "SLURM_STEP_ID": "0"}, run=no_scontrol)
    cell = make_cell("torch-ddp", devices=2)
    assert not checks.ranks_as_tasks(cell, in_step)
    assert not checks.ranks_as_tasks(make_cell("torch-ddp", devices=1), two_by_four())
    assert not checks.ranks_as_tasks(cell, None)
    assert checks.ranks_as_tasks(cell, two_by_four())


# ------------------------------------------------------------------ each task's rank variables

TASK_5 = {  # task 5 of 8: second node, local rank 1
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
    "SLURMD_NODENAME": "gpu08",
    "DPSCALE_NODE_ADDRS": json.dumps({"gpu07": "10.0.0.7", "gpu08": "10.0.0.8"}),
}


def test_torch_task_env():
    assert slurm_task.task_env("torch", TASK_5) == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1",
    }


def test_horovod_task_env_matches_horovodrun_s_slot_variables():
    env = slurm_task.task_env("horovod", {**TASK_5, "HOROVOD_GLOO_IFACE": "ib0"})
    assert env == {
        "HOROVOD_HOSTNAME": "gpu08",
        "HOROVOD_RANK": "5",
        "HOROVOD_SIZE": "8",
        "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "4",
        "HOROVOD_CROSS_RANK": "1",
        "HOROVOD_CROSS_SIZE": "2",
    }
    local = {**TASK_5, "DPSCALE_NODE_ADDRS": json.dumps({"gpu08": "127.0.0.1"})}
    assert slurm_task.task_env("horovod", local)["HOROVOD_GLOO_IFACE"] == "lo"


def test_mxnet_task_env():
    assert slurm_task.task_env("mxnet", TASK_5) == {
        "DMLC_ROLE": "worker",
        "DPSCALE_LOCAL_RANK": "1",
        "DMLC_NODE_HOST": "10.0.0.8",
    }


def test_task_shim_rejects_unknown_kinds():
    with pytest.raises(ValueError):
        slurm_task.task_env("jax", TASK_5)
    with pytest.raises(SystemExit):
        slurm_task.main(["jax", "--", "true"])


# ------------------------------------------------------------------ what the job got


def test_a_job_with_what_the_cell_asks_passes():
    probe = slurm.parse_probe(
        "srun: noise\n" + "\n".join(json.dumps(n) for n in [node("gpu08", 1), node("gpu07", 0)])
    )
    assert [n["node"] for n in probe] == ["gpu07", "gpu08"]
    assert slurm.shortage(gpu_cell("torch-ddp"), two_by_four(), probe) is None


@pytest.mark.parametrize(
    ("env", "probe", "reason"),
    [
        (
            {**TWO_BY_FOUR, "SLURM_JOB_NODELIST": "gpu07", "SLURM_NTASKS": "4"},
            [node("gpu07", 0)],
            "cell asks for 2 nodes, the job got 1 (gpu07)",
        ),
        (
            {**TWO_BY_FOUR, "SLURM_NTASKS": "6"},
            [node("gpu07", 0), node("gpu08", 1)],
            "cell needs 8 tasks (2 nodes x 4), the job got 6",
        ),
        (TWO_BY_FOUR, [node("gpu07", 0)], "only 1 of the job's 2 nodes answered the probe step"),
        (
            TWO_BY_FOUR,
            [node("gpu07", 0), node("gpu08", 1, gpus=4, visible="0,1")],
            "cell asks for 4 GPUs per node, node gpu08 sees 2 (CUDA_VISIBLE_DEVICES=0,1)",
        ),
        (
            TWO_BY_FOUR,
            [node("gpu07", 0, cpus=16), node("gpu08", 1)],
            "cell needs 4 device(s) x 8 thread(s) = 32 CPUs per node, node gpu07 gave the job 16",
        ),
    ],
)
def test_a_job_that_got_less_fails_with_the_reason(env, probe, reason):
    allocation = slurm.allocation_from_env(env, run=no_scontrol)
    assert slurm.shortage(gpu_cell("torch-ddp"), allocation, probe) == reason


def test_multi_node_cell_outside_slurm_is_skipped_and_inside_is_not():
    cell = make_cell("torch-ddp", devices=1, nodes=2)
    assert "multi-node allocation" in checks.runtime_skip_reason(cell, None)
    assert checks.runtime_skip_reason(cell, two_by_four(), srun=True) is None


# ------------------------------------------------------------------ the job's resources


def plugin_sbatch_flags(resources: dict) -> str:
    """What snakemake-executor-plugin-slurm 2.8 submits for these resources: its own code."""
    submit_string = pytest.importorskip("snakemake_executor_plugin_slurm.submit_string")
    utils = pytest.importorskip("snakemake_executor_plugin_slurm.utils")

    class Resources(dict):
        __getattr__ = dict.get

    job = SimpleNamespace(resources=Resources(resources), threads=1)
    params = {
        "run_uuid": "u",
        "slurm_logfile": "l",
        "comment_str": "c",
        "account": "",
        "partition": "",
        "workdir": "",
    }
    return submit_string.get_submit_command(job, params) + utils.set_gres_string(job)


DEFAULTS = {"gpu_model": None, "cpus_per_device": None, "mem_mb_per_device": 8000}


@pytest.mark.parametrize(
    ("cell", "flags"),
    [
        (
            gpu_cell("torch-ddp"),
            "-t 11 --mem 32000 --nodes=2 --ntasks-per-node=4 --cpus-per-task=8 --gres=gpu:a100:4",
        ),
        (
            make_cell("torch-ddp", devices=1, nodes=2, accelerator="cuda"),
            "-t 11 --mem 8000 --nodes=2 --ntasks=2 --cpus-per-task=1 --gres=gpu:a100:1",
        ),
        (
            make_cell("horovod-tf", devices=2),
            "-t 11 --mem 16000 --nodes=1 --ntasks-per-node=2 --cpus-per-task=1",
        ),
        (
            make_cell("mxnet-device", devices=4, accelerator="cuda", threads_per_device=2),
            "-t 11 --mem 32000 --nodes=1 --cpus-per-task=8 --gres=gpu:a100:4",
        ),
        (
            make_cell("torch-ddp", devices=1),
            "-t 11 --mem 8000 --nodes=1 --ntasks=1 --cpus-per-task=1",
        ),
        (
            make_cell("torch-dp", devices=2, skip_reason="cpu"),
            "-t 10 --mem 1000 --nodes=1 --ntasks=1 --cpus-per-task=1",
        ),
    ],
)
def test_plugin_turns_cell_resources_into_these_sbatch_flags(cell, flags):
    resources = cluster.cell_resources(cell, {**DEFAULTS, "gpu_model": "a100"})
    submitted = " ".join(plugin_sbatch_flags(resources).split())
    start = submitted.index(" -t ")
    assert submitted[start + 1 :] == flags
    assert "--ntasks-per-gpu" not in submitted  # never the tasks-x-GPUs trap


def test_resource_defaults_and_overrides():
    cell = make_cell("torch-ddp", devices=2, threads_per_device=2)
    assert cluster.cell_resources(cell, DEFAULTS) == {
        "nodes": 1,
        "mpi": "srun",
        "tasks_per_node": 2,
        "cpus_per_task": 2,
        "mem_mb": 16000,
        "runtime": 11,
    }
    custom = {**DEFAULTS, "cpus_per_device": 6, "runtime_min": 90, "mem_mb_per_device": 500}
    resources = cluster.cell_resources(cell, custom)
    assert (resources["cpus_per_task"], resources["runtime"], resources["mem_mb"]) == (6, 90, 1000)
    assert cluster.cell_resource(cell, custom, "gres") is None
    with pytest.raises(KeyError):
        cluster.cell_resource(cell, custom, "gpu")


def test_every_strategy_s_multi_process_cells_are_srun_jobs():
    for name, plan in STRATEGIES.items():
        cell = make_cell(name, devices=2)
        assert uses_srun(cell, plan.launch) == (not plan.one_process), name
        resources = cluster.cell_resources(cell, DEFAULTS)
        assert ("mpi" in resources) == checks.ranks_as_tasks(cell, two_by_four()), name


# ------------------------------------------------------------------ a container's interpreter

APPTAINER = ["apptainer", "exec", "--nv", "/images/pytorch.sif", "python3"]
RANK_IN_CONTAINER = ["python3", "-m", "m", *RUNNER]  # what a task runs once inside it


@pytest.mark.parametrize("launch_kind", ["torch", "horovod", "mxnet"])
def test_every_srun_task_enters_the_container_and_starts_its_rank_inside(launch_kind):
    cell = gpu_cell(
        {"torch": "torch-ddp", "horovod": "horovod-tf", "mxnet": "mxnet-dist"}[launch_kind]
    )
    runner = runner_argv("m", CELL_FILE, OUT)
    argv = (
        kind(launch_kind)
        .tasks(cell, APPTAINER, runner, srun_placement(cell, two_by_four()), 1)
        .argv
    )
    task = [
        *SRUN_2X4,
        *APPTAINER,
        "-m",
        "dpscale.launch.slurm.task",
        launch_kind,
        "--",
        *RANK_IN_CONTAINER,
    ]
    if launch_kind == "mxnet":  # scheduler and servers: the container's python too
        assert f"--worker-command={' '.join(task)}" in argv
        assert argv[argv.index("--") + 1 :] == [*APPTAINER, "-m", "m", *RUNNER]
    else:
        assert argv[-len(task) :] == task
    if launch_kind != "torch":  # dpscale's helper starts srun, so it runs on the host
        assert argv[0] == HOST_PYTHON
    if launch_kind == "horovod":
        assert "--python=apptainer exec --nv /images/pytorch.sif python3" in argv


def test_local_launchers_run_inside_the_container_and_start_ranks_with_its_python():
    cell = make_cell("horovod-tf", devices=2)
    runner = runner_argv("m", CELL_FILE, OUT)
    assert kind("single").local(cell, APPTAINER, runner) == [*APPTAINER, "-m", "m", *RUNNER]
    assert kind("torch").local(cell, APPTAINER, runner)[:7] == [
        *APPTAINER,
        "-m",
        "dpscale.launch.starters.torchrun",
    ]
    horovod = kind("horovod").local(cell, APPTAINER, runner)
    assert horovod[:7] == [*APPTAINER, "-m", "dpscale.launch.starters.horovodrun"]
    assert horovod[-len(RANK_IN_CONTAINER) :] == RANK_IN_CONTAINER
    mxnet = kind("mxnet").local(make_cell("mxnet-dist", devices=2), APPTAINER, runner)
    assert mxnet[0] == HOST_PYTHON and mxnet[mxnet.index("--") + 1 :] == [
        *APPTAINER,
        "-m",
        "m",
        *RUNNER,
    ]


def test_an_oversubscribed_cpu_cell_is_skipped_unless_the_study_asks_for_it(monkeypatch):
    monkeypatch.setattr(checks, "usable_cpus", lambda: 2)
    crowded = make_cell("torch-ddp", devices=4, nodes=1)
    reason = checks.runtime_skip_reason(crowded, None)
    assert "4 CPUs, this machine has 2" in reason and "measure.oversubscribe" in reason
    allowed = dataclasses.replace(
        crowded, measure=dataclasses.replace(crowded.measure, oversubscribe=True)
    )
    assert checks.runtime_skip_reason(allowed, None) is None
