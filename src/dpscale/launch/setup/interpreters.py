"""What starts a framework's processes: the environment dpscale builds, or one the site has.

By default each framework environment is pip-built under ``env_dir`` (dpscale.launch.setup.envs).
The config's ``interpreters`` section names another, per environment: an interpreter path
(``/sw/pytorch/2.4/bin/python3``) or a command prefix that ends in one (``apptainer exec
--nv IMAGE python3``). Either is probed once before any job (:func:`probe`): it must
import dpscale's runner and the environment's strategies' frameworks at versions dpscale
drives (dpscale.runner.probe). A probe that passed is cached under ``env_dir/probes/``,
keyed by the command, the files it names and dpscale's sources.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpscale.launch.setup.envs import built_env_hash, freeze_hash
from dpscale.plan.paths import PACKAGE_DIR, WORKFLOW_ROOT, import_root, work_dir
from dpscale.plan.strategy import Strategy

PROBE_TIMEOUT_S = 300  # a cold container image and a framework import
PROBE_PREFIX = "DPSCALE-PROBE "


class InterpreterError(ValueError):
    """A configured interpreter that cannot run the study; one line naming the config key."""


@dataclass(frozen=True)
class Interpreter:
    """``command`` starts the framework's interpreter from this host; a pip-built
    environment's is its ``bin/python`` (``prefix``)."""

    env: str
    command: tuple[str, ...]
    prefix: Path | None = None

    @classmethod
    def built(cls, env: str, prefix: Path) -> Interpreter:
        return cls(env, (str(prefix / "bin" / "python"),), prefix)

    @property
    def source(self) -> str:
        return "built" if self.prefix is not None else "configured"

    def describe(self) -> dict[str, Any]:
        return {"env": self.env, "source": self.source, "command": list(self.command)}

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """What a launch adds to ``base`` for this interpreter's processes."""
        env = {
            "DPSCALE_INTERPRETER": json.dumps(self.describe(), sort_keys=True),
            "DPSCALE_ENV_HASH": built_env_hash(self.prefix) if self.prefix else "configured",
            "DPSCALE_ENV_FREEZE": (
                freeze_hash(self.prefix, record=True) if self.prefix else "configured"
            ),
        }
        if self.prefix is not None:  # tools installed with the framework come first
            env["PATH"] = os.pathsep.join([str(self.prefix / "bin"), base.get("PATH", "")])
        return env


def configured(value: str | Sequence[str]) -> tuple[str, ...]:
    """The config's value (a path, or a command as a list) as a command."""
    return (value,) if isinstance(value, str) else tuple(value)


def probe(
    interpreter: Interpreter, adapters: Iterable[str], cache_dir: Path | None = None
) -> dict[str, Any]:
    """Run dpscale.runner.probe with ``interpreter``; its report, or InterpreterError."""
    key = f"interpreters.{interpreter.env}"
    if shutil.which(interpreter.command[0]) is None:
        raise InterpreterError(
            f"{key}: {interpreter.command[0]} does not exist or is not executable"
        )
    adapters = sorted(adapters)
    cached = _cache_path(interpreter, adapters, cache_dir) if cache_dir else None
    if cached and cached.is_file():
        return json.loads(cached.read_text())
    report = _run_probe(interpreter, adapters, key)
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(report, sort_keys=True) + "\n")
    return report


def _run_probe(interpreter: Interpreter, adapters: list[str], key: str) -> dict[str, Any]:
    command = [*interpreter.command, "-m", "dpscale.runner.probe", *adapters]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(import_root()), env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            cwd=WORKFLOW_ROOT,
        )
    except subprocess.TimeoutExpired:
        raise InterpreterError(f"{key}: the probe did not finish in {PROBE_TIMEOUT_S} s") from None
    except OSError as error:
        raise InterpreterError(
            f"{key}: could not start {interpreter.command[0]}: {error}"
        ) from None
    lines = [line for line in done.stdout.splitlines() if line.startswith(PROBE_PREFIX)]
    if not lines:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise InterpreterError(f"{key}: the probe exited with code {done.returncode}: {said}")
    report = json.loads(lines[-1][len(PROBE_PREFIX) :])
    if report.get("error"):
        raise InterpreterError(f"{key}: the probe printed: {report['error']}")
    return report


def _cache_path(interpreter: Interpreter, adapters: list[str], cache_dir: Path) -> Path:
    """Changes when the command, a file it names (the interpreter, an image) or dpscale's
    sources change."""
    digest = hashlib.sha256(json.dumps([interpreter.command, adapters]).encode())
    words = [shutil.which(interpreter.command[0]) or "", *interpreter.command[1:]]
    for word in words:
        path = Path(word)
        if word and path.exists():
            stat = path.resolve().stat()
            digest.update(f"{path.resolve()}:{stat.st_mtime_ns}:{stat.st_size}".encode())
    for source in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(f"{source}:{source.stat().st_mtime_ns}".encode())
    return cache_dir / f"{interpreter.env}-{digest.hexdigest()[:16]}.json"


def probe_configured(
    config: Mapping[str, Any], strategies: Mapping[str, Strategy], used: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """Probe the configured interpreter of every environment the study's strategies
    (``used``) run in; {env: report}. Raises InterpreterError on the first that fails."""
    by_env: dict[str, list[str]] = {}
    for name in used:
        by_env.setdefault(strategies[name].env, []).append(strategies[name].runner)
    cache = Path(config["env_dir"])
    cache = (cache if cache.is_absolute() else work_dir() / cache) / "probes"
    return {
        env: probe(Interpreter(env, configured(config["interpreters"][env])), runners, cache)
        for env, runners in sorted(by_env.items())
        if config.get("interpreters", {}).get(env)
    }
