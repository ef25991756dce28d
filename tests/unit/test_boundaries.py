"""The package layout is the architecture: each side imports only what runs where it runs.

Read from the source files' import statements (every ``import`` and ``from ... import``,
inside functions too), not from a convention: a runner-side module that imports pandas, or
plan-time code that imports a framework, fails here.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
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
    # inside a framework's environment, which may be a site's own interpreter or container:
    # the framework and numpy only (plan.result imports jsonschema only where it can)
    "runner": ({"plan", "runner"}, {"numpy"}),
    # inside a framework's environment: one framework's operations and ResNet builder
    "frameworks": ({"plan", "runner", "frameworks"}, {"numpy"} | FRAMEWORKS),
    # one adapter per strategy; its framework imports sit in framework_imports()
    "strategies": ({"plan", "runner", "frameworks"}, {"numpy"} | FRAMEWORKS),
    # the strategies' declarations, one line each
    "registry": ({"plan", "strategies"}, set()),
    # on the launching host: environments, datasets, launches, SLURM, emulated nodes;
    # Horovod's rendezvous (launch/starters/horovod_gloo.py) runs in the framework's environment
    "launch": (
        {"plan", "runner", "launch", "registry"},
        {
            "numpy",
            "sklearn",
            "horovod",
            "jsonschema",
            "snakemake",
            "snakemake_executor_plugin_slurm",
        },
    ),
    # results -> tables, laws, findings, predictions
    "analysis": ({"plan", "analysis"}, {"numpy", "scipy", "pandas", "jsonschema"}),
    # figures, interactive pages, HTML tables
    "render": (
        {"plan", "analysis", "render"},
        {"numpy", "pandas", "matplotlib", "seaborn", "altair", "PIL"},
    ),
    # the rules' bodies (workflow/scripts/step.py): named inputs -> analysis -> render -> outputs
    "steps": ({"plan", "analysis", "render", "registry", "steps"}, {"pandas"}),
    # what a person types; compare runs an analysis step (the analysis extra), lock
    # freezes a built environment (launch.setup.envs)
    "cli": ({"plan", "registry", "steps", "launch"}, set()),
    # the workflow's one door (Snakefile, workflow/rules/*.smk): re-exports only
    "workflow_door": ({"plan", "registry", "launch", "analysis", "render"}, set()),
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
            # from dpscale import plan -> dpscale.plan; from dpscale.analysis import laws too
            if node.module in ("dpscale", "dpscale.analysis"):
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
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


# analysis/ in stages, a sub-package each: a stage imports the stages below it, never one above
ANALYSIS_STAGES: dict[str, set[str]] = {
    # results into tidy tables
    "results": {"results"},
    # laws and models fitted to the tables (and numbers in words, which the answers share)
    "laws": {"results", "laws"},
    # findings, verdicts, remedies, cost, start-up: from the tables and the laws
    "answers": {"results", "laws", "answers"},
}


def stage_of(path: Path, package: Path = PACKAGE) -> str:
    """analysis/<stage>/...: the stage; "" for a module outside analysis/."""
    parts = path.relative_to(package).parts
    if parts[0] != "analysis":
        return ""
    return parts[1] if len(parts) > 2 else path.stem


def stage_violations(path: Path, package: Path = PACKAGE) -> list[str]:
    stage = stage_of(path, package)
    stages = ANALYSIS_STAGES[stage]
    wrong = []
    for line, module in imported_modules(path):
        parts = module.split(".")
        if parts[:2] == ["dpscale", "analysis"] and len(parts) > 2 and parts[2] not in stages:
            where = f"{path.relative_to(package.parent)}:{line} (analysis.{stage})"
            wrong.append(f"{where} imports {module}: it may import analysis.{sorted(stages)}")
    return wrong


def analysis_files() -> list[Path]:
    return [p for p in source_files() if stage_of(p) and p != PACKAGE / "analysis" / "__init__.py"]


def test_every_analysis_module_belongs_to_a_stage():
    unknown = {
        str(p.relative_to(REPO)) for p in analysis_files() if stage_of(p) not in ANALYSIS_STAGES
    }
    assert not unknown, f"put these in analysis/{sorted(ANALYSIS_STAGES)}: {sorted(unknown)}"


@pytest.mark.parametrize("path", analysis_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_analysis_stages_import_only_the_stages_below(path):
    assert stage_violations(path) == []


def test_a_results_module_importing_an_answer_is_caught(tmp_path):
    module = PACKAGE / "analysis" / "results" / "rows.py"
    copy = tmp_path / "dpscale" / "analysis" / "results" / "rows.py"
    copy.parent.mkdir(parents=True)
    copy.write_text(module.read_text() + "\nfrom dpscale.analysis.answers import cost\n")
    assert stage_violations(module) == []
    found = stage_violations(copy, package=tmp_path / "dpscale")
    assert found and "imports dpscale.analysis.answers" in found[0]


# The workflow is an entry point beside cli.py: its rule files enter dpscale through one
# module, and the rules' bodies through the steps.
WORKFLOW = REPO / "workflow"
WORKFLOW_DOORS = {
    "Snakefile": "dpscale.workflow_door",
    "rules": "dpscale.workflow_door",
    "scripts": "dpscale.steps",
}
DPSCALE_IMPORT = re.compile(
    r"^\s*(?:from\s+(dpscale[\w.]*)\s+import|import\s+(dpscale[\w.]*))", re.M
)


def workflow_files() -> list[Path]:
    return [
        REPO / "Snakefile",
        *sorted((WORKFLOW / "rules").glob("*.smk")),
        *sorted((WORKFLOW / "scripts").glob("*.py")),
    ]


def dpscale_imports(text: str) -> list[str]:
    """The dpscale modules a rule file or script imports, read from its text (a .smk file is
    not Python that ast can parse)."""
    return [found[0] or found[1] for found in DPSCALE_IMPORT.findall(text)]


def workflow_door(path: Path) -> str:
    return WORKFLOW_DOORS[path.name if path.parent == REPO else path.parent.name]


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_the_workflow_enters_dpscale_through_its_door(path):
    door = workflow_door(path)
    others = [m for m in dpscale_imports(path.read_text(encoding="utf-8")) if m != door]
    assert others == [], f"{path.relative_to(REPO)} may import only {door}"


def test_the_workflow_uses_its_door_and_the_check_sees_another_import():
    rules = "".join(p.read_text(encoding="utf-8") for p in workflow_files())
    assert "dpscale.workflow_door" in dpscale_imports(rules)
    assert "dpscale.steps" in dpscale_imports(rules)
    text = "import json\nfrom dpscale.plan.study import plan_study\n    import dpscale.launch\n"
    assert dpscale_imports(text) == ["dpscale.plan.study", "dpscale.launch"]
    # a shell command running a module is not an import
    assert dpscale_imports('    shell:\n        "$DPSCALE_PYTHON -m dpscale.launch --cell"\n') == []


def test_the_door_only_re_exports_what_the_rules_use():
    import dpscale.workflow_door as door

    tree = ast.parse((PACKAGE / "workflow_door.py").read_text(encoding="utf-8"))
    logic = [
        type(node).__name__
        for node in tree.body
        if not isinstance(node, ast.Import | ast.ImportFrom | ast.Expr)
        and not (isinstance(node, ast.Assign) and node.targets[0].id == "__all__")
    ]
    assert logic == [], "the workflow's door re-exports only"
    rules = "".join(p.read_text(encoding="utf-8") for p in workflow_files() if p.suffix != ".py")
    rules = re.sub(r"from dpscale\.workflow_door import \(.*?\)", "", rules, flags=re.S)
    unused = [name for name in door.__all__ if not re.search(rf"\b{name}\b", rules)]
    assert unused == [], f"no rule uses these: {unused}"


# Run where dpscale does not choose the packages (a site's interpreter, a container):
# only the standard library, numpy and the framework may be there.
NOT_IN_A_SITE_INTERPRETER = ("yaml", "jsonschema", "scipy", "pandas", "sklearn", "matplotlib")
RANK_SIDE_MODULES = (
    "dpscale.runner.probe",
    "dpscale.launch.slurm.task",
    "dpscale.launch.emulation.netns_run",
    "dpscale.launch.starters.mxnet_ps",
    "dpscale.launch.starters.horovod_gloo",
)
WITHOUT_PACKAGES = """
import importlib, pkgutil, sys
from pathlib import Path

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}")

sys.meta_path.insert(0, Missing())
import dpscale.runner, dpscale.strategies
for package in (dpscale.runner, dpscale.strategies):
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{{package.__name__}}.{{module.name}}")
for name in {modules!r}:
    importlib.import_module(name)

from dpscale.plan.cell import Cell
from dpscale.plan.result import now_iso
from dpscale.runner.records import write_synthetic_result
cell = Cell.from_json(sys.argv[2])
out = cell.result_path(Path(sys.argv[1]))
write_synthetic_result(cell, out, started_at=now_iso(), per_rank_windows=[[0.5, 0.6, 0.55]],
    framework="fake", framework_versions={{}}, threads_used=1, trainable_params=1)
print(out)
"""


def test_the_rank_side_runs_with_only_the_standard_library_and_numpy(tmp_path):
    from conftest import make_cell
    from dpscale.plan.result import read_result

    code = WITHOUT_PACKAGES.format(blocked=NOT_IN_A_SITE_INTERPRETER, modules=RANK_SIDE_MODULES)
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), make_cell().to_json()],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = read_result(done.stdout.strip())  # checked here, where jsonschema is
    assert result["status"] == "ok" and result["measurement"]["summary"]["img_s"]["ci95"] > 0
