"""Per-framework virtual environments, built from ``envs/<name>.txt`` and cached by content.

An environment lives in ``<env_dir>/<name>-<hash>/`` where the hash covers
``envs/<name>.txt`` and, if present, ``envs/<name>.post.sh`` (extra build steps that a
requirements file cannot express, such as Horovod's build variables).  Change either
file and the next run builds a new environment; an unchanged file reuses the cached one.
A finished build is marked by ``.dpscale-env-complete``; a half-built folder (a killed
build) is removed and rebuilt.  ``.dpscale-env-ready`` is what the workflow sees: if
Snakemake decides to rerun the build (say, because the rule's code changed), a complete
environment only gets its ready marker written again instead of a rebuild.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from dpscale.plan.paths import ENVS_DIR, REPO_ROOT

READY_MARKER = ".dpscale-env-ready"
# every package and version the environment holds (pip freeze --all), written once it is
# built: the file's hash names, in each result, exactly what was installed
FREEZE_FILE = "pip-freeze.txt"
COMPLETE_FLAG = ".dpscale-env-complete"
HASH_LENGTH = 12


def env_files(name: str, envs_dir: Path = ENVS_DIR) -> list[Path]:
    requirements = envs_dir / f"{name}.txt"
    if not requirements.is_file():
        known = sorted(p.stem for p in envs_dir.glob("*.txt"))
        raise FileNotFoundError(f"environment {name!r}: no {requirements} (known: {known})")
    post = envs_dir / f"{name}.post.sh"
    return [requirements, post] if post.is_file() else [requirements]


def env_hash(name: str, envs_dir: Path = ENVS_DIR) -> str:
    digest = hashlib.sha256()
    for path in env_files(name, envs_dir):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def env_folder_name(name: str, envs_dir: Path = ENVS_DIR) -> str:
    return f"{name}-{env_hash(name, envs_dir)[:HASH_LENGTH]}"


def env_prefix(name: str, env_dir: str | Path, envs_dir: Path = ENVS_DIR) -> Path:
    """Absolute prefix; a relative ``env_dir`` is taken from the repository root."""
    root = Path(env_dir)
    if not root.is_absolute():
        root = REPO_ROOT / root
    return root / env_folder_name(name, envs_dir)


def env_python(prefix: Path) -> Path:
    return prefix / "bin" / "python"


def wheel_cache(name: str, envs_dir: Path = ENVS_DIR) -> Path:
    """Where a post script keeps the wheels it compiles (``$DPSCALE_WHEELS``): outside the
    checkout, like pip's cache, keyed by the environment's files, Python and platform, so a
    fresh clone reuses them and a changed file never does.  ``DPSCALE_WHEEL_CACHE`` moves it."""
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dpscale"
    root = Path(os.environ.get("DPSCALE_WHEEL_CACHE") or default / "wheels")
    key = f"{env_folder_name(name, envs_dir)}-{sys.implementation.cache_tag}"
    return root / f"{key}-{sysconfig.get_platform()}"


def built_env_hash(prefix: Path) -> str:
    """The content hash a built environment was made from (first line of its marker)."""
    marker = prefix / READY_MARKER
    lines = marker.read_text().split() if marker.is_file() else []
    return lines[0] if lines else "unknown"


def build_env(name: str, prefix: Path, envs_dir: Path = ENVS_DIR, log=sys.stderr) -> Path:
    """Build the environment at ``prefix`` unless a finished one is already there."""
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
    files = env_files(name, envs_dir)
    started = time.monotonic()
    print(f"[dpscale] building environment {name} at {prefix}", file=log, flush=True)
    _run([sys.executable, "-m", "venv", str(prefix)], log)
    python = env_python(prefix)
    _run([str(python), "-m", "pip", "install", "-r", str(files[0])], log)
    if len(files) > 1:
        env = dict(
            os.environ,
            PYTHON=str(python),
            PIP=f"{python} -m pip",
            VIRTUAL_ENV=str(prefix),
            DPSCALE_WHEELS=str(wheel_cache(name, envs_dir)),
        )
        _run(["bash", "-euo", "pipefail", str(files[1])], log, env=env)
    record_freeze(prefix, log)
    elapsed = time.monotonic() - started
    complete.write_text(f"{env_hash(name, envs_dir)}\nbuilt in {elapsed:.0f} s\n")
    marker.write_text(complete.read_text())
    print(f"[dpscale] environment {name} built in {elapsed:.0f} s", file=log, flush=True)
    return marker


def record_freeze(prefix: Path, log) -> Path:
    """Write what the environment holds, as ``pip freeze --all`` lists it, to FREEZE_FILE."""
    frozen = _freeze(env_python(prefix))
    path = prefix / FREEZE_FILE
    path.write_text(frozen, encoding="utf-8")
    print(f"[dpscale] {len(frozen.splitlines())} packages recorded in {path}", file=log, flush=True)
    return path


def _freeze(python: Path) -> str:
    command = [str(python), "-m", "pip", "freeze", "--all"]
    return subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO_ROOT).stdout


def freeze_hash(prefix: Path, record: bool = False) -> str:
    """sha256 of the environment's FREEZE_FILE ("unknown" without one); ``record``: write
    it first where a complete environment lacks it (built before environments recorded it)."""
    path = prefix / FREEZE_FILE
    if record and not path.is_file() and (prefix / COMPLETE_FLAG).is_file():
        record_freeze(prefix, sys.stderr)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "unknown"


def ensure_env(name: str, env_dir: str | Path = ".envs") -> Path:
    """Build (or find) an environment outside the workflow, logging where the workflow does
    (``<env_dir>/logs/<name>-<hash>.log``); returns its prefix."""
    prefix = env_prefix(name, env_dir)
    log_path = prefix.parent / "logs" / f"{prefix.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        build_env(name, prefix, log=log)
    return prefix


def _run(command: list[str], log, env: dict[str, str] | None = None) -> None:
    print("[dpscale] $ " + " ".join(command), file=log, flush=True)
    subprocess.run(
        command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build (or find) a framework environment")
    parser.add_argument("name")
    parser.add_argument("--env-dir", default=".envs")
    args = parser.parse_args(argv)
    prefix = env_prefix(args.name, args.env_dir)
    build_env(args.name, prefix)
    print(prefix)


if __name__ == "__main__":
    main()
