"""Every third-party package a dpscale module imports is declared where that module runs
(docs/architecture.md's rooms): the core dependencies everywhere; the ``analysis`` extra on
the launching host (launch/, analysis/, render/, steps/); a framework environment
(envs/*.txt and the Horovod its post script builds) for frameworks/, strategies/ and the
launchers run as ``python -m`` inside one (launch/starters/). Imports are read with ast, so
no framework is imported; import names map to distributions through this environment's
installed metadata (PIL -> pillow, yaml -> PyYAML)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "src" / "dpscale"
CORE, ANALYSIS, FRAMEWORK = "core", "analysis", "framework environment"
# the rooms whose code runs on the launching host, beside Snakemake and the report
HOST_ROOMS = ("launch", "analysis", "render", "steps")
# the rooms whose code runs inside a framework's environment and imports the framework
FRAMEWORK_ROOMS = ("frameworks", "strategies", "launch/starters")
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
PINNED = re.compile(r"\b([A-Za-z0-9][A-Za-z0-9._-]*)==")


def normal(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    return {normal(REQUIREMENT.match(line)[1]) for line in requirements if REQUIREMENT.match(line)}


@cache
def declared() -> dict[str, set[str]]:
    """The distributions each dependency set declares."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    core = requirement_names(project["dependencies"])
    analysis = requirement_names(project["optional-dependencies"]["analysis"])
    envs = set()
    for path in sorted((REPO / "envs").glob("*.txt")):
        lines = path.read_text("utf-8").splitlines()
        envs |= requirement_names([line for line in lines if not line.lstrip().startswith("#")])
    for path in sorted((REPO / "envs").glob("*.post.sh")):
        envs |= {normal(name) for name in PINNED.findall(path.read_text("utf-8"))}
    return {CORE: core, ANALYSIS: analysis, FRAMEWORK: envs}


def sets_for(module: Path) -> tuple[str, ...]:
    """The dependency sets a module may import from, by its room."""
    where = module.relative_to(PACKAGE).as_posix()
    if any(where.startswith(f"{room}/") for room in FRAMEWORK_ROOMS):
        return (CORE, FRAMEWORK)
    if any(where.startswith(f"{room}/") for room in HOST_ROOMS):
        return (CORE, ANALYSIS)
    return (CORE,)  # plan/, runner/, registry, cli, study_check, workflow_door


def third_party_imports(module: Path) -> set[str]:
    """The top-level names of every absolute import (inside functions too) that is neither
    the standard library's nor dpscale's."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text("utf-8"), str(module))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names and name != "dpscale"}


@cache
def installed_distributions() -> dict[str, list[str]]:
    """Import name -> distributions, read once (it scans every installed package)."""
    return packages_distributions()


def distributions(name: str, allowed: set[str]) -> set[str]:
    """The distributions that provide import ``name``: this environment's metadata where it
    is installed; else (a framework, absent from the analysis environment) an allowed
    distribution of that name or a build of it (tensorflow-cpu, mxnet-cu112)."""
    installed = installed_distributions().get(name)
    if installed:
        return {normal(dist) for dist in installed}
    return {dist for dist in allowed if dist == normal(name) or dist.startswith(f"{normal(name)}-")}


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize(
    "module", MODULES, ids=[m.relative_to(PACKAGE).as_posix() for m in MODULES]
)
def test_each_third_party_import_is_declared_for_its_room(module):
    sets = sets_for(module)
    allowed = set().union(*(declared()[name] for name in sets))
    for name in sorted(third_party_imports(module)):
        provides = distributions(name, allowed)
        assert provides, f"{name}: not installed here and in none of {sets}"
        assert provides & allowed, f"{name} ({sorted(provides)}) is declared in none of {sets}"


def test_the_walk_sees_the_imports_it_checks():
    """The walk finds what it must: PIL in render/png.py, under the analysis extra as
    pillow; torch in a framework module, from envs/torch.txt; nothing beyond the core in
    plan/."""
    png = PACKAGE / "render" / "png.py"
    assert "PIL" in third_party_imports(png)
    assert distributions("PIL", declared()[ANALYSIS]) == {"pillow"}
    assert "pillow" in declared()[ANALYSIS] and "pillow" not in declared()[CORE]
    torch_ops = PACKAGE / "frameworks" / "torch_ops.py"
    assert "torch" in third_party_imports(torch_ops) and sets_for(torch_ops)[-1] == FRAMEWORK
    assert {"torch", "horovod"} <= declared()[FRAMEWORK]
    assert sets_for(PACKAGE / "plan" / "cluster_file.py") == (CORE,)
