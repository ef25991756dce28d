"""Models of torchvision's zoo by name (config models ``torchvision.<name>``), and the FLOPs
one forward pass of such a model does, as torch counts them.

torchvision is imported through torchvision_import (its classification models run beside
CPU-only torch). No weights are downloaded: every model starts from its own initialisation.
"""

from __future__ import annotations

import difflib

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from dpscale.frameworks.torchvision_import import import_torchvision
from dpscale.plan.cell import ModelConfig

ZOO = "torchvision"
NAMES_SHOWN = 6  # of the zoo's names, in the one line a missing name fails with


def build_zoo_model(model: ModelConfig) -> nn.Module:
    """``torchvision.models.get_model(name, weights=None, num_classes=classes)``; a name
    its classification models lack raises one line naming some that exist."""
    if model.zoo != ZOO:
        raise ValueError(f"model {model.name} is not from {ZOO}'s zoo")
    torchvision, _ = import_torchvision()
    known = torchvision.models.list_models(module=torchvision.models)
    if model.zoo_name not in known:
        raise ValueError(
            f"model {model.name}: torchvision {torchvision.__version__} has no classification "
            f"model {model.zoo_name!r}; allowed: e.g. {shown_names(model.zoo_name, known)} "
            "(torchvision.models.list_models())"
        )
    return torchvision.models.get_model(model.zoo_name, weights=None, num_classes=model.classes)


def shown_names(wanted: str, known: list[str]) -> list[str]:
    """The zoo's names nearest the one asked for, else its first ones."""
    near = difflib.get_close_matches(wanted, known, n=NAMES_SHOWN, cutoff=0.5)
    return near or sorted(known)[:NAMES_SHOWN]


def count_forward_flops(model: nn.Module, image_size: int) -> int:
    """Forward FLOPs per sample by torch.utils.flop_counter (convolutions and matrix products,
    a multiply-add counted as two: resnet_spec's convention). Two samples in eval mode, so
    batch norm neither needs a batch nor updates its running statistics; the count halved."""
    was_training = model.training
    model.eval()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(torch.zeros(2, 3, image_size, image_size))
    model.train(was_training)
    return counter.get_total_flops() // 2
