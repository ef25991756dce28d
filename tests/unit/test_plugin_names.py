"""Adding a strategy is one adapter file and one registry line: no other code names one.

Strategy names and launch-kind names (and the launchers the kinds run) may appear as string
literals only in the adapters (strategies/ and the framework code they share, frameworks/),
the launch kinds and the registry. Docstrings and comments may name them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO
from dpscale.launch.kinds import KINDS
from dpscale.registry import STRATEGIES

PACKAGE = REPO / "src" / "dpscale"
ALLOWED = (
    PACKAGE / "strategies",
    PACKAGE / "frameworks",
    PACKAGE / "launch" / "kinds.py",
    PACKAGE / "registry.py",
)
LAUNCHERS = ("torchrun", "torch.distributed.run", "horovodrun")
NAMES = sorted({*STRATEGIES, *KINDS, *LAUNCHERS}, key=len, reverse=True)
NAMED = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, NAMES)) + r")(?![\w-])")


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def named_in_python(path: Path, root: Path = REPO) -> list[str]:
    """``file:line: name`` for each name in a string literal that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = docstrings(tree)
    return [
        f"{path.relative_to(root)}:{node.lineno}: {name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        for name in NAMED.findall(node.value)
    ]


def named_in_workflow(path: Path) -> list[str]:
    hits = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        code = line.split("#", 1)[0]
        for literal in re.findall(r"\"[^\"]*\"|'[^']*'", code):
            hits += [f"{path.relative_to(REPO)}:{number}: {m}" for m in NAMED.findall(literal)]
    return hits


def test_no_code_outside_the_plug_ins_names_a_strategy_or_launch_kind():
    python = [p for p in PACKAGE.rglob("*.py") if not any(p.is_relative_to(a) for a in ALLOWED)]
    workflow = [REPO / "Snakefile", *(REPO / "workflow" / "rules").glob("*.smk")]
    hits = [hit for p in python for hit in named_in_python(p)]
    hits += [hit for p in workflow for hit in named_in_workflow(p)]
    assert hits == []


def test_the_check_sees_a_name_in_code(tmp_path):
    module = tmp_path / "module.py"
    module.write_text('"""A docstring may say torch-ddp."""\nKIND = "horovod"\n', encoding="utf-8")
    assert named_in_python(module, tmp_path) == ["module.py:2: horovod"]
