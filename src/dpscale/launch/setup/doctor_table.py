"""``dpscale doctor``'s text: two Markdown tables a user can paste into an issue, then the
problems and the frameworks' own fuller checks.

The first table is the node (dpscale, the study, the host, its GPUs and driver, network
interfaces, InfiniBand, the NCCL settings the study and this shell give and what NCCL would
take here); the second has a row per environment, its cells the words each framework's probe
gave (dpscale.frameworks.doctor_probe's ``frameworks``), so no framework is named here.
"""

from __future__ import annotations

import platform
import shlex
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpscale.launch.setup.doctor_problems import devices_per_node
from dpscale.launch.setup.doctor_targets import Outcome, Target
from dpscale.launch.setup.node_facts import Node, nccl_list_match, nccl_socket_pick
from dpscale.plan.env_builds import CPU
from dpscale.runner.sysinfo import cpu_model, git_commit, usable_cpus

NCCL_SETTINGS = (
    "NCCL_IB_DISABLE",
    "NCCL_NET",
    "NCCL_SOCKET_FAMILY",
    "NCCL_P2P_DISABLE",
    "NCCL_DEBUG",
    "NCCL_ALGO",
    "NCCL_PROTO",
)
ENVIRONMENT_HEADER = (
    "environment",
    "strategies",
    "interpreter",
    "Python",
    "frameworks",
    "GPUs seen",
    "built with CUDA / cuDNN",
    "NCCL",
    "oneDNN / MKL",
    "probe",
)


def cell(text: Any) -> str:
    """A Markdown table cell: one line, its pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|") or "-"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]


def gpu_words(config: Mapping[str, Any], node: Node, environ: Mapping[str, str]) -> str:
    if not node.gpus.found:
        need = (
            "the study's accelerator is cpu: it needs none"
            if config["accelerator"] == "cpu"
            else "the study's accelerator is cuda"
        )
        return f"no GPU: {node.gpus.why}; {need}"
    if not node.gpus.rows:
        return "no GPU: nvidia-smi lists none"
    shown = []
    for row in node.gpus.rows:
        capability = f", compute {row['compute_cap']}" if row.get("compute_cap") else ""
        memory = f", {row['memory.total']}" if row.get("memory.total") else ""
        shown.append(f"{row.get('index', '?')}: {row.get('name', '?')}{capability}{memory}")
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    narrowed = f"; CUDA_VISIBLE_DEVICES={visible}" if visible is not None else ""
    return f"{len(node.gpus.rows)}: " + "; ".join(shown) + narrowed


def driver_words(node: Node) -> str:
    if not node.gpus.found or not node.gpus.rows:
        return "-"
    drivers = sorted({row.get("driver_version", "?") for row in node.gpus.rows})
    cuda = node.gpus.cuda_driver or "not shown"
    return f"driver {', '.join(drivers)}, runs CUDA up to {cuda}"


def nccl_rows(
    config: Mapping[str, Any], node: Node, environ: Mapping[str, str]
) -> list[tuple[str, str]]:
    cluster = config.get("cluster") or {}
    shell = environ.get("NCCL_SOCKET_IFNAME")
    picked = nccl_socket_pick(node.interfaces, shell)
    how = (
        "as this shell's NCCL_SOCKET_IFNAME selects"
        if shell
        else "its default: ib first, then any but docker, lo, virbr"
    )
    networks = [
        f"{n['name']}: {n['interface']}"
        for n in config.get("networks", [])
        if isinstance(n, dict) and n.get("interface")
    ]
    socket_row = (
        f"study (cluster.nccl_socket_ifname): {cluster.get('nccl_socket_ifname') or 'not set'}; "
        f"this shell: {shell if shell is not None else 'not set'}; "
        + (f"networks' own: {', '.join(networks)}; " if networks else "")
        + f"NCCL would use here: {', '.join(picked) or 'none'} ({how})"
    )
    hca = environ.get("NCCL_IB_HCA")
    active = sorted({p.device for p in node.ib_ports if p.state == "ACTIVE"})
    chosen = nccl_list_match(hca, active) if hca else active
    hca_row = (
        f"study (cluster.nccl_ib_hca): {cluster.get('nccl_ib_hca') or 'not set'}; "
        f"this shell: {hca if hca is not None else 'not set'}; "
        f"NCCL would use here: {', '.join(chosen) or 'none (no active InfiniBand port)'}"
    )
    others = [f"{k}={environ[k]}" for k in NCCL_SETTINGS if k in environ]
    return [
        ("NCCL_SOCKET_IFNAME", socket_row),
        ("NCCL_IB_HCA", hca_row),
        ("other NCCL settings", ", ".join(others) or "none set in this shell"),
    ]


def node_rows(
    config: Mapping[str, Any], files: Sequence[Path], node: Node, environ: Mapping[str, str]
) -> list[tuple[str, str]]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        mine = version("dpscale")
    except PackageNotFoundError:
        mine = "not installed"
    study = (
        f"{config['study']} ({', '.join(map(str, files)) or 'config.yaml'}): accelerator "
        f"{config['accelerator']}, up to {devices_per_node(config)} device(s) per node on "
        f"{max(config['nodes'])} node(s); strategies {', '.join(config['strategies'])}"
    )
    job = environ.get("SLURM_JOB_ID")
    where = f"SLURM job {job} on {environ.get('SLURMD_NODENAME', '?')}" if job else "no SLURM job"
    interfaces = ", ".join(i.describe() for i in node.interfaces) or "none readable"
    ib = ", ".join(p.describe() for p in node.ib_ports) or (
        f"devices {', '.join(node.ib_devices)}, no port readable"
        if node.ib_devices
        else "none (no /sys/class/infiniband)"
    )
    return [
        ("dpscale", f"{mine}, commit {git_commit()}; Python {platform.python_version()}"),
        ("study", study),
        (
            "node",
            f"{socket.gethostname()}: {platform.platform()}; {cpu_model()}; "
            f"{usable_cpus()} usable CPU(s); {where}",
        ),
        ("GPUs", gpu_words(config, node, environ)),
        ("NVIDIA driver", driver_words(node)),
        ("network interfaces", interfaces),
        ("InfiniBand", ib),
        *nccl_rows(config, node, environ),
    ]


def framework_words(frameworks: Sequence[Mapping[str, Any]]) -> list[str]:
    """frameworks, devices seen, CUDA / cuDNN, NCCL, oneDNN: one table cell each, in the
    probe's order and words."""
    versions, devices, cuda, nccl, kernels = [], [], [], [], []
    for framework in frameworks:
        name = framework["name"]
        if framework.get("error"):
            versions.append(f"{name}: import failed")
            continue
        versions.append(f"{name} {framework.get('version', '?')}")
        if framework.get("gpus_seen") is not None:
            devices.append(f"{name} {framework['gpus_seen']}")
        if framework.get("built_with"):
            cuda.append(f"{name}: {framework['built_with']}")
        if framework.get("nccl"):
            nccl.append(f"{name} {framework['nccl']}")
        if framework.get("cpu_kernels"):
            kernels.append(f"{name}: {framework['cpu_kernels']}")
    return ["; ".join(v) or "-" for v in (versions, devices, cuda, nccl, kernels)]


def environment_rows(found: Sequence[Target], outcomes: Mapping[str, Outcome]) -> list[list[str]]:
    rows = []
    for target in found:
        outcome = outcomes.get(target.env)
        interpreter = shlex.join(target.command) if target.command else str(target.prefix or "-")
        interpreter += f" ({target.source}" + (
            f", {target.variant})" if target.variant != CPU else ")"
        )
        report = outcome.report if outcome and outcome.report else None
        if report is None:
            state = "not run: see Problems" if target.missing else "failed: see Problems"
            rows.append(
                [target.env, ", ".join(target.strategies), interpreter] + ["-"] * 6 + [state]
            )
            continue
        python = report.get("python", "?")
        container = report.get("container")
        if container:
            python += f" in {container.get('runtime')} {container.get('image') or ''}".rstrip()
        rows.append(
            [
                target.env,
                ", ".join(target.strategies),
                interpreter,
                python,
                *framework_words(report.get("frameworks", [])),
                f"{outcome.seconds:.1f} s",
            ]
        )
    return rows


def own_checks(found: Sequence[Target], outcomes: Mapping[str, Outcome]) -> list[str]:
    """The frameworks' own, fuller checks each probe named, as commands for this study's
    environments: the environment's own program where it is a built one, else its
    interpreter's."""
    lines = []
    for target in found:
        outcome = outcomes.get(target.env)
        if target.missing or outcome is None:
            continue
        for check in outcome.checks:
            program = check.get("program")
            words = (
                [str(target.prefix / "bin" / program[0]), *program[1:]]
                if program and target.prefix
                else [*target.command, *check["python"]]
            )
            lines.append(shlex.join(words))
    return [f"- `{line}`" for line in lines]


def render(
    config: Mapping[str, Any],
    files: Sequence[Path],
    found: Sequence[Target],
    outcomes: Mapping[str, Outcome],
    node: Node,
    environ: Mapping[str, str],
    problems: Sequence[str],
    seconds: float,
) -> str:
    lines = [f"## dpscale doctor: study {config['study']} on {socket.gethostname()}", ""]
    lines += table(("check", "on this node"), node_rows(config, files, node, environ))
    lines += ["", *table(ENVIRONMENT_HEADER, environment_rows(found, outcomes)), ""]
    if problems:
        lines += [f"Problems ({len(problems)}):", *(f"- {p}" for p in problems)]
    else:
        lines.append("Problems: none")
    lines += ["", "More, from the frameworks' own checks:", *own_checks(found, outcomes)]
    lines.append(
        "- `NCCL_DEBUG=INFO` in the shell that runs the study: each cell's log then shows the "
        "interfaces and InfiniBand devices NCCL chose"
    )
    lines += ["", f"dpscale doctor: {len(outcomes)} environment(s) probed in {seconds:.1f} s"]
    return "\n".join(lines)
