"""The package layout is the architecture: each side imports only what runs where it runs.

Read from the source files' import statements (every ``import`` and ``from ... import``,
inside functions too), not from a convention: a runner-side module that imports pandas, or
plan-time code that imports a framework, fails here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = REPO / "src" / "dpscale"
FRAMEWORKS = {"torch", "tensorflow", "mxnet", "horovod"}

# side -> (dpscale sides it may import, third-party top-level packages it may import)
SIDES: dict[str, tuple[set[str], set[str]]] = {
    # plan time, and the vocabulary every side shares
    "plan": ({"plan"}, {"yaml", "jsonschema"}),
    # inside a framework's environment, without the framework
    "runner": ({"plan", "runner"}, {"numpy", "scipy", "yaml", "jsonschema"}),
    # inside a framework's environment: one framework's operations and ResNet builder
    "frameworks": ({"plan", "runner", "frameworks"}, {"numpy"} | FRAMEWORKS),
    # one adapter per strategy; its framework imports sit in framework_imports()
    "strategies": ({"plan", "runner", "frameworks"}, {"numpy"} | FRAMEWORKS),
    # the strategies' declarations, one line each
    "registry": ({"plan", "strategies"}, set()),
    # on the launching host: environments, datasets, launches, SLURM, emulated nodes;
    # Horovod's rendezvous (launch/horovod_gloo.py) runs in the framework's environment
    "launch": ({"plan", "runner", "launch", "registry"}, {"numpy", "sklearn", "horovod"}),
    # results -> tables, laws, findings, predictions
    "analysis": ({"plan", "analysis"}, {"numpy", "scipy", "pandas", "jsonschema"}),
    # figures, interactive pages, HTML tables
    "render": (
        {"plan", "analysis", "render"},
        {"numpy", "pandas", "matplotlib", "seaborn", "altair"},
    ),
    # the analysis and report command line
    "cli": ({"plan", "analysis", "render", "registry"}, {"pandas"}),
}


def side_of(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package).parts
    return parts[0] if len(parts) > 1 else path.stem


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "dpscale":  # from dpscale import plan -> dpscale.plan
                found += [(node.lineno, f"dpscale.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def violations(path: Path, package: Path = PACKAGE) -> list[str]:
    side = side_of(path, package)
    sides, third_party = SIDES[side]
    wrong = []
    for line, module in imported_modules(path):
        top = module.split(".")[0]
        where = f"{path.relative_to(package.parent)}:{line} ({side}) imports {module}"
        if top == "dpscale":
            target = module.split(".")[1] if "." in module else ""
            if target not in sides:
                wrong.append(f"{where}: {side} may import dpscale.{sorted(sides)}")
        elif top not in sys.stdlib_module_names and top != "__future__" and top not in third_party:
            wrong.append(f"{where}: {side} may import {sorted(third_party) or 'no third party'}")
    return wrong


def source_files() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE
    )


def test_every_module_belongs_to_a_side():
    unknown = {str(p.relative_to(REPO)) for p in source_files() if side_of(p) not in SIDES}
    assert not unknown, f"add these to a side (tests/unit/test_boundaries.py): {sorted(unknown)}"


@pytest.mark.parametrize("path", source_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_stay_on_their_side(path):
    assert violations(path) == []


def test_a_runner_module_importing_pandas_is_caught(tmp_path):
    module = PACKAGE / "runner" / "timing.py"
    copy = tmp_path / "dpscale" / "runner" / "timing.py"
    copy.parent.mkdir(parents=True)
    copy.write_text(module.read_text() + "\nimport pandas\n")
    assert violations(module) == []
    found = violations(copy, package=tmp_path / "dpscale")
    assert found and "imports pandas" in found[0]
