"""The posts side by side with a run: presets keep the posts' numbers as data."""

import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import REPO
from dpscale.analysis.answers import posts
from dpscale.plan.errors import ConfigError
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES

STUDIES = REPO / "studies"
PRESETS = sorted(p for p in STUDIES.glob("post*.yaml") if not p.stem.endswith("_mini"))


def load_study(path: Path) -> dict:
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config.update(yaml.safe_load(path.read_text()))
    return plan_study(config, STRATEGIES)[0]


def test_there_is_one_preset_per_post_each_with_a_mini_variant():
    numbers = sorted(p.name[4:7] for p in PRESETS)
    assert numbers == ["000", "001", "002", "003", "004"]
    for preset in PRESETS:
        mini = load_study(STUDIES / f"{preset.stem}_mini.yaml")
        assert mini["accelerator"] == "cpu" and mini["threads_per_device"] == 1
        assert mini["study"] == f"{preset.stem}_mini"


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_presets_carry_the_posts_numbers_and_minis_the_same_ones(preset):
    reference = load_study(preset)["reference"]
    assert reference["comparisons"], preset
    mini = load_study(STUDIES / f"{preset.stem}_mini.yaml")["reference"]

    def post_side(ref):
        keep = ("quantity", "unit", "value", "post_setup", "note")
        return ref["source"], [{k: c.get(k) for k in keep} for c in ref["comparisons"]]

    assert post_side(mini) == post_side(reference)


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_a_presets_source_names_its_post_not_a_file_outside_the_repository(preset):
    """A fresh clone has nothing beside it: the post is named by its title and where it was
    published, as people cite it."""
    source = load_study(preset)["reference"]["source"]
    assert "../" not in source and "shared/seeds" not in source, source
    assert "「" in source and "」" in source, source


def test_post_001_preset_is_horovod_with_the_linear_rule_and_warmup():
    config = load_study(STUDIES / "post001_horovod_keras.yaml")
    assert config["strategies"] == ["horovod-tf"] and config["modes"] == ["train"]
    train = config["train"]
    assert train["lr_rules"] == ["linear"] and train["warmup_epochs"] == 3
    assert train["dataset"] == "digits" and train["models"][0]["stem"] == "cifar"
    assert "MNIST" in config["description"]


def test_a_malformed_reference_is_a_one_line_config_error():
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["reference"] = {
        "source": "x",
        "comparisons": [
            {"quantity": "q", "unit": "s", "value": 1, "run": {"table": "nope", "column": "c"}}
        ],
    }
    with pytest.raises(ConfigError, match=r"reference\.comparisons\[0\]\.run\.table"):
        plan_study(config, STRATEGIES)[0]


def comparison(value, run):
    return {"quantity": "q", "unit": "s", "value": value, "post_setup": "p", "run": run}


def test_run_values_follow_the_mapping_one_row_per_strategy():
    cells = pd.DataFrame(
        {
            "strategy": ["a", "a", "b", "b"],
            "model": ["m"] * 4,
            "world_size": [1, 1, 1, 2],
            "status": ["ok", "ok", "ok", "ok"],
            "img_s_mean": [100.0, 300.0, 50.0, 80.0],
        }
    )
    reference = {
        "source": "s",
        "comparisons": [
            comparison(
                10.0,
                {
                    "table": "cells",
                    "column": "img_s_mean",
                    "numerator": 1000.0,
                    "where": {"world_size": 1},
                },
            ),
        ],
    }
    table = posts.post_vs_run(reference, {"cells": cells}).set_index("run_strategy")
    # a: mean of 1000/100 and 1000/300; b: 1000/50
    assert table.loc["a", "run_value"] == pytest.approx((10 + 1000 / 300) / 2)
    assert table.loc["b", "run_value"] == pytest.approx(20.0)
    assert table.loc["b", "run_over_post"] == pytest.approx(2.0)
    assert table.loc["a", "run_rows"] == 2


def test_times_column_and_missing_cells_and_figure_only_posts():
    runs = pd.DataFrame(
        {
            "strategy": ["h"],
            "model": ["m"],
            "world_size": [1],
            "status": ["ok"],
            "mean_epoch_train_s": [2.0],
            "epochs": [30],
        }
    )
    spec = {"table": "training_runs", "column": "mean_epoch_train_s", "times_column": "epochs"}
    reference = {
        "source": "s",
        "comparisons": [
            comparison(355, {**spec, "where": {"world_size": 1}}),
            comparison(167, {**spec, "where": {"world_size": 4}}),
            comparison(None, {"table": "accuracy_delta", "column": "final_delta"}),
        ],
    }
    table = posts.post_vs_run(reference, {"training_runs": runs})
    assert table.loc[0, "run_value"] == pytest.approx(60.0)
    assert math.isnan(table.loc[1, "run_value"]) and table.loc[1, "run_rows"] == 0
    assert math.isnan(table.loc[2, "post_value"]) and math.isnan(table.loc[2, "run_over_post"])
    shown = posts.display_table(table)
    assert shown.loc[1, "run_value"] == "not measured"


def test_no_reference_gives_an_empty_table_that_says_so():
    assert posts.post_vs_run(None, {}).empty
    assert "reproduces no post" in posts.page_note(None)


def test_the_run_tables_are_those_a_comparison_may_name():
    """The findings job hands post_vs_run these tables of the run: each one the schema lets a
    comparison read, and no other."""
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    comparison = schema["properties"]["reference"]["properties"]["comparisons"]["items"]
    assert set(posts.RUN_TABLES) == set(
        comparison["properties"]["run"]["properties"]["table"]["enum"]
    )
