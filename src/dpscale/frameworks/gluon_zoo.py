"""Models of Gluon's model zoo by name (config models ``gluon.<name>``), and the FLOPs one
forward pass of such a model does, counted over its convolutions and dense layers.

MXNet 1.9: ``mxnet.gluon.model_zoo.vision.get_model(name, pretrained=False,
classes=...)``, never with downloaded weights. The zoo's layers take their input shapes at
the first forward pass, so the model is counted after one.
"""

from __future__ import annotations

import difflib

import mxnet as mx
from mxnet.gluon import nn
from mxnet.gluon.model_zoo import vision

from dpscale.plan.cell import ModelConfig

ZOO = "gluon"
NAMES_SHOWN = 6  # of the zoo's names, in the one line a missing name fails with
ZOO_OPTIONS = "Available options are"  # what get_model's refusal lists its names after


def build_zoo_model(model: ModelConfig) -> nn.HybridBlock:
    """``get_model(name, pretrained=False, classes=classes)``, not initialised; a name the
    zoo lacks raises one line naming some that exist."""
    if model.zoo != ZOO:
        raise ValueError(f"model {model.name} is not from {ZOO}'s zoo")
    try:
        return vision.get_model(model.zoo_name, pretrained=False, classes=model.classes)
    except ValueError as refusal:
        text = str(refusal)
        if ZOO_OPTIONS not in text:
            raise
        known = [n.strip() for n in text.split(ZOO_OPTIONS, 1)[1].split("\n\t") if n.strip()]
        near = difflib.get_close_matches(model.zoo_name, known, n=NAMES_SHOWN, cutoff=0.5)
        raise ValueError(
            f"model {model.name}: Gluon's model zoo (MXNet {mx.__version__}) has no model "
            f"{model.zoo_name!r}; allowed: e.g. {near or known[:NAMES_SHOWN]}"
        ) from None
