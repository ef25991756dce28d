"""Models named from a framework's zoo, in that framework's environment: a cell of one run
by the real launcher, a name the zoo lacks, and each framework's FLOP counter checked on the
shared ResNet-50 against its specification (resnet_spec.forward_flops)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dpscale.launch import launcher
from dpscale.launch.setup.envs import ensure_env
from dpscale.plan.cell import Cell, Measure, ModelConfig
from dpscale.plan.result import read_result

pytestmark = [pytest.mark.slow, pytest.mark.side_by_side]

SRC = Path(__file__).resolve().parents[2] / "src"
MEASURE = Measure(warmup_steps=1, windows=2, steps_per_window=2, timeout_s=300)


def launch(tmp_path: Path, strategy: str, env: str, model: ModelConfig, devices: int) -> dict:
    """A synthetic cell of ``model`` (1 node, batch 2) launched; its result, schema-checked."""
    cell = Cell("test", strategy, model, "synthetic", 1, devices, 2, measure=MEASURE)
    out = cell.result_path(tmp_path / "results")
    status = launcher.launch(cell, out, ensure_env(env), tmp_path / "cell.log")
    result = read_result(out)
    assert status == result["status"]
    return result


def run_probe(env: str, probe: str) -> dict:
    """``probe``'s last line of JSON, run by ``env``'s interpreter with dpscale importable."""
    python = ensure_env(env) / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", probe],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# torch-ddp measuring a torchvision model: tests/e2e/test_folder_study.py, through Snakemake


def test_a_name_torchvision_lacks_fails_the_cell_naming_some_it_has(tmp_path: Path):
    model = ModelConfig("torchvision.mobilenet_v9", "imagenet", 32, 10)
    result = launch(tmp_path, "torch-dp", "torch", model, devices=1)
    assert result["status"] == "failed"
    assert "has no classification model 'mobilenet_v9'" in result["reason"]
    assert "mobilenet_v3_small" in result["reason"]
    assert result["model_info"]["forward_flops_per_sample"] is None


TORCH_COUNTS = """
import json
from dpscale.frameworks import torch_zoo
from dpscale.frameworks.torch_resnet import build_torch_resnet, trainable_param_count
from dpscale.plan.cell import ModelConfig
from dpscale.plan.resnet_spec import resnet_spec
spec = resnet_spec("resnet50", "imagenet", 64, 10)
ours = build_torch_resnet(spec)
theirs = torch_zoo.build_zoo_model(ModelConfig("torchvision.resnet50", "imagenet", 64, 10))
print(json.dumps({
    "spec": [spec.trainable_params(), spec.forward_flops()],
    "ours": [trainable_param_count(ours), torch_zoo.count_forward_flops(ours, 64)],
    "torchvision": [trainable_param_count(theirs), torch_zoo.count_forward_flops(theirs, 64)],
}))
"""


def test_torchs_flop_counter_agrees_with_the_spec_on_resnet50():
    """FlopCounterMode counts convolutions and matrix products as the spec does (a
    multiply-add is two FLOPs, nothing else counted): on dpscale's ResNet-50 and on
    torchvision's (the same v1.5 network) the counts are the spec's."""
    counts = run_probe("torch", TORCH_COUNTS)
    assert counts["ours"] == counts["spec"]
    assert counts["torchvision"] == counts["spec"]


KERAS_COUNTS = """
import json
from dpscale.frameworks import keras_zoo, tf_ops
from dpscale.frameworks.keras_resnet import build_keras_resnet, count_forward_flops
from dpscale.plan.cell import Cell, ModelConfig
from dpscale.plan.resnet_spec import resnet_spec
spec = resnet_spec("resnet50", "imagenet", 64, 10)
ours = build_keras_resnet(spec, channels_last=True)
# a horovod-tf cell of a Keras application: the model and counts its ranks build
zoo = Cell("t", "horovod-tf", ModelConfig("keras.MobileNetV2", "imagenet", 32, 10),
           "synthetic", 1, 1, 2)
_, counts = tf_ops.build_model(zoo)
print(json.dumps({"spec": spec.forward_flops(), "layers": count_forward_flops(ours, spec),
                  "profiler": keras_zoo.count_forward_flops(ours),
                  "zoo_params": counts.trainable_params, "zoo_flops": counts.forward_flops}))
"""


def test_tensorflows_flop_counter_agrees_with_the_spec_on_resnet50():
    """TensorFlow's profiler counts the convolutions and the classifier as the spec does,
    plus element-wise operations of the graph the spec leaves out (the residual additions
    among them): within 1% of the spec on dpscale's Keras ResNet-50, never below it."""
    counts = run_probe("tf-horovod", KERAS_COUNTS)
    assert counts["layers"] == counts["spec"]
    assert counts["spec"] <= counts["profiler"] <= 1.01 * counts["spec"]
    # horovod-tf builds keras.MobileNetV2 (width 1) by name: about 2.2 M parameters at 10
    # classes, some MFLOPs at 32 px (its whole cell runs like a ResNet's: tf_ops.build_model)
    assert 1_500_000 < counts["zoo_params"] < 3_000_000
    assert 1_000_000 < counts["zoo_flops"] < 50_000_000


def test_mxnet_device_measures_a_gluon_zoo_model_and_records_its_counts(tmp_path: Path):
    model = ModelConfig("gluon.mobilenetv2_0.25", "imagenet", 32, 10)
    result = launch(tmp_path, "mxnet-device", "mxnet", model, devices=1)
    log = (tmp_path / "cell.log").read_text()[-3000:]
    assert result["status"] == "ok", (result["reason"], log)
    info = result["model_info"]
    # MobileNetV2 at width 0.25: about a quarter of a million parameters at 10 classes
    assert 100_000 < info["trainable_params"] < 1_000_000
    assert 100_000 < info["forward_flops_per_sample"] < 20_000_000
    assert info["train_flops_per_sample"] == 3 * info["forward_flops_per_sample"]


GLUON_COUNTS = """
import json
import mxnet as mx
from dpscale.frameworks.gluon_resnet import build_gluon_resnet, count_conv_dense_flops
from dpscale.plan.resnet_spec import resnet_spec
spec = resnet_spec("resnet50", "imagenet", 64, 10)
ours = build_gluon_resnet(spec)
ours.initialize()
print(json.dumps({"spec": spec.forward_flops(),
                  "counted": count_conv_dense_flops(ours, 64, mx.cpu())}))
"""


def test_gluons_flop_counter_agrees_with_the_spec_on_resnet50():
    """The count over convolutions and dense layers is the spec's on dpscale's Gluon
    ResNet-50: both count the same layers, a multiply-add as two."""
    counts = run_probe("mxnet", GLUON_COUNTS)
    assert counts["counted"] == counts["spec"]
