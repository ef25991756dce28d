"""The CPU kernels each framework ran (result ``system.cpu_kernels``): recorded in words,
chosen by the adapter's own option before the framework is imported, and named in one line
where the strategies of one answer ran different ones."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from conftest import make_cell
from dpscale.analysis.answers.answer_table import below_table
from dpscale.analysis.answers.kernels import kernels_by_strategy, kernels_line
from dpscale.analysis.results.tables import kernels_words
from dpscale.launch import launcher
from dpscale.launch.setup.interpreters import Interpreter
from dpscale.plan.errors import ConfigError
from dpscale.plan.study import plan_study
from dpscale.registry import STRATEGIES, strategy

TF_ON = {"library": "oneDNN", "onednn": True, "why": "TF_ENABLE_ONEDNN_OPTS=1"}
TF_DEFAULT = {"library": "Eigen", "onednn": False, "why": "TensorFlow's default on this CPU"}
TORCH = {
    "library": "oneDNN",
    "onednn": True,
    "why": "torch's default",
    "isa": "AVX2",
    "version": "3.12.0",
}


def test_kernels_read_as_words_and_unrecorded_stays_unknown():
    assert kernels_words(TORCH) == "oneDNN 3.12.0, AVX2 (torch's default)"
    assert kernels_words(TF_DEFAULT) == "Eigen (TensorFlow's default on this CPU)"
    assert kernels_words({"library": "MKL-DNN", "onednn": True, "blas": "OpenBLAS"}) == (
        "MKL-DNN, OpenBLAS"
    )
    assert kernels_words(None) is None and kernels_words({}) is None


def cells(*rows: tuple[str, dict | None, str]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "strategy": name,
                "status": status,
                "cpu_kernels": kernels_words(kernels),
                "cpu_onednn": (kernels or {}).get("onednn"),
            }
            for name, kernels, status in rows
        ]
    )


def test_the_answer_says_in_one_line_which_framework_ran_without_onednn():
    table = cells(("horovod-tf", TF_DEFAULT, "ok"), ("torch-ddp", TORCH, "ok"))
    line = kernels_line(table)
    assert "\n" not in line
    assert "horovod-tf ran without oneDNN" in line
    assert "Eigen (TensorFlow's default on this CPU)" in line
    assert "torch-ddp: oneDNN 3.12.0, AVX2" in line
    assert line in below_table(pd.DataFrame(), table)


@pytest.mark.parametrize(
    "rows",
    [
        (("horovod-tf", TF_ON, "ok"), ("torch-ddp", TORCH, "ok")),  # the same library
        (("horovod-tf", None, "ok"), ("torch-ddp", TORCH, "ok")),  # one not recorded
        (("horovod-tf", TF_DEFAULT, "failed"), ("torch-ddp", TORCH, "ok")),  # not measured
    ],
)
def test_no_line_where_the_kernels_agree_or_are_unknown(rows):
    assert kernels_line(cells(*rows)) == ""


def test_each_strategy_s_kernels_are_listed_once():
    table = cells(("torch-ddp", TORCH, "ok"), ("torch-ddp", TORCH, "ok"), ("x", None, "ok"))
    assert kernels_by_strategy(table) == {"torch-ddp": "oneDNN 3.12.0, AVX2 (torch's default)"}


@pytest.mark.parametrize(
    ("accelerator", "options", "expected"),
    [
        ("cpu", (), "1"),  # the default: as TensorFlow's CPU guide advises
        ("cpu", (("tensorflow_onednn", "tensorflow_default"),), None),
        ("cuda", (), None),  # cuDNN's math: the variable has no say
    ],
)
def test_horovod_tf_ranks_start_with_onednn_on_unless_told(accelerator, options, expected):
    cell = make_cell("horovod-tf", devices=2, accelerator=accelerator, options=options)
    env = launcher.runner_env(cell, Interpreter("tf-horovod", (sys.executable,)))
    assert env.get("TF_ENABLE_ONEDNN_OPTS") == expected


def test_other_strategies_set_no_kernel_variable():
    for name in ("torch-ddp", "mxnet-dist"):
        assert strategy(name).rank_environment(make_cell(name, devices=2)) == {}


def check(config: dict):
    return plan_study(config, STRATEGIES)


def test_a_bad_kernel_option_is_one_line_naming_it_and_its_values(default_config):
    default_config["tensorflow_onednn"] = "off"
    with pytest.raises(ConfigError) as error:
        check(default_config)
    message = str(error.value)
    assert "\n" not in message and message.startswith("tensorflow_onednn: 'off'"), message
    assert "'on'" in message and "'tensorflow_default'" in message, message


def test_the_option_reaches_only_horovod_tf_cells(default_config):
    default_config["tensorflow_onednn"] = "tensorflow_default"
    _, cells = check(default_config)
    carried = {c.strategy for c in cells if "tensorflow_onednn" in dict(c.options)}
    assert carried == {"horovod-tf"}
