"""Hostile YAML (cycles through aliases, alias bombs, deep nesting): one config error line
naming the file and the field, before any check walks the document, never a traceback or a
hang. DPSCALE_FUZZ_SEED picks another draw of the generated documents."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import yaml

from dpscale.cli import main as cli
from dpscale.plan.config_files import load_yaml
from dpscale.plan.errors import ConfigError
from dpscale.plan.study import plan_study
from dpscale.plan.yaml_shape import MAX_DEPTH, MAX_VALUES, check_shape
from dpscale.registry import STRATEGIES

SEED = int(os.environ.get("DPSCALE_FUZZ_SEED", "20261126"))
CYCLE = "study: cyc\nbatch_sizes: &b [4, *b]\n"


def alias_bomb(levels: int = 9, fan: int = 9) -> str:
    """``levels`` lists of ``fan`` aliases of the list before: fan**levels values."""
    lines = ["study: bomb", f"a0: &a0 [{', '.join(['1'] * fan)}]"]
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * fan)}]")
    return "\n".join([*lines, f"batch_sizes: *a{levels}", ""])


def config_error(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    study = tmp_path / "study.yaml"
    study.write_text(text, encoding="utf-8")
    with pytest.raises(SystemExit) as exited:
        cli(["check-config", str(study)])
    assert exited.value.code not in (0, None)
    out = capsys.readouterr()
    return (out.err + out.out + str(exited.value.code)).strip()


def test_a_cycle_through_an_alias_is_one_line_naming_file_and_field(tmp_path, capsys):
    said = config_error(tmp_path, CYCLE, capsys)
    assert said.count("\n") == 0, said
    assert f"{tmp_path / 'study.yaml'}: batch_sizes[1]: a YAML alias refers to" in said
    assert "Traceback" not in said


def test_an_alias_bomb_is_one_line_naming_the_budget(tmp_path, capsys):
    said = config_error(tmp_path, alias_bomb(), capsys)
    assert said.count("\n") == 0, said
    assert f"more than {MAX_VALUES:,} values" in said and str(tmp_path) in said


def test_the_workflow_check_refuses_them_too():
    """The workflow hands plan_study what Snakemake loaded, not a file: the field is named."""
    for text in (CYCLE, alias_bomb()):
        with pytest.raises(ConfigError, match="YAML alias|values"):
            plan_study(yaml.safe_load(text), STRATEGIES)


def test_a_shared_alias_within_the_budget_is_accepted(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text("study: ok\nx: &n [1, 2]\nbatch_sizes: *n\n", encoding="utf-8")
    assert load_yaml(study)["batch_sizes"] == [1, 2]


def test_nesting_deeper_than_allowed_is_refused():
    deep: list = []
    for _ in range(MAX_DEPTH + 1):
        deep = [deep, 1]
    with pytest.raises(ConfigError, match=f"deeper than {MAX_DEPTH}"):
        check_shape({"batch_sizes": deep})


def random_document(draw: random.Random) -> str:
    """A YAML mapping of anchored lists and mappings that alias earlier anchors (some nested
    deep, some fanning out) and, now and then, themselves."""
    lines, anchors = ["study: fuzz"], []
    for index in range(draw.randint(1, 12)):
        name = f"k{index}"
        items = [
            f"*{draw.choice(anchors)}"
            if anchors and draw.random() < 0.7
            else str(draw.randint(0, 9))
            for _ in range(draw.randint(0, 12))
        ]
        if draw.random() < 0.1:
            items.append(f"*{name}")  # a cycle
        if draw.random() < 0.5:
            body = "[" + ", ".join(items) + "]"
        else:
            body = "{" + ", ".join(f"f{i}: {item}" for i, item in enumerate(items)) + "}"
        lines.append(f"{name}: &{name} {body}")
        anchors.append(name)
    lines.append(f"batch_sizes: *{draw.choice(anchors)}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("draw_index", range(40))
def test_generated_hostile_documents_are_accepted_or_refused_in_one_line(tmp_path, draw_index):
    text = random_document(random.Random(SEED + draw_index))
    study = tmp_path / "study.yaml"
    study.write_text(text, encoding="utf-8")
    try:
        loaded = load_yaml(study)
    except ConfigError as error:
        assert "\n" not in str(error) and str(study) in str(error), (SEED + draw_index, text)
        return
    try:
        plan_study(loaded, STRATEGIES)
    except ConfigError as error:
        assert "\n" not in str(error), (SEED + draw_index, text)
