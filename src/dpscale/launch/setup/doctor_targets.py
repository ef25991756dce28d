"""``dpscale doctor``'s environments: which the study's strategies run in, and each one's probe.

Each environment is built under ``env_dir`` (``envs``) or is a site's interpreter or
container (``interpreters``); where it is neither built nor there, it is a :class:`Target`
with ``missing`` (one problem line). The probe (dpscale.frameworks.doctor_probe) runs inside
each of the others, all of them at once beside the node's own facts (``node_facts``), each
with a timeout after which its process group is killed. The probe says everything about the
frameworks itself, in fields that name none; what comes back here is its JSON, read as it
is, so this side never needs to know a framework.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dpscale.launch.setup.envs import COMPLETE_FLAG, LockError, env_prefix, env_python
from dpscale.launch.setup.interpreters import configured
from dpscale.launch.setup.node_facts import Node, read_node
from dpscale.plan.env_builds import CPU, env_variants
from dpscale.plan.paths import ENVS_DIR, WORKFLOW_ROOT, import_root
from dpscale.plan.strategy import Strategy, required_module

PROBE_MODULE = "dpscale.frameworks.doctor_probe"
PROBE_PREFIX = "DPSCALE-DOCTOR "
CHECKS_PREFIX = "DPSCALE-DOCTOR-CHECKS "  # printed first, before any framework is imported
PROBE_TIMEOUT_S = 60  # TensorFlow's import is seconds; a cold container image more


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
    """A probe's report, or why there is none (``failure``, one phrase); ``checks``: the
    frameworks' own fuller checks it named (its first line, there even where it hung)."""

    report: dict[str, Any] | None
    seconds: float
    failure: str | None = None
    timed_out: bool = False  # the failure says what to do: give it longer
    checks: tuple[dict[str, Any], ...] = ()


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
    """What the probe starts with: dpscale importable, the environment's tools first (the
    probe quiets the frameworks' start-up logging itself)."""
    env = dict(environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(import_root()), env.get("PYTHONPATH")]))
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
        out, _ = process.communicate()  # what it printed before: its checks, where it got there
        seconds = time.monotonic() - started
        return Outcome(
            None,
            seconds,
            f"the probe did not finish in {timeout_s:g} s: give it longer with --timeout S "
            "(a container image's first start is slow), or run its own check (below)",
            timed_out=True,
            checks=read_checks(out),
        )
    seconds = time.monotonic() - started
    return parse_probe(out, err, process.returncode, seconds)


def kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(OSError):  # it ended meanwhile
        os.killpg(process.pid, signal.SIGKILL)


def read_checks(out: str | None) -> tuple[dict[str, Any], ...]:
    """The checks line's commands; none where the probe did not get that far."""
    lines = [line for line in (out or "").splitlines() if line.startswith(CHECKS_PREFIX)]
    try:
        checks = json.loads(lines[-1][len(CHECKS_PREFIX) :]) if lines else []
    except json.JSONDecodeError:
        return ()
    return tuple(c for c in checks if isinstance(c, dict) and c.get("python"))


def parse_probe(out: str, err: str, code: int, seconds: float) -> Outcome:
    checks = read_checks(out)
    lines = [line for line in out.splitlines() if line.startswith(PROBE_PREFIX)]
    if not lines:
        printed = [line for line in out.splitlines() if not line.startswith(CHECKS_PREFIX)]
        said = [line.strip() for line in (err.splitlines() or printed) if line.strip()]
        last = said[-1] if said else "no output"
        failure = f"the probe exited with code {code}: {last[:300]}"
        return Outcome(None, seconds, failure, checks=checks)
    try:
        return Outcome(json.loads(lines[-1][len(PROBE_PREFIX) :]), seconds, checks=checks)
    except json.JSONDecodeError as error:
        failure = f"the probe printed a line that is not JSON: {error}"
        return Outcome(None, seconds, failure, checks=checks)


def probe_all(
    found: Sequence[Target], timeout_s: float, environ: Mapping[str, str]
) -> tuple[dict[str, Outcome], Node]:
    """Every environment's probe and the node's facts, side by side."""
    runnable = [t for t in found if not t.missing]
    with ThreadPoolExecutor(max_workers=len(runnable) + 1) as pool:
        node = pool.submit(read_node)
        jobs = {t.env: pool.submit(run_probe, t, timeout_s, environ) for t in runnable}
        return {env: job.result() for env, job in jobs.items()}, node.result()
