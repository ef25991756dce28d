"""``dpscale doctor``: can this node run the study? A table a user can paste into an issue.

For each environment the study's strategies run in (built under ``env_dir``, or a site's
interpreter or container, ``interpreters``), its probe (dpscale.frameworks.doctor_probe)
runs inside it, all of them at once, each with a timeout: interpreter, framework versions,
the devices each framework sees, the CUDA, cuDNN and NCCL it was built with, oneDNN. Beside
them the node itself (dpscale.launch.setup.node_facts): nvidia-smi's GPUs and driver, the
network interfaces and InfiniBand devices, which of them NCCL would take, and the
``NCCL_SOCKET_IFNAME`` / ``NCCL_IB_HCA`` the study's ``cluster`` section and this shell give.
Then one line per problem, each saying what to do; the command exits non-zero where there
is one. On SLURM it runs the same on a compute node through ``srun`` (:func:`srun_command`).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dpscale.launch.setup.envs import COMPLETE_FLAG, LockError, env_prefix, env_python
from dpscale.launch.setup.interpreters import configured
from dpscale.launch.setup.node_facts import Node, nccl_list_match, nccl_socket_pick, read_node
from dpscale.plan.env_builds import CPU, env_variants
from dpscale.plan.paths import ENVS_DIR, WORKFLOW_ROOT, import_root
from dpscale.plan.strategy import Strategy, required_module, unmet
from dpscale.runner.sysinfo import cpu_model, git_commit, usable_cpus, visible_gpu_count

PROBE_MODULE = "dpscale.frameworks.doctor_probe"
PROBE_PREFIX = "DPSCALE-DOCTOR "
PROBE_TIMEOUT_S = 60  # TensorFlow's import is seconds; a cold container image more
NCCL_SETTINGS = (
    "NCCL_IB_DISABLE",
    "NCCL_NET",
    "NCCL_SOCKET_FAMILY",
    "NCCL_P2P_DISABLE",
    "NCCL_DEBUG",
    "NCCL_ALGO",
    "NCCL_PROTO",
)


@dataclass(frozen=True)
class Target:
    """One environment of the study: what runs it (``command``), or why nothing can
    (``missing``: one problem line)."""

    env: str
    strategies: tuple[str, ...]
    requires: tuple[str, ...]
    command: tuple[str, ...] = ()
    source: str = "built"  # built (under env_dir) or configured (interpreters)
    prefix: Path | None = None
    variant: str = CPU
    missing: str | None = None
    multi_process: bool = False  # a strategy of it starts a process per device (collectives)

    @property
    def modules(self) -> list[str]:
        """The modules its strategies require (torch; tensorflow, horovod; mxnet)."""
        return list(dict.fromkeys(required_module(r) for r in self.requires))

    @property
    def key(self) -> str:
        """How the study names it: ``interpreters.<env>`` or ``environment <env>``."""
        return (
            f"interpreters.{self.env}" if self.source == "configured" else f"environment {self.env}"
        )


@dataclass(frozen=True)
class Outcome:
    """A probe's report, or why there is none (``failure``, one phrase)."""

    report: dict[str, Any] | None
    seconds: float
    failure: str | None = None
    timed_out: bool = False  # the failure says what to do: give it longer


def study_words(files: Sequence[Path]) -> str:
    """The study files as a command takes them (nothing for the default study)."""
    return "".join(f" {shlex.quote(str(f))}" for f in files)


def build_hint(files: Sequence[Path]) -> str:
    return f"`dpscale run{study_words(files)} --no-report -- envs` builds the study's environments"


def targets(
    config: Mapping[str, Any],
    strategies: Mapping[str, Strategy],
    files: Sequence[Path] = (),
    prefix_of: Callable[..., Path] = env_prefix,
    envs_dir: Path = ENVS_DIR,
) -> list[Target]:
    """Each environment the study's strategies run in (the workflow's), in name order."""
    by_env: dict[str, list[Strategy]] = {}
    for name in config["strategies"]:
        by_env.setdefault(strategies[name].env, []).append(strategies[name])
    variants = env_variants(config, sorted(set(by_env) - set(config["interpreters"])), envs_dir)
    locks = Path(config["env_locks"]).absolute() if config.get("env_locks") else None
    found = []
    for env, plans in sorted(by_env.items()):
        base = Target(
            env,
            tuple(s.name for s in plans),
            tuple(dict.fromkeys(r for s in plans for r in s.requires)),
            multi_process=any(not s.one_process for s in plans),
        )
        given = config["interpreters"].get(env)
        if given:
            found.append(configured_target(base, configured(given)))
            continue
        base = replace(base, variant=variants[env])
        try:
            prefix = prefix_of(
                env,
                Path(config["env_dir"]),
                envs_dir=envs_dir,
                locks_dir=locks,
                variant=base.variant,
            )
        except (LockError, FileNotFoundError) as error:
            found.append(replace(base, missing=str(error)))
            continue
        found.append(built_target(base, prefix, files))
    return found


def built_target(base: Target, prefix: Path, files: Sequence[Path]) -> Target:
    """An environment dpscale builds at ``prefix``; ``missing`` where it is not built yet."""
    if (prefix / COMPLETE_FLAG).is_file():
        return replace(base, command=(str(env_python(prefix)),), prefix=prefix)
    older = sorted(
        p.name
        for p in prefix.parent.glob(f"{base.env}-*")
        if p != prefix and (p / COMPLETE_FLAG).is_file()
    )
    before = f" ({', '.join(older)} is a build of other requirements)" if older else ""
    return replace(
        base, prefix=prefix, missing=f"not built at {prefix}{before}: {build_hint(files)}"
    )


def configured_target(base: Target, command: tuple[str, ...]) -> Target:
    """A site's interpreter or container (``interpreters``); ``missing`` where its program
    is not on this node."""
    target = replace(base, command=command, source="configured")
    if shutil.which(command[0]) is None:
        return replace(
            target,
            missing=f"{command[0]} does not exist or is not executable on this node: give "
            "the path the node has, or load its module before dpscale",
        )
    return target


def probe_environment(environ: Mapping[str, str], target: Target) -> dict[str, str]:
    """What the probe starts with: dpscale importable, the environment's tools first, the
    frameworks' start-up logging quiet."""
    env = dict(environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(import_root()), env.get("PYTHONPATH")]))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if target.prefix is not None:
        env["PATH"] = os.pathsep.join([str(target.prefix / "bin"), env.get("PATH", "")])
    return env


def run_probe(target: Target, timeout_s: float, environ: Mapping[str, str]) -> Outcome:
    """The probe inside ``target``; its process group is killed where it outlasts the timeout."""
    command = [*target.command, "-m", PROBE_MODULE, *target.modules]
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            command,
            env=probe_environment(environ, target),
            cwd=WORKFLOW_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
    except OSError as error:
        return Outcome(None, 0.0, f"could not start {command[0]}: {error.strerror or error}")
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(process)
        process.communicate()
        seconds = time.monotonic() - started
        return Outcome(
            None,
            seconds,
            f"the probe did not finish in {timeout_s:g} s: give it longer with --timeout S "
            "(a container image's first start is slow), or run its own check (below)",
            timed_out=True,
        )
    seconds = time.monotonic() - started
    return parse_probe(out, err, process.returncode, seconds)


def kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):  # it ended meanwhile
        os.killpg(process.pid, signal.SIGKILL)


def parse_probe(out: str, err: str, code: int, seconds: float) -> Outcome:
    lines = [line for line in out.splitlines() if line.startswith(PROBE_PREFIX)]
    if not lines:
        said = [line.strip() for line in (err or out).splitlines() if line.strip()]
        last = said[-1] if said else "no output"
        return Outcome(None, seconds, f"the probe exited with code {code}: {last[:300]}")
    try:
        return Outcome(json.loads(lines[-1][len(PROBE_PREFIX) :]), seconds)
    except json.JSONDecodeError as error:
        return Outcome(None, seconds, f"the probe printed a line that is not JSON: {error}")


def probe_all(
    found: Sequence[Target], timeout_s: float, environ: Mapping[str, str]
) -> tuple[dict[str, Outcome], Node]:
    """Every environment's probe and the node's facts, side by side."""
    runnable = [t for t in found if not t.missing]
    with ThreadPoolExecutor(max_workers=len(runnable) + 1) as pool:
        node = pool.submit(read_node)
        jobs = {t.env: pool.submit(run_probe, t, timeout_s, environ) for t in runnable}
        return {env: job.result() for env, job in jobs.items()}, node.result()


# -- problems ---------------------------------------------------------------------------------


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
    report = outcome.report or {}
    lines = []
    modules = report.get("modules", {})
    for module, info in modules.items():
        if info.get("error"):
            lines.append(f"{name}: import {module} failed ({info['error']}): {repair(target)}")
            continue
        for field, error in sorted(info.get("errors", {}).items()):
            lines.append(
                f"{name}: {module} could not tell its {field} ({error}); the rest was read: "
                "run the framework's own check (below) for what it says"
            )
    for requirement in target.requires:
        info = modules.get(required_module(requirement), {})
        why = info.get("version") and unmet(requirement, str(info["version"]))
        if why:
            lines.append(f"{name}: {why}: {repair(target)}")
    if config["accelerator"] == "cuda":
        lines += cuda_problems(config, target, name, modules, gpus_ok)
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
    modules: Mapping[str, Any],
    gpus_ok: bool,
) -> list[str]:
    """A CUDA study: each framework built with CUDA, seeing the node's devices, its
    collectives built with NCCL where the study's strategies use them."""
    wanted = devices_per_node(config)
    lines = []
    for module in ("torch", "tensorflow", "mxnet"):
        info = modules.get(module)
        if not info or info.get("error"):
            continue
        if not info.get("cuda"):
            lines.append(
                f"{name}: {module} {info.get('version')} is a CPU build, the study's "
                f"accelerator is cuda: {cuda_build(target)}"
            )
            continue
        seen = info.get("devices")
        if gpus_ok and isinstance(seen, int) and seen < wanted:
            lines.append(
                f"{name}: {module} sees {seen} GPU(s), the study asks up to {wanted} per node: "
                "check CUDA_VISIBLE_DEVICES and that the framework's CUDA matches the driver "
                "(nvidia-smi's CUDA Version is the newest it runs)"
            )
    torch = modules.get("torch") or {}
    if target.multi_process and torch.get("cuda") and not (torch.get("backends") or {}).get("nccl"):
        lines.append(
            f"{name}: torch {torch.get('version')} has no NCCL backend, which "
            f"{', '.join(target.strategies)} use on GPUs: {cuda_build(target)}"
        )
    horovod = modules.get("horovod") or {}
    if horovod and not horovod.get("error") and not horovod.get("nccl"):
        lines.append(
            f"{name}: Horovod {horovod.get('version')} was built without NCCL, so its "
            "all-reduce on GPUs goes through host memory: rebuild it with "
            "HOROVOD_GPU_OPERATIONS=NCCL (envs/tf-horovod.post.sh does on a CUDA build; "
            "`horovodrun --check-build` lists what it has)"
        )
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


# -- the table ---------------------------------------------------------------------------------


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


def framework_words(modules: Mapping[str, Any]) -> list[str]:
    """frameworks, devices seen, CUDA / cuDNN, NCCL, oneDNN: one table cell each."""
    versions, devices, cuda, nccl, onednn = [], [], [], [], []
    for module, info in modules.items():
        if info.get("error"):
            versions.append(f"{module}: import failed")
            continue
        versions.append(f"{module} {info.get('version', '?')}")
        if module == "numpy":
            continue
        if "devices" in info:
            devices.append(f"{module} {info['devices']}")
        if module == "horovod":
            ops = [n for n in ("gloo", "mpi") if info.get(n)]
            nccl.append(
                f"horovod {info['nccl'] or 'without NCCL'}"
                + (f" ({', '.join(ops)})" if ops else "")
            )
            continue
        if info.get("cuda"):
            built = f"CUDA {info['cuda']}" if info["cuda"] != "built" else "CUDA"
            cudnn = info.get("cudnn")
            cuda.append(
                f"{module}: {built}" + (f", cuDNN {cudnn}" if cudnn and cudnn != "built" else "")
            )
        else:
            cuda.append(f"{module}: CPU build")
        if module in ("torch", "mxnet"):
            nccl.append(f"{module} {info.get('nccl') or 'none'}")
        if info.get("onednn"):
            onednn.append(f"{module}: {info['onednn']}")
    return ["; ".join(v) or "-" for v in (versions, devices, cuda, nccl, onednn)]


def in_order(modules: Mapping[str, Any], first: Sequence[str]) -> dict[str, Any]:
    """The probe's modules, the environment's frameworks first (as its strategies name
    them), numpy after them."""
    order = [*first, "numpy", *sorted(modules)]
    return {name: modules[name] for name in dict.fromkeys(order) if name in modules}


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
                *framework_words(in_order(report.get("modules", {}), target.modules)),
                f"{outcome.seconds:.1f} s",
            ]
        )
    return rows


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


def own_checks(found: Sequence[Target]) -> list[str]:
    """The frameworks' own, fuller checks, as commands for this study's environments."""
    lines = []
    for target in found:
        if target.missing:
            continue
        python = list(target.command)
        if "torch" in target.modules:
            lines.append(shlex.join([*python, "-m", "torch.utils.collect_env"]))
        if "horovod" in target.modules:
            program = (
                [str(target.prefix / "bin" / "horovodrun")]
                if target.prefix
                else [*python, "-m", "horovod.runner.launch"]
            )
            lines.append(shlex.join([*program, "--check-build"]))
        if "mxnet" in target.modules:
            lines.append(
                shlex.join([*python, "-c", "import mxnet; print(mxnet.runtime.Features())"])
            )
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
    lines += ["", "More, from the frameworks' own checks:", *own_checks(found)]
    lines.append(
        "- `NCCL_DEBUG=INFO` in the shell that runs the study: each cell's log then shows the "
        "interfaces and InfiniBand devices NCCL chose"
    )
    lines += ["", f"dpscale doctor: {len(outcomes)} environment(s) probed in {seconds:.1f} s"]
    return "\n".join(lines)


def doctor(
    config: Mapping[str, Any],
    strategies: Mapping[str, Strategy],
    files: Sequence[Path],
    timeout_s: float = PROBE_TIMEOUT_S,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, list[str]]:
    """The table and the problems (none: the node can run the study)."""
    environ = dict(os.environ if environ is None else environ)
    started = time.monotonic()
    found = targets(config, strategies, files)
    outcomes, node = probe_all(found, timeout_s, environ)
    problems = all_problems(config, found, outcomes, node, environ)
    seconds = time.monotonic() - started
    return render(config, files, found, outcomes, node, environ, problems, seconds), problems


# -- SLURM ---------------------------------------------------------------------------------


def srun_command(
    config: Mapping[str, Any],
    files: Sequence[Path],
    timeout_s: float,
    environ: Mapping[str, str],
    extra: Sequence[str] = (),
    python: str = sys.executable,
) -> list[str]:
    """The doctor on one compute node shaped as the study's largest one-process cell asks:
    its GPUs (``--gres``), CPUs and memory, the account and partition the shipped profile
    reads (SBATCH_ACCOUNT, SBATCH_PARTITION); ``extra``: srun's own options, given last."""
    cluster = config.get("cluster") or {}
    devices = devices_per_node(config)
    per_device = cluster.get("cpus_per_device") or config.get("threads_per_device") or 1
    words = [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={devices * int(per_device)}",
        f"--mem={devices * int(cluster.get('mem_mb_per_device') or 8000)}",
        f"--time={max(5, int(timeout_s // 60) + 5)}",
        "--job-name=dpscale-doctor",
    ]
    for variable, option in (("SBATCH_ACCOUNT", "--account"), ("SBATCH_PARTITION", "--partition")):
        if environ.get(variable):
            words.append(f"{option}={environ[variable]}")
    if config["accelerator"] == "cuda":
        model = cluster.get("gpu_model")
        words.append(f"--gres=gpu:{model}:{devices}" if model else f"--gres=gpu:{devices}")
    inner = [python, "-m", "dpscale.cli", "doctor", *map(str, files), f"--timeout={timeout_s:g}"]
    return [*words, *extra, *inner]
