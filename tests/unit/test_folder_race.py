"""benchmarks/folder_race.py races dpscale's folder cells against plain loops: the loops
must transform images with dpscale's constants and take every setting from the cell they
race, and the race's verdict must follow its interval. The loops need a framework, so they
are read here, not run."""

from __future__ import annotations

import ast
import importlib
import operator
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

from conftest import REPO
from dpscale.plan.cell import Measure

BENCHMARKS = REPO / "benchmarks"
FRAMEWORKS = REPO / "src" / "dpscale" / "frameworks"
# each plain loop, the dpscale pipeline it stands beside, and the constants they share
PAIRS = {
    "torch": ("torch_folder.py", ("MEAN", "STD", "CROP_SCALE", "CROP_RATIO")),
    "tf": ("tf_folder.py", ("MEAN", "STD", "CROP_SCALE", "CROP_RATIO", "CROP_TRIES")),
}
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
ARITHMETIC[ast.Div] = operator.truediv


def constant(node: ast.expr) -> object:
    """A literal of numbers and tuples, arithmetic included (``3 / 4``)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(constant(item) for item in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -constant(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
        return ARITHMETIC[type(node.op)](constant(node.left), constant(node.right))
    raise ValueError(ast.dump(node))


def module_constants(path: Path) -> dict[str, object]:
    """The module-level names of ``path`` bound to literals (``A, B = 1, (2, 3)`` too)."""
    found: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        try:
            value = constant(node.value)
        except ValueError:
            continue
        if isinstance(target, ast.Name):
            found[target.id] = value
        elif isinstance(target, ast.Tuple) and isinstance(value, tuple):
            found.update(zip((name.id for name in target.elts), value, strict=True))
    return found


def declared_flags(path: Path) -> set[str]:
    """The options the script's argparse declares; a BooleanOptionalAction's ``--no-`` too."""
    flags: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant)]
        flags.update(name for name in names if name.startswith("--"))
        actions = [k.value for k in node.keywords if k.arg == "action"]
        if any(getattr(a, "attr", "") == "BooleanOptionalAction" for a in actions):
            flags.update("--no-" + name[2:] for name in names)
    return flags


@pytest.fixture
def folder_race(monkeypatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # its neighbours page and race_reference
    return importlib.import_module("folder_race")


@pytest.mark.parametrize("framework", sorted(PAIRS))
def test_a_plain_loop_transforms_images_with_its_dpscale_pipelines_constants(
    folder_race, framework
):
    pipeline, names = PAIRS[framework]
    ours = module_constants(FRAMEWORKS / pipeline)
    plain = module_constants(folder_race.SCRIPTS[framework])
    assert {name: plain.get(name) for name in names} == {name: ours[name] for name in names}


@pytest.mark.parametrize("framework", sorted(PAIRS))
def test_a_plain_loop_gets_every_setting_it_declares_from_the_cell_it_races(
    folder_race, framework, tmp_path
):
    measure = Measure(warmup_steps=3, windows=4, steps_per_window=6)
    cell = replace(folder_race.race_cell(framework, tmp_path, 4, measure), seed=7)
    passed = dict(
        arg.split("=", 1) if "=" in arg else (arg, None)
        for arg in folder_race.plain_args(framework, cell)
    )
    declared = declared_flags(folder_race.SCRIPTS[framework])
    assert set(passed) <= declared
    # no setting falls back to the loop's own default: each flag, or its negation, is passed
    settings = {flag for flag in declared if not flag.startswith("--no-")}
    assert {f for f in settings if f not in passed and "--no-" + f[2:] not in passed} == set()
    expected = {
        "--folder": str(tmp_path),
        "--classes": "4",
        "--image-size": str(cell.model.image_size),
        "--batch": str(cell.batch_per_device),
        "--workers": str(cell.image_folder.workers),
        "--prefetch": str(cell.image_folder.prefetch),
        "--seed": "7",
        "--warmup-steps": "3",
        "--windows": "4",
        "--steps-per-window": "6",
        "--momentum": str(cell.sgd.momentum),
        "--weight-decay": str(cell.sgd.weight_decay),
    }
    assert {flag: passed.get(flag) for flag in expected} == expected


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ([1.00, 1.01, 0.99, 1.00, 1.02], "holds"),
        ([0.80, 0.82, 0.79], "fails"),
        ([0.90, 1.05, 0.92, 1.10], "undecided"),
    ],
)
def test_the_verdict_says_where_the_threshold_lies_against_the_interval(
    folder_race, ratios, verdict
):
    summary = folder_race.ratio_summary(ratios, 0.95)
    low, high = summary["ci95"]
    assert low < summary["geometric_mean"] < high
    assert summary["verdict"] == verdict


def test_one_pair_gives_its_ratio_and_no_interval(folder_race):
    summary = folder_race.ratio_summary([0.97])
    assert (summary["median"], summary["ci95"], summary["verdict"]) == (0.97, None, "one pair")
