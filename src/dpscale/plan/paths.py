"""Where dpscale's files are, for code that runs from any environment.

Two roots: the workflow's files (Snakefile, config.yaml, workflow/, envs/, ...; read only)
and the working folder where results/ and .envs/ go. In a checkout (editable installs, the
tests) both are the checkout. An installed package carries the workflow's files inside
itself (``dpscale/_workflow``, copied by setup.py; docs/decisions/installed-package.md) and
works in the current folder, as Snakemake's relative paths do.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
INSTALLED_WORKFLOW = "_workflow"  # setup.py copies the workflow's files there


def checkout_of(package_dir: Path) -> Path | None:
    """The checkout holding ``package_dir`` as ``src/dpscale`` beside a Snakefile; None for
    an installed package."""
    root = package_dir.parent.parent
    if package_dir.parent.name == "src" and (root / "Snakefile").is_file():
        return root
    return None


def workflow_root(package_dir: Path) -> Path:
    """The folder with the Snakefile: the checkout, else the package's own copy."""
    return checkout_of(package_dir) or package_dir / INSTALLED_WORKFLOW


def import_folder(package_dir: Path, cache_home: Path) -> Path:
    """Where an installed package is linked alone for framework processes' PYTHONPATH:
    one folder per installed copy (keyed by its path)."""
    key = hashlib.sha256(str(package_dir).encode()).hexdigest()[:16]
    return cache_home / "dpscale" / "import" / key


def link_package(package_dir: Path, folder: Path) -> Path:
    """``folder`` holding only a ``dpscale`` link to ``package_dir`` (made atomically, so
    launches side by side never see half of it); returns ``folder``."""
    link = folder / package_dir.name
    if link.is_symlink() and link.resolve() == package_dir.resolve():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    staged = folder / f".{package_dir.name}.{os.getpid()}"
    staged.unlink(missing_ok=True)
    staged.symlink_to(package_dir, target_is_directory=True)
    os.replace(staged, link)
    return folder


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


CHECKOUT = checkout_of(PACKAGE_DIR)
WORKFLOW_ROOT = workflow_root(PACKAGE_DIR)
# the older name, which the tests and benchmarks use: the checkout when run from one
REPO_ROOT = WORKFLOW_ROOT
SCHEMA_DIR = WORKFLOW_ROOT / "workflow" / "schemas"
ENVS_DIR = WORKFLOW_ROOT / "envs"
# What framework processes import dpscale from (import_root() makes it): the checkout's
# src/, or for an installed package a folder with only a link to it, never site-packages
# itself, whose numpy and pandas would shadow the framework environment's own.
SRC_DIR = PACKAGE_DIR.parent if CHECKOUT else import_folder(PACKAGE_DIR, _cache_home())


def import_root() -> Path:
    """SRC_DIR, made first where it is an installed package's link folder."""
    return SRC_DIR if CHECKOUT else link_package(PACKAGE_DIR, SRC_DIR)


def work_dir() -> Path:
    """What a relative config path (env_dir) is taken from outside Snakemake: the checkout,
    else the current folder (Snakemake's working directory when it runs a study)."""
    return CHECKOUT or Path.cwd()
