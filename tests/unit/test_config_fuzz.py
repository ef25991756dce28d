"""Every field of the config schema given hostile values (unicode, control characters, huge
and non-finite numbers, wrong types, names too long for the file system): the study is either
accepted or refused with one line naming the field, never a traceback, never a folder made.
DPSCALE_FUZZ_SEED picks another draw (the failing draw's seed and value are in the message)."""

from __future__ import annotations

import copy
import os
import random
import subprocess
import sys
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from conftest import REPO
from dpscale.plan.config import config_schema
from dpscale.plan.errors import ConfigError
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES

SEED = int(os.environ.get("DPSCALE_FUZZ_SEED", "20261125"))
DRAWS_PER_FIELD = 8
HOSTILE: list[Any] = [
    "",
    " ",
    "ünï©ødé ✓ 🚀 中文",
    "\u202eevil\u200b",
    "line one\nline two",
    "tab\there\x07bell",
    "../../../etc/passwd",
    "x" * 300,
    "é" * 200,
    ".. raw:: html\n\n   <script>alert(1)</script>",
    0,
    -1,
    10**30,
    -(10**30),
    1.5,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    None,
    [],
    [None],
    ["x" * 300],
    {},
    {"unknown_key": 1},
    {"name": None},
    "1e999",
    "0mbit",
    "-5gbit",
]


def field_paths(schema: dict[str, Any], prefix: tuple = ()) -> Iterator[tuple]:
    """Every property path of the schema; list items as index 0 (the object of a list of
    objects, and the list's element itself)."""
    for name, sub in (schema.get("properties") or {}).items():
        path = (*prefix, name)
        yield path
        yield from field_paths(sub, path)
        items = sub.get("items")
        if isinstance(items, dict):
            yield (*path, 0)
            yield from field_paths(items, (*path, 0))


def set_field(config: dict[str, Any], path: tuple, value: Any) -> None:
    """Put ``value`` at ``path``, making the containers on the way (a list gets one element,
    a copy of the default's first where there is one)."""
    node: Any = config
    for step, following in zip(path, path[1:], strict=False):
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(node, list):
            while len(node) <= step:
                node.append(copy.deepcopy(node[0]) if node else empty)
            if not isinstance(node[step], (dict, list)):
                node[step] = empty
        elif not isinstance(node.get(step), (dict, list)):
            node[step] = empty
        node = node[step]
    if isinstance(node, list):
        while len(node) <= path[-1]:
            node.append(None)
    node[path[-1]] = value


def draws(fields: list[tuple]) -> list[tuple[tuple, Any]]:
    rng = random.Random(SEED)
    return [(field, value) for field in fields for value in rng.sample(HOSTILE, DRAWS_PER_FIELD)]


def field_words(path: tuple) -> set[str]:
    return {str(step) for step in path if isinstance(step, str)}


@pytest.mark.slow  # about 1,500 studies planned: half a minute
def test_every_field_gets_one_line_or_is_accepted(default_config, tmp_path, monkeypatch):
    base = copy.deepcopy(default_config)
    base.update(results_dir=str(tmp_path / "results"), env_dir=str(tmp_path / "envs"))
    fields = sorted(set(field_paths(config_schema(STRATEGIES))), key=str)
    assert len(fields) > 100, "the schema walk found too few fields"
    # a relative path in a hostile value would land in the working folder: an empty one
    # (not the checkout, where tests running beside this one write)
    workdir = tmp_path.parent / f"{tmp_path.name}-cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    problems: list[str] = []
    refused = 0
    for field, value in draws(fields):
        config = copy.deepcopy(base)
        set_field(config, field, value)
        where = f"seed {SEED}: {'.'.join(map(str, field))} = {value!r}"
        try:
            plan_study(config, STRATEGIES)
        except ConfigError as error:
            refused += 1
            message = str(error)
            if "\n" in message or len(message) > 600:
                problems.append(f"{where}: not one short line: {message!r}")
            elif not any(word in message for word in field_words(field)):
                problems.append(f"{where}: the line names no field of the path: {message!r}")
        except Exception:  # noqa: BLE001 - what the test is for: any other exception
            problems.append(f"{where}: {traceback.format_exc(limit=3)}")
        if any(tmp_path.iterdir()):
            problems.append(f"{where}: made {sorted(p.name for p in tmp_path.iterdir())}")
            for made in tmp_path.iterdir():
                subprocess.run(["rm", "-rf", str(made)], check=True)
    assert not any(workdir.iterdir()), "a file was made in the working folder"
    assert refused > len(fields), "too few values were refused for the draw to mean anything"
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:20])


@pytest.mark.parametrize(
    "study",
    [
        {"study": "ünï©ødé-✓"},
        {"study": "s" * 300},
        {"batch_sizes": [10**30]},
        {"measure": {"windows": "five"}},
        {"models": [{"name": "resnet18\n.. raw:: html"}]},
    ],
)
def test_check_config_prints_one_line_and_no_traceback(study, tmp_path):
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump({"results_dir": str(tmp_path / "r"), **study}))
    command = [sys.executable, "-m", "dpscale.cli", "check-config", str(study_file)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0 and len(lines) == 1, run.stderr
    assert lines[0].startswith("dpscale: config error: ")
    assert not (tmp_path / "r").exists()


def test_snakemake_stops_on_a_hostile_study_before_any_folder(tmp_path):
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump({"study": "s" * 300, "results_dir": str(tmp_path / "r")}))
    command = [sys.executable, "-m", "snakemake", "-n", "--configfile", str(study_file)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    errors = [line for line in run.stderr.splitlines() if line.startswith("dpscale:")]
    assert run.returncode != 0 and len(errors) == 1, run.stderr[-2000:]
    assert errors[0].startswith("dpscale: config error: study:")
    assert "Traceback" not in run.stderr and not (tmp_path / "r").exists()


def test_the_walk_reaches_nested_and_list_fields():
    fields = set(field_paths(config_schema(STRATEGIES)))
    assert ("measure", "windows") in fields and ("models", 0, "image_size") in fields
    config: dict[str, Any] = {"models": [{"name": "resnet18"}]}
    set_field(config, ("models", 1, "image_size"), 7)
    assert config["models"][1] == {"name": "resnet18", "image_size": 7}
