"""dpscale doctor (launch.setup.doctor and its doctor_targets, doctor_problems, doctor_table;
launch.setup.node_facts; frameworks.doctor_probe): the node read from fake /sys folders and
nvidia-smi output, NCCL's interface rules, each environment's probe report turned into a
table row and one line per problem, and the srun command of --slurm. No framework and no
environment here: tests/integration/test_doctor_on_a_study.py runs the command on the
default study's built environments."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from dpscale import cli
from dpscale.cli_workflow import planned
from dpscale.frameworks import doctor_probe
from dpscale.launch.setup import doctor, doctor_problems, doctor_table, doctor_targets, node_facts
from dpscale.launch.setup.doctor_targets import Outcome, Target
from dpscale.launch.setup.envs import COMPLETE_FLAG
from dpscale.launch.setup.node_facts import Gpus, IbPort, Interface, Node
from dpscale.registry import STRATEGIES

# -- NCCL's lists and its default interface ------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "names", "chosen"),
    [
        ("eth", ["eth0", "eth1", "ib0", "lo"], ["eth0", "eth1"]),
        ("=eth0", ["eth0", "eth01", "lo"], ["eth0"]),
        ("^docker,lo", ["lo", "docker0", "eth0", "ib0"], ["eth0", "ib0"]),
        ("^=eth0", ["eth0", "eth01"], ["eth01"]),
        ("mlx5_0:1,mlx5_2", ["mlx5_0", "mlx5_1", "mlx5_2"], ["mlx5_0", "mlx5_2"]),
        ("ib", ["eth0"], []),
    ],
)
def test_a_nccl_list_selects_as_nccl_reads_it(spec, names, chosen):
    assert node_facts.nccl_list_match(spec, names) == chosen


def interface(name: str, state: str = "up", addressed: bool = True) -> Interface:
    return Interface(name, state, addressed=addressed)


def test_nccl_takes_infiniband_first_then_anything_but_docker_and_the_loopback():
    nics = [interface("lo", "unknown"), interface("docker0"), interface("eth0"), interface("ib0")]
    assert node_facts.nccl_socket_pick(nics, None) == ["ib0"]
    assert node_facts.nccl_socket_pick(nics[:3], None) == ["eth0"]
    assert node_facts.nccl_socket_pick(nics[:2], None) == ["docker0"]
    assert node_facts.nccl_socket_pick(nics[:1], None) == ["lo"]
    # a link that is down, or has no address, is never taken; a given list is NCCL's choice
    down = [interface("ib0", "down"), interface("eth0", addressed=False), interface("eth1")]
    assert node_facts.nccl_socket_pick(down, None) == ["eth1"]
    assert node_facts.nccl_socket_pick(nics, "eth") == ["eth0"]


# -- the node read from /sys and nvidia-smi -------------------------------------------------


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_interfaces_are_read_from_sys_in_the_kernels_order(tmp_path):
    for name, index, kind, state, speed in (
        ("lo", 1, "772", "unknown", None),
        ("ib0", 3, "32", "up", "100000"),
        ("eth0", 2, "1", "up", "-1"),  # a virtual link reads -1
    ):
        write(tmp_path / name / "ifindex", str(index))
        write(tmp_path / name / "type", kind)
        write(tmp_path / name / "operstate", state)
        write(tmp_path / name / "mtu", "1500")
        if speed:
            write(tmp_path / name / "speed", speed)
    found = node_facts.read_interfaces(tmp_path, addressed=lambda name: name != "ib0")
    assert [i.name for i in found] == ["lo", "eth0", "ib0"]
    assert found[2].describe() == "ib0 (up, infiniband, 100000 Mb/s, mtu 1500, no address)"
    assert found[1].speed_mbps is None and found[1].kind == "ether"
    assert found[0].usable and not found[2].usable
    assert node_facts.read_interfaces(tmp_path / "absent") == ()


def test_infiniband_ports_are_read_with_their_state_rate_and_link_layer(tmp_path):
    port = tmp_path / "mlx5_0" / "ports" / "1"
    write(port / "state", "4: ACTIVE")
    write(port / "rate", "200 Gb/sec (4X HDR)")
    write(port / "link_layer", "InfiniBand")
    write(tmp_path / "mlx5_1" / "ports" / "1" / "state", "1: DOWN")
    devices, ports = node_facts.read_infiniband(tmp_path)
    assert devices == ("mlx5_0", "mlx5_1")
    assert ports[0].describe() == "mlx5_0 port 1 (ACTIVE, 200 Gb/sec (4X HDR), InfiniBand)"
    assert ports[1].state == "DOWN"
    assert node_facts.read_infiniband(tmp_path / "absent") == ((), ())


def test_nvidia_smi_rows_and_the_drivers_cuda_are_parsed():
    rows = node_facts.parse_gpu_rows(
        "0, NVIDIA H100 80GB HBM3, 550.54.15, 9.0, 81559 MiB\n"
        "1, NVIDIA H100 80GB HBM3, 550.54.15, 9.0, 81559 MiB\n"
    )
    assert len(rows) == 2 and rows[1]["compute_cap"] == "9.0" and rows[0]["index"] == "0"
    header = "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4     |"
    assert node_facts.parse_cuda_driver(header) == "12.4"
    assert node_facts.parse_cuda_driver("no header") is None


def test_a_node_without_nvidia_smi_has_no_gpu(monkeypatch):
    monkeypatch.setattr(node_facts.shutil, "which", lambda name: None)
    gpus = node_facts.read_gpus()
    assert not gpus.found and gpus.why == "nvidia-smi is not on PATH"


# -- inside an environment ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "version"), [(21805, "2.18.5"), (2708, "2.7.8"), (22703, "2.27.3"), (0, None)]
)
def test_nccls_version_code_reads_as_a_version(code, version):
    assert doctor_probe.nccl_code(code) == version


def test_torchs_build_settings_give_its_onednn_and_mkl():
    shown = (
        "  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605\n"
        "  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd)\n"
    )
    assert doctor_probe.torch_onednn(shown) == "oneDNN v3.12.0, MKL 2024.2"
    assert doctor_probe.torch_onednn("nothing") == "no oneDNN"


def test_the_probe_reports_each_module_and_a_failed_field_without_stopping():
    report = doctor_probe.probe(["json", "no_such_framework_here"])
    assert report["python"] and report["modules"]["numpy"]["version"]
    assert report["modules"]["json"]["version"]
    assert report["modules"]["no_such_framework_here"]["error"].startswith("ModuleNotFoundError")
    info: dict = {}

    def broken():
        raise RuntimeError("CUDA driver\nversion is insufficient")

    assert doctor_probe.guarded(info, "devices", broken) is None
    assert info == {"errors": {"devices": "RuntimeError: CUDA driver version is insufficient"}}


def test_the_probe_says_each_framework_in_fields_that_name_none():
    torch = {"version": "2.4.0", "cuda": "12.4", "cudnn": 90100, "devices": 4, "nccl": "2.20.5",
             "backends": {"nccl": False}, "onednn": "oneDNN v3.4"}  # fmt: skip
    horovod = {"version": "0.28.1", "nccl": None, "gloo": True, "mpi": False}
    read = {"numpy": {"version": "2.0"}, "torch": torch, "horovod": horovod, "x": {"error": "E"}}
    shown = {f["name"]: f for f in doctor_probe.frameworks(read, ["torch", "horovod", "x"])}
    assert list(shown) == ["torch", "horovod", "x", "numpy"]  # the asked ones first
    assert shown["numpy"] == {"name": "numpy", "version": "2.0"}
    assert shown["x"] == {"name": "x", "error": "E"}
    assert shown["torch"]["built_with"] == "CUDA 12.4, cuDNN 90100"
    assert shown["torch"]["gpus_seen"] == 4 and shown["torch"]["cuda_build_needed"]
    assert shown["torch"]["multi_process_gap"] == "torch 2.4.0 has no NCCL backend"
    assert shown["torch"]["cpu_kernels"] == "oneDNN v3.4"
    assert shown["horovod"]["nccl"] == "without NCCL (gloo)"
    assert "gpus_seen" not in shown["horovod"] and "built_with" not in shown["horovod"]
    assert shown["horovod"]["cuda_study_problem"].startswith("Horovod 0.28.1 was built without")
    # the frameworks' own checks, in the order the doctor lists them
    checks = doctor_probe.own_checks(["mxnet", "tensorflow", "horovod", "torch"])
    assert [c["module"] for c in checks] == ["torch", "horovod", "mxnet"]
    assert checks[1]["program"] == ["horovodrun", "--check-build"]


def test_the_probe_names_its_checks_first_before_any_framework_imports(monkeypatch, capsys):
    monkeypatch.setattr(doctor_probe.sys, "argv", ["doctor_probe", "json"])
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)  # main sets it: put it back
    doctor_probe.main()
    first, last = capsys.readouterr().out.splitlines()
    assert first == "DPSCALE-DOCTOR-CHECKS []" and last.startswith("DPSCALE-DOCTOR {")


def test_a_probe_without_its_line_fails_with_its_last_words():
    failed = doctor_targets.parse_probe("", "Traceback ...\nImportError: libcudart.so.12\n", 1, 0.2)
    assert failed.report is None
    assert failed.failure == "the probe exited with code 1: ImportError: libcudart.so.12"
    good = doctor_targets.parse_probe('noise\nDPSCALE-DOCTOR {"python": "3.11"}\n', "", 0, 1.0)
    assert good.report == {"python": "3.11"} and good.failure is None
    # the checks line comes first, there where the probe stopped after it too
    checks = 'DPSCALE-DOCTOR-CHECKS [{"module": "m", "python": ["-m", "m.check"]}]\n'
    crashed = doctor_targets.parse_probe(checks, "", -11, 0.2)
    assert crashed.failure == "the probe exited with code -11: no output"
    assert crashed.checks == ({"module": "m", "python": ["-m", "m.check"]},)


# -- the study's environments ---------------------------------------------------------------


def study(**more) -> dict:
    config = {
        "study": "s",
        "accelerator": "cpu",
        "strategies": ["torch-ddp", "horovod-tf"],
        "interpreters": {},
        "env_dir": ".envs",
        "env_locks": "",
        "devices_per_node": [1, 2],
        "nodes": [1],
        "networks": ["host"],
        "cluster": {},
        "threads_per_device": 1,
    }
    config.update(more)
    return config


def fake_prefix(root: Path):
    def prefix_of(env, env_dir, **_):
        return root / f"{env}-0123456789ab"

    return prefix_of


def test_each_environment_is_built_not_built_or_the_sites_own(tmp_path):
    built = tmp_path / "torch-0123456789ab"
    write(built / COMPLETE_FLAG, "x")
    write(tmp_path / "tf-horovod-aaaaaaaaaaaa" / COMPLETE_FLAG, "x")  # an older build
    found = doctor_targets.targets(study(), STRATEGIES, [Path("my.yaml")], fake_prefix(tmp_path))
    assert [t.env for t in found] == ["tf-horovod", "torch"]
    tf, torch = found
    assert torch.command == (str(built / "bin" / "python"),) and not torch.missing
    assert torch.modules == ["torch"] and torch.multi_process
    assert tf.modules == ["tensorflow", "horovod"]
    assert tf.missing.startswith(f"not built at {tmp_path / 'tf-horovod-0123456789ab'}")
    assert "tf-horovod-aaaaaaaaaaaa is a build of other requirements" in tf.missing
    assert "`dpscale run my.yaml --no-report -- envs`" in tf.missing

    site = study(interpreters={"torch": ["/no/such/apptainer", "exec", "img.sif", "python3"]})
    torch = doctor_targets.targets(site, STRATEGIES, [], fake_prefix(tmp_path))[1]
    assert torch.source == "configured" and torch.key == "interpreters.torch"
    assert torch.missing.startswith("/no/such/apptainer does not exist or is not executable")


def outcome(**modules) -> Outcome:
    """A probe's report of these modules' readings, as the probe turns them into its
    ``frameworks`` and checks."""
    read = {"numpy": {"version": "2.0"}, **modules}
    report = {
        "python": "3.11.7",
        "modules": read,
        "frameworks": doctor_probe.frameworks(read, [*modules]),
    }
    return Outcome(report, 2.5, checks=tuple(doctor_probe.own_checks([*modules])))


TORCH = Target("torch", ("torch-dp", "torch-ddp"), ("torch>=2.0",), ("/e/bin/python",),
               prefix=Path("/e"), multi_process=True)  # fmt: skip
TF = Target("tf-horovod", ("horovod-tf",), ("tensorflow>=2.9,<2.16", "horovod>=0.28"),
            ("/t/bin/python",), prefix=Path("/t"), multi_process=True)  # fmt: skip
CPU_TORCH = {"version": "2.13.0+cpu", "cuda": None, "devices": 0, "backends": {"nccl": False}}
CUDA_TORCH = {"version": "2.4.0", "cuda": "12.4", "cudnn": 90100, "devices": 4, "nccl": "2.20.5",
              "backends": {"nccl": True, "gloo": True}}  # fmt: skip


def test_a_healthy_cpu_environment_has_no_problem():
    assert (
        doctor_problems.environment_problems(study(), TORCH, outcome(torch=CPU_TORCH), True) == []
    )


def test_a_broken_environment_is_one_line_naming_it_and_what_to_do():
    failed = Outcome(None, 0.1, "the probe exited with code 1: ImportError: libtorch.so")
    lines = doctor_problems.environment_problems(study(), TORCH, failed, True)
    assert len(lines) == 1
    assert lines[0].startswith("environment torch (/e/bin/python): the probe exited with code 1")
    assert "remove /e and build it again" in lines[0]
    unimported = outcome(torch={"error": "OSError: libcudnn.so.9"})
    assert doctor_problems.environment_problems(study(), TORCH, unimported, True) == [
        "environment torch (/e/bin/python): import torch failed (OSError: libcudnn.so.9): "
        "remove /e and build it again (dpscale run builds it; its build log is /logs/e.log)"
    ]
    missing = Target("torch", ("torch-dp",), (), missing="not built at /e: build it")
    assert doctor_problems.environment_problems(study(), missing, None, True) == [
        "environment torch: not built at /e: build it"
    ]


def test_a_version_dpscale_does_not_drive_and_an_unread_field_are_problems():
    old = outcome(torch={**CPU_TORCH, "version": "1.13.1", "errors": {"onednn": "KeyError: x"}})
    lines = doctor_problems.environment_problems(study(), TORCH, old, True)
    assert len(lines) == 2
    assert "torch could not tell its onednn (KeyError: x)" in lines[0]
    assert "torch 1.13.1 is not supported (dpscale drives torch>=2.0)" in lines[1]


def test_a_cuda_study_needs_cuda_builds_its_devices_and_nccl():
    cuda = study(accelerator="cuda", devices_per_node=[4])
    assert doctor_problems.environment_problems(cuda, TORCH, outcome(torch=CUDA_TORCH), True) == []
    (line,) = doctor_problems.environment_problems(cuda, TORCH, outcome(torch=CPU_TORCH), True)
    assert "torch 2.13.0+cpu is a CPU build, the study's accelerator is cuda" in line
    fewer = outcome(torch={**CUDA_TORCH, "devices": 2})
    (line,) = doctor_problems.environment_problems(cuda, TORCH, fewer, True)
    assert "torch sees 2 GPU(s), the study asks up to 4 per node" in line
    # where the node itself has too few, the environments are not blamed again
    assert doctor_problems.environment_problems(cuda, TORCH, fewer, False) == []
    no_nccl = outcome(torch={**CUDA_TORCH, "backends": {"nccl": False}})
    (line,) = doctor_problems.environment_problems(cuda, TORCH, no_nccl, True)
    assert "has no NCCL backend, which torch-dp, torch-ddp use on GPUs" in line
    tf = {"version": "2.15.1", "cuda": "12.2", "cudnn": "8", "devices": 4}
    horovod = {"version": "0.28.1", "nccl": None, "gloo": True}
    (line,) = doctor_problems.environment_problems(
        cuda, TF, outcome(tensorflow=tf, horovod=horovod), True
    )
    assert "Horovod 0.28.1 was built without NCCL" in line and "HOROVOD_GPU_OPERATIONS=NCCL" in line


NO_SMI = Gpus(False, why="nvidia-smi is not on PATH")


def node(gpus: Gpus = NO_SMI, **more) -> Node:
    nics = (interface("lo", "unknown"), interface("eth0"), interface("ib0"))
    return Node(gpus, more.get("interfaces", nics), more.get("ports", ()), more.get("ib", ()))


H100 = {"index": "0", "name": "NVIDIA H100", "driver_version": "550.54.15", "compute_cap": "9.0"}


def test_the_node_has_no_problem_on_cpu_without_a_gpu():
    assert doctor_problems.node_problems(study(), node(), {}) == ([], True)


def test_a_cuda_study_on_a_node_without_enough_gpus_is_a_problem():
    cuda = study(accelerator="cuda", devices_per_node=[2])
    lines, ok = doctor_problems.node_problems(cuda, node(), {})
    assert not ok and lines[0].startswith("node: the study's accelerator is cuda but nvidia-smi")
    two = node(Gpus(True, (H100, {**H100, "index": "1"}), "12.4"))
    assert doctor_problems.node_problems(cuda, two, {}) == ([], True)
    lines, ok = doctor_problems.node_problems(cuda, two, {"CUDA_VISIBLE_DEVICES": "0"})
    assert not ok and "1 GPU(s) visible here, the study asks up to 2 per node" in lines[0]


def test_the_studys_nccl_settings_are_checked_against_the_node_and_the_shell():
    ports = (IbPort("mlx5_0", "1", "ACTIVE"),)
    given = study(cluster={"nccl_socket_ifname": "ib", "nccl_ib_hca": "mlx5_0:1"})
    shell = {"NCCL_SOCKET_IFNAME": "ib", "NCCL_IB_HCA": "mlx5_0:1"}
    assert doctor_problems.node_problems(given, node(ports=ports, ib=("mlx5_0",)), shell) == (
        [],
        True,
    )
    lines, _ = doctor_problems.node_problems(given, node(ports=ports, ib=("mlx5_0",)), {})
    assert lines == [
        "node: cluster.nccl_socket_ifname is 'ib' but this shell's NCCL_SOCKET_IFNAME is not "
        "set: the ranks start with this shell's variables, so export NCCL_SOCKET_IFNAME=ib "
        "before dpscale run",
        "node: cluster.nccl_ib_hca is 'mlx5_0:1' but this shell's NCCL_IB_HCA is not set: the "
        "ranks start with this shell's variables, so export NCCL_IB_HCA=mlx5_0:1 before "
        "dpscale run",
    ]
    wrong = study(
        cluster={"nccl_socket_ifname": "hsn"}, networks=[{"name": "x", "interface": "x9"}]
    )
    lines, _ = doctor_problems.node_problems(wrong, node(), {"NCCL_SOCKET_IFNAME": "hsn"})
    assert lines == [
        "node: cluster.nccl_socket_ifname 'hsn' matches none of this node's network "
        "interfaces (lo, eth0, ib0): name one of them",
        "node: this shell's NCCL_SOCKET_IFNAME 'hsn' matches none of this node's network "
        "interfaces (lo, eth0, ib0): name one of them",
        "node: networks 'x' names interface 'x9', which this node does not have (lo, eth0, "
        "ib0): check it on the compute nodes",
    ]


# -- the table --------------------------------------------------------------------------------


def rendered(problems=(), **outcomes) -> str:
    config, _ = planned([], writes=False)
    found = [TORCH, TF, Target("mxnet", ("mxnet-dist",), (), missing="not built at /m")]
    return doctor_table.render(config, [], found, outcomes, node(), {}, list(problems), 7.5)


def test_the_table_is_markdown_a_user_can_paste():
    tf = {"version": "2.15.1", "cuda": None, "devices": 0, "onednn": "oneDNN on"}
    horovod = {"version": "0.28.1", "nccl": None, "gloo": True, "mpi": False}
    text = rendered(
        torch=outcome(torch={**CPU_TORCH, "onednn": "oneDNN v3.12.0 | x"}),
        **{"tf-horovod": outcome(tensorflow=tf, horovod=horovod)},
    )
    tables = [line for line in text.splitlines() if line.startswith("|")]
    widths = {line.count("|") - line.count("\\|") for line in tables}
    assert widths == {3, 11}, "every row of each table has its table's columns"
    assert "| GPUs | no GPU: nvidia-smi is not on PATH; the study's accelerator is cpu" in text
    row = next(line for line in tables if line.startswith("| tf-horovod |"))
    assert "tensorflow 2.15.1; horovod 0.28.1; numpy 2.0" in row
    assert "horovod without NCCL (gloo)" in row and "tensorflow: CPU build" in row
    assert "oneDNN v3.12.0 \\| x" in text  # a pipe in a value does not split its cell
    assert "| mxnet | mxnet-dist |" in text and "not run: see Problems" in text
    assert "Problems: none" in text
    assert "`/t/bin/horovodrun --check-build`" in text
    assert "`/e/bin/python -m torch.utils.collect_env`" in text
    site = Target("tf", ("horovod-tf",), ("horovod",), ("img", "python3"), source="configured")
    shown = doctor_table.own_checks([site], {"tf": outcome(horovod={"version": "0.28.1"})})
    assert shown == ["- `img python3 -m horovod.runner.launch --check-build`"]
    assert re.search(r"dpscale doctor: 2 environment\(s\) probed in 7.5 s$", text)


def test_the_problems_are_one_line_each_after_the_tables():
    text = rendered(["environment torch: broken: fix it", "node: no GPU: run on one"])
    assert "Problems (2):\n- environment torch: broken: fix it\n- node: no GPU: run on one" in text


# -- SLURM and the command --------------------------------------------------------------------


def test_slurm_runs_the_doctor_on_a_node_shaped_as_the_studys_largest_cell():
    config = study(accelerator="cuda", devices_per_node=[1, 4])
    config["cluster"] = {"gpu_model": "a100", "cpus_per_device": 8, "mem_mb_per_device": 1000}
    environ = {"SBATCH_PARTITION": "gpu", "SBATCH_ACCOUNT": "proj42"}
    words = doctor.srun_command(
        config, [Path("my.yaml")], 60, environ, ["--qos=debug"], python="/v/bin/python"
    )
    assert words == [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=32",
        "--mem=4000",
        "--time=6",
        "--job-name=dpscale-doctor",
        "--account=proj42",
        "--partition=gpu",
        "--gres=gpu:a100:4",
        "--qos=debug",
        "/v/bin/python",
        "-m",
        "dpscale.cli",
        "doctor",
        "my.yaml",
        "--timeout=60",
    ]
    cpu = doctor.srun_command(study(), [], 30, {}, python="p")
    assert not any(w.startswith(("--gres", "--partition", "--account")) for w in cpu)


def run_cli(words: list[str]) -> tuple[int | str | None, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as stopped:
        cli.main(words)
    return stopped.value.code, out.getvalue()


def test_the_command_exits_1_with_a_problem_and_0_without(monkeypatch):
    monkeypatch.setattr(doctor, "doctor", lambda *a: ("| table |", ["environment x: broken"]))
    assert run_cli(["doctor"]) == (1, "| table |\n")
    monkeypatch.setattr(doctor, "doctor", lambda *a: ("| table |", []))
    assert run_cli(["doctor"]) == (0, "| table |\n")


def test_srun_options_need_slurm_and_slurm_needs_srun(monkeypatch):
    code, _ = run_cli(["doctor", "--", "--partition=gpu"])
    assert code == "dpscale: doctor: the options after -- are srun's: give --slurm too"
    monkeypatch.setattr("shutil.which", lambda name: None)
    code, _ = run_cli(["doctor", "--slurm"])
    assert code.startswith("dpscale: doctor --slurm: srun is not on PATH here")
