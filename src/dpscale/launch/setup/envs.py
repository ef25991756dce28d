"""Per-framework virtual environments, built from ``envs/<name>.txt`` and cached by content.

An environment lives in ``<env_dir>/<name>-<hash>/`` where the hash covers
``envs/<name>.txt`` and, if present, ``envs/<name>.post.sh`` (extra build steps that a
requirements file cannot express, such as Horovod's build variables).  Change either
file and the next run builds a new environment; an unchanged file reuses the cached one.
A finished build is marked by ``.dpscale-env-complete``; a half-built folder (a killed
build) is removed and rebuilt.  ``.dpscale-env-ready`` is what the workflow sees: if
Snakemake decides to rerun the build (say, because the rule's code changed), a complete
environment only gets its ready marker written again instead of a rebuild.

A lock file ``<name>.lock`` (``dpscale lock``: a built environment's ``pip freeze``), in
envs/ or the config's ``env_locks`` folder, is installed instead of the requirements file
and is part of the hash: the same packages at the same versions, on another machine too.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, replace
from pathlib import Path

from dpscale.plan.env_builds import CPU, requirements_file
from dpscale.plan.paths import ENVS_DIR, WORKFLOW_ROOT, work_dir

READY_MARKER = ".dpscale-env-ready"
# every package and version the environment holds (pip freeze --all), written once it is
# built: the file's hash names, in each result, exactly what was installed
FREEZE_FILE = "pip-freeze.txt"
COMPLETE_FLAG = ".dpscale-env-complete"
HASH_LENGTH = 12
LOCK_SUFFIX = ".lock"
# the lock's first lines: what it was frozen from (the hash of the requirements and post
# script, without a lock), so a lock older than an edited requirements file is refused
LOCK_FROM = "# frozen from: "
CUDA_SUFFIX = re.compile(r"cuda\d+")


class LockError(ValueError):
    """A lock file that no longer matches its environment's files; one line saying what to do."""


@dataclass(frozen=True)
class EnvFiles:
    """What an environment is built from: its requirements, a lock (installed instead of
    the requirements), a post script."""

    requirements: Path
    lock: Path | None = None
    post: Path | None = None

    @property
    def install(self) -> Path:
        return self.lock or self.requirements

    @property
    def hashed(self) -> list[Path]:
        return [path for path in (self.requirements, self.lock, self.post) if path]


def env_files(
    name: str, envs_dir: Path = ENVS_DIR, locks_dir: Path | None = None, variant: str = CPU
) -> EnvFiles:
    """The environment's files for its build ``variant`` (plan.env_builds); a lock from
    ``locks_dir`` (default: ``envs_dir``) if there is one, checked against the files it was
    frozen from."""
    lock = lock_path(name, envs_dir, locks_dir, variant)
    unlocked = _unlocked_files(name, envs_dir, variant)
    if not lock.is_file():
        return unlocked
    _check_lock(lock, _digest(unlocked.hashed))
    return replace(unlocked, lock=lock)


def _unlocked_files(name: str, envs_dir: Path, variant: str = CPU) -> EnvFiles:
    requirements = requirements_file(name, variant, envs_dir)
    if not requirements.is_file():
        known = sorted(p.stem for p in envs_dir.glob("*.txt"))
        raise FileNotFoundError(f"environment {name!r}: no {requirements} (known: {known})")
    post = envs_dir / f"{name}.post.sh"
    return EnvFiles(requirements, post=post if post.is_file() else None)


def unlocked_hash(name: str, envs_dir: Path = ENVS_DIR, variant: str = CPU) -> str:
    """The hash of the requirements and post script alone: what a lock is frozen from, and
    the wheel cache's key (a lock pins the same build)."""
    return _digest(_unlocked_files(name, envs_dir, variant).hashed)


def lock_path(
    name: str, envs_dir: Path = ENVS_DIR, locks_dir: Path | None = None, variant: str = CPU
) -> Path:
    """``<name>.lock``, or ``<name>.<variant>.lock`` for a CUDA build: one lock per build,
    so a lock frozen on a CPU machine never pins a GPU node's packages."""
    stem = name if variant == CPU else f"{name}.{variant}"
    return (locks_dir or envs_dir) / f"{stem}{LOCK_SUFFIX}"


def _check_lock(lock: Path, expected: str) -> None:
    lines = lock.read_text(encoding="utf-8").splitlines()
    made_from = next((line[len(LOCK_FROM) :] for line in lines if line.startswith(LOCK_FROM)), "")
    if made_from.split()[:1] != [expected]:
        raise LockError(
            f"{lock} was frozen from other requirements than {lock.stem}'s files now: "
            f"delete it (the environment is then built from the requirements) and run "
            f"`dpscale lock {lock.stem}` once it is built"
        )


def _digest(paths: list[Path | None]) -> str:
    digest = hashlib.sha256()
    for path in filter(None, paths):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def env_hash(
    name: str, envs_dir: Path = ENVS_DIR, locks_dir: Path | None = None, variant: str = CPU
) -> str:
    return _digest(env_files(name, envs_dir, locks_dir, variant).hashed)


def env_folder_name(
    name: str, envs_dir: Path = ENVS_DIR, locks_dir: Path | None = None, variant: str = CPU
) -> str:
    """``<name>-<hash>``; a CUDA build ``<name>-<variant>-<hash>``, its build in its name."""
    digest = env_hash(name, envs_dir, locks_dir, variant)[:HASH_LENGTH]
    return f"{name}-{digest}" if variant == CPU else f"{name}-{variant}-{digest}"


def split_folder_key(key: str) -> tuple[str, str]:
    """``torch-cuda13`` (a folder name less its hash) as (``torch``, ``cuda13``);
    ``torch`` as (``torch``, ``cpu``)."""
    name, _, last = key.rpartition("-")
    return (name, last) if name and CUDA_SUFFIX.fullmatch(last) else (key, CPU)


def env_prefix(
    name: str,
    env_dir: str | Path,
    envs_dir: Path = ENVS_DIR,
    locks_dir: Path | None = None,
    variant: str = CPU,
) -> Path:
    """Absolute prefix; a relative ``env_dir`` is taken from the checkout (an installed
    package: the current folder)."""
    root = Path(env_dir)
    if not root.is_absolute():
        root = work_dir() / root
    return root / env_folder_name(name, envs_dir, locks_dir, variant)


def env_python(prefix: Path) -> Path:
    return prefix / "bin" / "python"


def wheel_cache(name: str, envs_dir: Path = ENVS_DIR, variant: str = CPU) -> Path:
    """Where a post script keeps the wheels it compiles (``$DPSCALE_WHEELS``): outside the
    checkout, like pip's cache, keyed by the environment's files, Python and platform, so a
    fresh clone reuses them and a changed file never does.  ``DPSCALE_WHEEL_CACHE`` moves it."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpscale"
    root = Path(os.environ.get("DPSCALE_WHEEL_CACHE") or default / "wheels")
    digest = unlocked_hash(name, envs_dir, variant)[:HASH_LENGTH]
    key = f"{name}-{digest}-{sys.implementation.cache_tag}"
    return root / f"{key}-{sysconfig.get_platform()}"


def built_env_hash(prefix: Path) -> str:
    """The content hash a built environment was made from (first line of its marker)."""
    marker = prefix / READY_MARKER
    lines = marker.read_text().split() if marker.is_file() else []
    return lines[0] if lines else "unknown"


def build_env(
    name: str,
    prefix: Path,
    envs_dir: Path = ENVS_DIR,
    log=sys.stderr,
    locks_dir: Path | None = None,
    variant: str = CPU,
) -> Path:
    """Build the environment at ``prefix`` unless a finished one is already there. One
    build at a time per environment (an exclusive lock beside it): a second process waits
    and then finds it built, instead of removing it as unfinished."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f".{prefix.name}.build-lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        return _build_env_locked(name, prefix, envs_dir, log, locks_dir, variant)


def _build_env_locked(
    name: str, prefix: Path, envs_dir: Path, log, locks_dir: Path | None, variant: str = CPU
) -> Path:
    marker = prefix / READY_MARKER
    complete = prefix / COMPLETE_FLAG
    if complete.is_file():
        print(f"[dpscale] environment {name} is cached at {prefix}", file=log, flush=True)
        if not (prefix / FREEZE_FILE).is_file():  # built before environments recorded it
            record_freeze(prefix, log)
        if not marker.is_file():
            marker.write_text(complete.read_text())
        return marker
    if prefix.exists():
        print(f"[dpscale] removing unfinished environment {prefix}", file=log, flush=True)
        shutil.rmtree(prefix)
    files = env_files(name, envs_dir, locks_dir, variant)
    started = time.monotonic()
    print(f"[dpscale] building environment {name} ({variant}) at {prefix}", file=log, flush=True)
    _install(name, prefix, files, envs_dir, log, variant)
    record_freeze(prefix, log)
    elapsed = time.monotonic() - started
    complete.write_text(f"{_digest(files.hashed)}\nbuilt in {elapsed:.0f} s\n")
    marker.write_text(complete.read_text())
    print(f"[dpscale] environment {name} built in {elapsed:.0f} s", file=log, flush=True)
    return marker


def _install(
    name: str, prefix: Path, files: EnvFiles, envs_dir: Path, log, variant: str = CPU
) -> None:
    """A venv at ``prefix``, the lock or the requirements installed, the post script run."""
    _run([sys.executable, "-m", "venv", str(prefix)], log)
    python = env_python(prefix)
    _run([str(python), "-m", "pip", "install", "-r", str(files.install)], log)
    if files.post:
        env = dict(
            os.environ,
            PYTHON=str(python),
            PIP=f"{python} -m pip",
            VIRTUAL_ENV=str(prefix),
            DPSCALE_WHEELS=str(wheel_cache(name, envs_dir, variant)),
            DPSCALE_ENV_VARIANT=variant,
        )
        _run(["bash", "-euo", "pipefail", str(files.post)], log, env=env)


def record_freeze(prefix: Path, log) -> Path:
    """Write what the environment holds, as ``pip freeze --all`` lists it, to FREEZE_FILE."""
    frozen = _freeze(env_python(prefix))
    path = prefix / FREEZE_FILE
    path.write_text(frozen, encoding="utf-8")
    print(f"[dpscale] {len(frozen.splitlines())} packages recorded in {path}", file=log, flush=True)
    return path


def _freeze(python: Path) -> str:
    command = [str(python), "-m", "pip", "freeze", "--all"]
    return subprocess.run(
        command, check=True, capture_output=True, text=True, cwd=WORKFLOW_ROOT
    ).stdout


def freeze_hash(prefix: Path, record: bool = False) -> str:
    """sha256 of the environment's FREEZE_FILE ("unknown" without one); ``record``: write
    it first where a complete environment lacks it (built before environments recorded it)."""
    path = prefix / FREEZE_FILE
    if record and not path.is_file() and (prefix / COMPLETE_FLAG).is_file():
        record_freeze(prefix, sys.stderr)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "unknown"


def ensure_env(name: str, env_dir: str | Path = ".envs", variant: str = CPU) -> Path:
    """Build (or find) an environment outside the workflow, logging where the workflow does
    (``<env_dir>/logs/<folder>.log``); returns its prefix."""
    prefix = env_prefix(name, env_dir, variant=variant)
    log_path = prefix.parent / "logs" / f"{prefix.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        build_env(name, prefix, log=log, variant=variant)
    return prefix


def _run(command: list[str], log, env: dict[str, str] | None = None) -> None:
    print("[dpscale] $ " + " ".join(command), file=log, flush=True)
    subprocess.run(
        command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=WORKFLOW_ROOT, env=env
    )


def write_lock(
    name: str, prefix: Path, path: Path, envs_dir: Path = ENVS_DIR, variant: str = CPU
) -> Path:
    """``path`` (a ``<name>.lock``) from the environment built at ``prefix``; raises
    LockError when it is not built."""
    if not (prefix / COMPLETE_FLAG).is_file():
        raise LockError(
            f"environment {name} is not built at {prefix}: build it first (run a study that "
            f"uses it, or python -m dpscale.launch.setup.envs {name})"
        )
    if not (prefix / FREEZE_FILE).is_file():  # built before environments recorded it
        record_freeze(prefix, sys.stderr)
    frozen = (prefix / FREEZE_FILE).read_text(encoding="utf-8")
    unlocked = unlocked_hash(name, envs_dir, variant)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(lock_text(name, frozen, unlocked, prefix, variant), encoding="utf-8")
    return path


def lock_text(name: str, frozen: str, unlocked_hash: str, source: Path, variant: str = CPU) -> str:
    """The lock: the freeze, less what only this machine has (a wheel built by the post
    script, ``name @ file:...``), which the post script makes again."""
    local = [line for line in frozen.splitlines() if " @ file:" in line or line.startswith("-e ")]
    kept = [line for line in frozen.splitlines() if line.strip() and line not in local]
    requirements = requirements_file(name, variant, Path()).name
    header = [
        f"# dpscale lock of environment {name}: `pip freeze --all` of {source.name}",
        f"{LOCK_FROM}{unlocked_hash} ({requirements} and {name}.post.sh, if any)",
        f"# Installed instead of {requirements} while it is here, and part of the environment's",
        "# hash. Delete it to build from the requirements again.",
        *(f"# left to {name}.post.sh (built on this machine): {line}" for line in local),
    ]
    return "\n".join(header + kept) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build (or find) a framework environment")
    parser.add_argument("name")
    parser.add_argument("--env-dir", default=".envs", help="relative: to the current folder")
    parser.add_argument("--locks-dir", type=Path, help="lock files' folder (default: envs/)")
    parser.add_argument("--variant", default=CPU, help="cpu, or a CUDA build: cuda12")
    args = parser.parse_args(argv)
    locks_dir = args.locks_dir.absolute() if args.locks_dir else None
    env_dir = Path(args.env_dir).absolute()
    prefix = env_prefix(args.name, env_dir, locks_dir=locks_dir, variant=args.variant)
    build_env(args.name, prefix, locks_dir=locks_dir, variant=args.variant)
    print(prefix)


if __name__ == "__main__":
    main()
