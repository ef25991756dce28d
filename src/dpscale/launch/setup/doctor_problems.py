"""``dpscale doctor``'s problems: one line each, naming what is wrong and what to do.

The node's (too few GPUs for a CUDA study, an NCCL interface or InfiniBand device the study
or this shell names that the node does not have) and each environment's (not built, its
probe failed, a framework that does not import, a version dpscale does not drive, and in a
CUDA study a CPU build, too few GPUs seen, collectives without NCCL). What a framework lacks
is the probe's to say (dpscale.frameworks.doctor_probe's ``frameworks``, which name no
framework in their fields); this module reads those fields and says what to do here.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from dpscale.launch.setup.doctor_targets import Outcome, Target
from dpscale.launch.setup.node_facts import Node, nccl_list_match
from dpscale.plan.strategy import required_module, unmet
from dpscale.runner.sysinfo import visible_gpu_count


def devices_per_node(config: Mapping[str, Any]) -> int:
    return max(config["devices_per_node"])


def environment_problems(
    config: Mapping[str, Any], target: Target, outcome: Outcome | None, gpus_ok: bool
) -> list[str]:
    """One line per problem of one environment, each naming it and what to do."""
    name = f"{target.key} ({shlex.join(target.command)})" if target.command else target.key
    if target.missing:
        return [f"{target.key}: {target.missing}"]
    if outcome is None:
        return []
    if outcome.failure:
        return [f"{name}: {outcome.failure}" + ("" if outcome.timed_out else f": {repair(target)}")]
    frameworks = (outcome.report or {}).get("frameworks", [])
    lines = []
    for framework in sorted(frameworks, key=lambda f: f["name"]):
        module = framework["name"]
        if framework.get("error"):
            lines.append(f"{name}: import {module} failed ({framework['error']}): {repair(target)}")
            continue
        for field, error in sorted(framework.get("errors", {}).items()):
            lines.append(
                f"{name}: {module} could not tell its {field} ({error}); the rest was read: "
                "run the framework's own check (below) for what it says"
            )
    by_name = {f["name"]: f for f in frameworks}
    for requirement in target.requires:
        framework = by_name.get(required_module(requirement), {})
        why = framework.get("version") and unmet(requirement, str(framework["version"]))
        if why:
            lines.append(f"{name}: {why}: {repair(target)}")
    if config["accelerator"] == "cuda":
        lines += cuda_problems(config, target, name, frameworks, gpus_ok)
    return lines


def repair(target: Target) -> str:
    if target.source == "configured":
        first = (target.modules or ["dpscale"])[0]
        return (
            f"fix {target.key} in the study, or the interpreter it names "
            f"(try: {shlex.join([*target.command, '-c', 'import ' + first])})"
        )
    return (
        f"remove {target.prefix} and build it again (dpscale run builds it; its build log is "
        f"{target.prefix.parent / 'logs' / (target.prefix.name + '.log')})"
    )


def cuda_build(target: Target) -> str:
    """What to do about a framework without CUDA in a CUDA study."""
    if target.source == "configured":
        return f"point {target.key} at an interpreter or image with the framework's CUDA build"
    return (
        f"the environment's requirements (build {target.variant}) must install the "
        f"framework's CUDA build: see envs/{target.env}.txt's comments, then remove "
        f"{target.prefix} and build it again"
    )


def cuda_problems(
    config: Mapping[str, Any],
    target: Target,
    name: str,
    frameworks: Sequence[Mapping[str, Any]],
    gpus_ok: bool,
) -> list[str]:
    """A CUDA study: each framework that runs the model built with CUDA and seeing the
    node's devices, its collectives built with NCCL where the study's strategies use them."""
    wanted = devices_per_node(config)
    working = [f for f in frameworks if not f.get("error")]
    lines = []
    for framework in working:
        if not framework.get("cuda_build_needed"):
            continue
        module = framework["name"]
        if not framework.get("cuda"):
            lines.append(
                f"{name}: {module} {framework.get('version')} is a CPU build, the study's "
                f"accelerator is cuda: {cuda_build(target)}"
            )
            continue
        seen = framework.get("gpus_seen")
        if gpus_ok and isinstance(seen, int) and seen < wanted:
            lines.append(
                f"{name}: {module} sees {seen} GPU(s), the study asks up to {wanted} per node: "
                "check CUDA_VISIBLE_DEVICES and that the framework's CUDA matches the driver "
                "(nvidia-smi's CUDA Version is the newest it runs)"
            )
    if target.multi_process:
        lines += [
            f"{name}: {f['multi_process_gap']}, which {', '.join(target.strategies)} use on "
            f"GPUs: {cuda_build(target)}"
            for f in working
            if f.get("multi_process_gap")
        ]
    lines += [f"{name}: {f['cuda_study_problem']}" for f in working if f.get("cuda_study_problem")]
    return lines


def node_problems(
    config: Mapping[str, Any], node: Node, environ: Mapping[str, str]
) -> tuple[list[str], bool]:
    """The node's problems, and whether its GPUs are enough for the study (where they are
    not, the environments' device counts are not blamed too)."""
    lines = []
    gpus_ok = True
    if config["accelerator"] == "cuda":
        wanted = devices_per_node(config)
        visible = visible_gpu_count(len(node.gpus.rows), environ.get("CUDA_VISIBLE_DEVICES"))
        if not node.gpus.found:
            gpus_ok = False
            lines.append(
                f"node: the study's accelerator is cuda but {node.gpus.why}: run the doctor on "
                "a GPU node (`dpscale doctor --slurm`, or srun ... dpscale doctor)"
            )
        elif visible < wanted:
            gpus_ok = False
            lines.append(
                f"node: {visible} GPU(s) visible here, the study asks up to {wanted} per node: "
                "run on a node with that many (cluster.gpu_model), or lower devices_per_node"
            )
    names = [i.name for i in node.interfaces]
    for variable, key, have, what in (
        ("NCCL_SOCKET_IFNAME", "nccl_socket_ifname", names, "network interfaces"),
        ("NCCL_IB_HCA", "nccl_ib_hca", list(node.ib_devices), "InfiniBand devices"),
    ):
        study = (config.get("cluster") or {}).get(key)
        shell = environ.get(variable)
        for source, value in ((f"cluster.{key}", study), (f"this shell's {variable}", shell)):
            if value and not nccl_list_match(value, have):
                lines.append(
                    f"node: {source} {value!r} matches none of this node's {what} "
                    f"({', '.join(have) or 'none'}): name one of them"
                )
        if study and shell != study:
            lines.append(
                f"node: cluster.{key} is {study!r} but this shell's {variable} is "
                f"{'not set' if shell is None else repr(shell)}: the ranks start with this "
                f"shell's variables, so export {variable}={shlex.quote(study)} before dpscale run"
            )
    for network in config.get("networks", []):
        interface = network.get("interface") if isinstance(network, dict) else None
        if interface and interface not in names:
            lines.append(
                f"node: networks {network['name']!r} names interface {interface!r}, which this "
                f"node does not have ({', '.join(names) or 'none'}): check it on the compute nodes"
            )
    return lines, gpus_ok


def all_problems(
    config: Mapping[str, Any],
    found: Sequence[Target],
    outcomes: Mapping[str, Outcome],
    node: Node,
    environ: Mapping[str, str],
) -> list[str]:
    lines, gpus_ok = node_problems(config, node, environ)
    for target in found:
        lines += environment_problems(config, target, outcomes.get(target.env), gpus_ok)
    return lines
