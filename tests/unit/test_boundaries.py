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
# a framework's own image input pipeline (folder cells: frameworks/torch_folder.py)
IMAGE_PIPELINES = {"torchvision", "PIL"}

# side -> (dpscale sides it may import, third-party top-level packages it may import)
SIDES: dict[str, tuple[set[str], set[str]]] = {
    # plan time, and the vocabulary every side shares
    "plan": ({"plan"}, {"yaml", "jsonschema"}),
    # inside a framework's environment, without the framework
    # inside a framework's environment, which may be a site's own interpreter or container:
    # the framework and numpy only (plan.result imports jsonschema only where it can)
    "runner": ({"plan", "runner"}, {"numpy"}),
    # inside a framework's environment: one framework's operations and ResNet builder
    "frameworks": ({"plan", "runner", "frameworks"}, {"numpy"} | FRAMEWORKS | IMAGE_PIPELINES),
    # one adapter per strategy; its framework imports sit in framework_imports()
    "strategies": ({"plan", "runner", "frameworks"}, {"numpy"} | FRAMEWORKS),
    # the strategies' declarations, one line each
    "registry": ({"plan", "strategies"}, set()),
    # on the launching host: environments, datasets, launches, SLURM, emulated nodes;
    # Horovod's rendezvous (launch/starters/horovod_gloo.py) and torchrun
    # (launch/starters/torchrun.py) run in the framework's environment
    "launch": (
        {"plan", "runner", "launch", "registry"},
        {
            "numpy",
            "sklearn",
            "horovod",
            "torch",
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
    # the one plan-time check of a study, which cli and the workflow's door both call: it
    # reads the imported logs (analysis) and probes a site's interpreters (launch)
    "study_check": ({"plan", "registry", "launch", "analysis"}, set()),
    # what a person types; compare runs an analysis step (the analysis extra), lock
    # freezes a built environment (launch.setup.envs)
    "cli": (
        {"plan", "registry", "steps", "launch", "study_check", "cli_workflow", "cli_study"},
        set(),
    ),
    # the study read and checked, Snakemake's command line, the report: what cli's commands share
    "cli_workflow": ({"plan", "study_check"}, set()),
    # a study's state and its cells measured again (status, rerun-failed, rerun)
    "cli_study": ({"plan", "cli_workflow"}, set()),
    # the workflow's one door (Snakefile, workflow/rules/*.smk): re-exports only
    "workflow_door": (
        {"plan", "registry", "launch", "analysis", "render", "study_check"},
        set(),
    ),
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
            # from dpscale import plan -> dpscale.plan; from dpscale.analysis import laws and
            # from dpscale.launch import checks too
            if node.module in ("dpscale", "dpscale.analysis", "dpscale.launch"):
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


# launch/ in rooms: the cell's story at its top ("": launcher, checks, supervise, failures,
# kinds, guard, ports, rank_exits, contention, without_snakemake), the rest in sub-packages
# by what they touch. room -> what it may import of launch: a room by its name ("" for any
# module at the top), or one module at the top by its name where a room needs only that one.
LAUNCH_ROOMS: dict[str, set[str]] = {
    # the cell's story: environments, emulated nodes and SLURM under it; the starters it
    # runs by module name (python -m), never imports; the hooks are the workflow's
    "": {"", "setup", "emulation", "slurm"},
    # framework environments, site interpreters, prepared datasets: before any cell
    "setup": {"setup"},
    # emulated nodes: network namespaces and srun's stand-in inside them
    "emulation": {"emulation"},
    # a cell's SLURM job, allocation, tasks and lost jobs: a task sets its rank variables
    # through the launch kinds, a job SLURM ended leaves the cell's failed result
    "slurm": {"slurm", "kinds", "failures"},
    # the framework launchers dpscale provides: a free port, how their ranks ended
    "starters": {"starters", "ports", "rank_exits"},
    # patches of the Snakemake process: a job's Snakemake dies with its shell as the guard does
    "snakemake_hooks": {"snakemake_hooks", "guard"},
}
LAUNCH = PACKAGE / "launch"
LAUNCH_TOP_MODULES = 12  # .py files at launch/'s top, __init__ and __main__ included


def launch_room_of(path: Path, package: Path = PACKAGE) -> str | None:
    """launch/<room>/...: the room; "" for a module at launch/'s top; None outside launch/."""
    parts = path.relative_to(package).parts
    if parts[0] != "launch":
        return None
    return parts[1] if len(parts) > 2 else ""


def launch_room_violations(path: Path, package: Path = PACKAGE) -> list[str]:
    room = launch_room_of(path, package)
    allowed = LAUNCH_ROOMS[room]
    wrong = []
    for line, module in imported_modules(path):
        parts = module.split(".")
        if parts[:2] != ["dpscale", "launch"] or len(parts) == 2:
            continue  # outside launch/, or its package, which imports nothing
        name = parts[2]
        # a sub-package by its name; a module at launch/'s top by its name or the top's ""
        top = name not in LAUNCH_ROOMS
        if name not in allowed and not (top and "" in allowed):
            where = f"{path.relative_to(package.parent)}:{line} (launch room {room or 'top'!r})"
            wrong.append(f"{where} imports {module}: it may import launch.{sorted(allowed)}")
    return wrong


def launch_files() -> list[Path]:
    return [p for p in source_files() if launch_room_of(p) is not None]


def test_every_launch_module_belongs_to_a_room():
    unknown = {
        str(p.relative_to(REPO)) for p in launch_files() if launch_room_of(p) not in LAUNCH_ROOMS
    }
    assert not unknown, f"put these in launch/{sorted(set(LAUNCH_ROOMS) - {''})}: {unknown}"


@pytest.mark.parametrize("path", launch_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_launch_rooms_import_only_what_they_may(path):
    assert launch_room_violations(path) == []


def test_an_emulation_module_importing_slurm_is_caught(tmp_path):
    module = LAUNCH / "emulation" / "netns.py"
    copy = tmp_path / "dpscale" / "launch" / "emulation" / "netns.py"
    copy.parent.mkdir(parents=True)
    copy.write_text(module.read_text() + "\nfrom dpscale.launch.slurm import allocation\n")
    assert launch_room_violations(module) == []
    found = launch_room_violations(copy, package=tmp_path / "dpscale")
    assert found and "imports dpscale.launch.slurm" in found[0]
    # a room that may import one module at the top is caught importing another
    copy.write_text(module.read_text() + "\nfrom dpscale.launch import launcher\n")
    found = launch_room_violations(copy, package=tmp_path / "dpscale")
    assert found and "imports dpscale.launch.launcher" in found[0]


def crowded_top(folder: Path) -> list[str]:
    """The modules at a folder's top, if there are more than launch/ may hold there."""
    top = sorted(p.name for p in folder.glob("*.py"))
    return top if len(top) > LAUNCH_TOP_MODULES else []


def test_launch_keeps_at_most_12_modules_at_its_top():
    assert crowded_top(LAUNCH) == [], (
        f"more than {LAUNCH_TOP_MODULES} modules at launch/'s top: put the new one in a room "
        f"({sorted(set(LAUNCH_ROOMS) - {''})}), or a new room in LAUNCH_ROOMS and "
        "docs/architecture.md"
    )


def test_a_thirteenth_module_at_launchs_top_is_caught(tmp_path):
    for number in range(LAUNCH_TOP_MODULES):
        (tmp_path / f"module{number}.py").write_text("")
    assert crowded_top(tmp_path) == []
    (tmp_path / "extra.py").write_text("")
    assert "extra.py" in crowded_top(tmp_path)


# No import cycles: no module imports itself through others (inside functions too).
def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports: ``from a import b`` is a.b where b is a
    module, else a."""
    paths = {module_name(p, package): p for p in package.rglob("*.py")}
    top = package.name
    graph = {}
    for name, path in paths.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name in paths}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.split(".")[0] != top:
                    continue
                for alias in node.names:
                    inner = f"{node.module}.{alias.name}"
                    found.add(inner if inner in paths else node.module)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle's modules (the strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_module_imports_itself_through_others():
    graph = import_graph()
    assert "dpscale.launch.slurm.allocation" in graph["dpscale.launch.kinds"]
    assert import_cycles(graph) == []


def test_an_import_cycle_is_caught(tmp_path):
    package = tmp_path / "dpscale"
    (package / "launch").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch" / "__init__.py").write_text("")
    (package / "launch" / "a.py").write_text("from dpscale.launch import b\n")
    (package / "launch" / "b.py").write_text("def f():\n    from dpscale.launch.a import g\n")
    assert import_cycles(import_graph(package)) == [["dpscale.launch.a", "dpscale.launch.b"]]


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
