"""Models named from a framework's own zoo (config models ``<zoo>.<name>``): the config's
checks, the model key read back, which strategy builds which zoo, and what a result records
of a model no framework built."""

from __future__ import annotations

import math
import re

import jsonschema
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpscale.analysis.answers.answer import model_coverage
from dpscale.analysis.answers.answer_table import short_model
from dpscale.analysis.laws.words import readable_model
from dpscale.analysis.results.tables import cell_row
from dpscale.plan.cell import MODEL_KEY, MODEL_WILDCARD, ZOOS, Cell, Measure, ModelConfig
from dpscale.plan.errors import ConfigError
from dpscale.plan.matrix import collectives_model, expand
from dpscale.plan.resnet_spec import DEPTHS, resnet_spec
from dpscale.plan.result import make_result, now_iso, validate_result
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES

SYSTEM = {"host": "h", "cpu_model": "c", "python": "3.11"}
MOBILENET = {"name": "torchvision.mobilenet_v3_small", "image_size": 32, "classes": 10}


def check(config: dict) -> dict:
    return plan_study(config, STRATEGIES)[0]


def zoo_config(default_config: dict, *models: dict) -> dict:
    default_config.update(models=list(models), modes=["synthetic"], nodes=[1])
    return default_config


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            {"name": "timm.vit_tiny"},
            "models[0].name: zoo 'timm' of 'timm.vit_tiny' is not allowed; allowed: "
            "['torchvision', 'keras', 'gluon']",
        ),
        (
            {"name": "torchvision.mobilenet-v3"},
            "models[0].name: 'torchvision.mobilenet-v3' is not allowed; allowed: "
            "torchvision.<name> with the name in letters, digits, '_' and '.'",
        ),
        (
            {"name": "torchvision.mobilenet_v3_small", "stem": "cifar"},
            "models[0].stem: 'cifar' applies to the shared ResNets only; allowed for "
            "torchvision.mobilenet_v3_small: 'imagenet' (the zoo's own stem)",
        ),
        (
            {"name": "mobilenet_v3_small"},
            "models[0].name: 'mobilenet_v3_small' is not allowed; allowed: "
            f"{sorted(DEPTHS)} or <zoo>.<name> with zoo one of ['torchvision', 'keras', 'gluon']",
        ),
    ],
)
def test_a_model_name_the_config_refuses_gets_one_line_naming_the_field(
    default_config, model, expected
):
    with pytest.raises(ConfigError) as error:
        check(zoo_config(default_config, model))
    assert str(error.value) == expected


def test_a_zoo_model_is_known_by_its_zoo_and_has_no_spec():
    model = ModelConfig("gluon.mobilenetv2_0.25", image_size=64, classes=10)
    assert (model.zoo, model.zoo_name) == ("gluon", "mobilenetv2_0.25")
    assert ModelConfig("resnet50").zoo is None
    with pytest.raises(ValueError, match="gluon's zoo: it has no ResNet spec"):
        model.spec()


@pytest.mark.parametrize(
    "model",
    [
        ModelConfig("torchvision.mobilenet_v3_small", "imagenet", 64, 10),
        ModelConfig("keras.MobileNetV2", "imagenet", 96, 1000),
        ModelConfig("gluon.mobilenetv2_0.25", "imagenet", 32, 2),
        ModelConfig("resnet101", "cifar", 32, 100),
    ],
)
def test_a_model_key_reads_back_as_its_model(model):
    assert ModelConfig.from_key(model.key) == model
    match = MODEL_KEY.fullmatch(model.key)
    assert match["zoo"] == model.zoo
    assert (match["depth"] is None) == (model.zoo is not None)


@given(
    zoo=st.sampled_from(ZOOS),
    name=st.from_regex(r"[A-Za-z][A-Za-z0-9_.]{0,20}", fullmatch=True),
    size=st.integers(16, 1024),
    classes=st.integers(2, 100000),
)
def test_every_zoo_model_key_round_trips(zoo, name, size, classes):
    model = ModelConfig(f"{zoo}.{name}", "imagenet", size, classes)
    assert ModelConfig.from_key(model.key) == model
    # the workflow's rules match the key too (their {model} wildcard)
    assert re.fullmatch(MODEL_WILDCARD, model.key)


def test_a_strategy_skips_a_zoo_it_does_not_build_and_says_what_it_builds(default_config):
    default_config["devices_per_node"] = [1]  # no strategy skips a layout of one device
    config = check(zoo_config(default_config, MOBILENET, {"name": "resnet18"}))
    cells = expand(config, STRATEGIES)
    zoo_cells = [c for c in cells if c.model.zoo == "torchvision"]
    for cell in zoo_cells:
        builds = STRATEGIES[cell.strategy].model_zoo
        if builds == "torchvision":
            assert cell.skip_reason is None or "zoo" not in cell.skip_reason
        else:
            also = f" and {builds}.* models" if builds else ""
            assert cell.skip_reason == (
                f"model torchvision.mobilenet_v3_small is from torchvision's zoo; "
                f"{cell.strategy} builds the shared ResNets{also}"
            )
    assert {c.strategy for c in zoo_cells if c.skip_reason is None} >= {"torch-ddp"}
    # the shared ResNet is no strategy's zoo model: no cell of it is skipped for its model
    assert not any("zoo" in (c.skip_reason or "") for c in cells if c.model.zoo is None)


def test_collectives_size_their_messages_by_the_largest_shared_resnet(default_config):
    config = check(zoo_config(default_config, MOBILENET, {"name": "resnet50"}))
    assert collectives_model(config).name == "resnet50"
    config = check(zoo_config(default_config, MOBILENET))
    with pytest.raises(ConfigError, match="^modes: collectives sizes its messages by"):
        collectives_model(config)


def zoo_cell() -> Cell:
    model = ModelConfig(MOBILENET["name"], "imagenet", 32, 10)
    return Cell("test", "horovod-tf", model, "synthetic", 1, 1, 4, measure=Measure())


def test_a_skipped_zoo_models_result_records_its_counts_as_unknown():
    result = make_result(zoo_cell(), "skipped", started_at=now_iso(), system=SYSTEM, reason="r")
    validate_result(result)
    assert result["model_info"] == {
        "trainable_params": None,
        "forward_flops_per_sample": None,
        "train_flops_per_sample": None,
    }
    row = cell_row(result)
    assert math.isnan(row["trainable_params"]) and math.isnan(row["train_flops_per_sample"])
    assert math.isnan(row["achieved_tflop_s"])


def test_a_built_zoo_models_counts_are_the_frameworks_and_training_is_three_forwards():
    result = make_result(
        zoo_cell(),
        "failed",
        started_at=now_iso(),
        system=SYSTEM,
        reason="r",
        trainable_params=1_528_106,
        forward_flops=4_339_584,
    )
    validate_result(result)
    assert result["model_info"]["train_flops_per_sample"] == 3 * 4_339_584
    assert result["model_info"]["trainable_params"] == 1_528_106
    result["model_info"]["forward_flops_per_sample"] = 0
    with pytest.raises(jsonschema.ValidationError):
        validate_result(result)


def test_a_shared_resnets_flops_still_come_from_its_spec():
    cell = Cell(
        "test", "torch-ddp", ModelConfig("resnet18", "imagenet", 64, 10), "synthetic", 1, 1, 4
    )
    info = make_result(cell, "skipped", started_at=now_iso(), system=SYSTEM, reason="r")[
        "model_info"
    ]
    assert (
        info["forward_flops_per_sample"]
        == resnet_spec("resnet18", "imagenet", 64, 10).forward_flops()
    )


def test_the_reports_words_name_a_zoo_model_as_its_zoo_spells_it():
    key = ModelConfig("keras.MobileNetV2", "imagenet", 32, 10).key
    assert readable_model(key) == "keras.MobileNetV2 (32 px, 10 classes)"
    assert short_model(key) == "keras.MobileNetV2 32 px"
    assert short_model("resnet18-imagenet64-c10") == "ResNet-18 64 px"


def test_the_answer_says_once_which_strategies_measured_a_model_not_all_did():
    cells = pd.DataFrame(
        {
            "strategy": [
                "torch-ddp",
                "torch-dp",
                "horovod-tf",
                "torch-ddp",
                "torch-dp",
                "horovod-tf",
            ],
            "model": ["m-zoo"] * 3 + ["r18"] * 3,
            "status": ["ok", "ok", "skipped", "ok", "ok", "ok"],
        }
    )
    assert model_coverage(cells) == (
        "Not every strategy measured every model: m-zoo by torch-ddp and torch-dp only. "
        "Each model's answer compares only the strategies that measured it."
    )
    assert model_coverage(cells[cells["model"] == "r18"]) == ""
