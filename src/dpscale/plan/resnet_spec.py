"""One framework-neutral ResNet v1.5 specification.

Every framework builder walks the same `ResNetSpec`, and the parameter count and
FLOPs of a model are computed from it, so that a comparison across frameworks
compares the same network.  v1.5 (torchvision's ResNets) puts the stride of a
bottleneck on its 3x3 convolution; convolutions have no bias; the classifier has.

FLOPs count a multiply-add as two floating-point operations; only convolutions
and the classifier are counted (batch norm, ReLU, pooling and the residual add
are <1% of the total).  Training FLOPs are taken as 3x forward (forward, plus
gradients for activations and for weights).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

BlockKind = Literal["basic", "bottleneck"]
Stem = Literal["imagenet", "cifar"]

STAGE_WIDTHS = (64, 128, 256, 512)
STAGE_STRIDES = (1, 2, 2, 2)
EXPANSION: dict[BlockKind, int] = {"basic": 1, "bottleneck": 4}

# Adding a depth is one line here.
DEPTHS: dict[str, tuple[BlockKind, tuple[int, int, int, int]]] = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
    "resnet101": ("bottleneck", (3, 4, 23, 3)),
    "resnet152": ("bottleneck", (3, 8, 36, 3)),
}
STEMS: tuple[Stem, ...] = ("imagenet", "cifar")
TRAIN_TO_FORWARD_FLOPS = 3


@dataclass(frozen=True)
class Conv:
    """A bias-free 2-D convolution followed by batch norm."""

    in_channels: int
    out_channels: int
    kernel: int
    stride: int
    padding: int

    def params(self) -> int:
        weights = self.kernel * self.kernel * self.in_channels * self.out_channels
        batch_norm = 2 * self.out_channels
        return weights + batch_norm

    def output_size(self, size: int) -> int:
        return (size + 2 * self.padding - self.kernel) // self.stride + 1

    def forward_flops(self, in_size: int) -> int:
        out = self.output_size(in_size)
        return 2 * self.kernel * self.kernel * self.in_channels * self.out_channels * out * out


@dataclass(frozen=True)
class Block:
    """One residual block: its main-path convolutions and optional projection shortcut.

    The last convolution of the main path is followed by the residual add, then ReLU;
    every other convolution is followed by ReLU.
    """

    convs: tuple[Conv, ...]
    shortcut: Conv | None

    @property
    def stride(self) -> int:
        return max(conv.stride for conv in self.convs)


@dataclass(frozen=True)
class ResNetSpec:
    name: str
    stem: Stem
    image_size: int
    classes: int
    block_kind: BlockKind
    blocks_per_stage: tuple[int, int, int, int]

    @property
    def stem_conv(self) -> Conv:
        if self.stem == "imagenet":
            return Conv(3, 64, kernel=7, stride=2, padding=3)
        return Conv(3, 64, kernel=3, stride=1, padding=1)

    @property
    def stem_maxpool(self) -> bool:
        """ImageNet stem: 3x3 max pool, stride 2, padding 1 after the first conv."""
        return self.stem == "imagenet"

    @property
    def feature_channels(self) -> int:
        return STAGE_WIDTHS[-1] * EXPANSION[self.block_kind]

    def stages(self) -> Iterator[list[Block]]:
        in_channels = 64
        for width, stride, count in zip(
            STAGE_WIDTHS, STAGE_STRIDES, self.blocks_per_stage, strict=True
        ):
            stage = []
            for index in range(count):
                block_stride = stride if index == 0 else 1
                block = _make_block(self.block_kind, in_channels, width, block_stride)
                stage.append(block)
                in_channels = width * EXPANSION[self.block_kind]
            yield stage

    def blocks(self) -> Iterator[Block]:
        for stage in self.stages():
            yield from stage

    def trainable_params(self) -> int:
        total = self.stem_conv.params()
        for block in self.blocks():
            total += sum(conv.params() for conv in block.convs)
            if block.shortcut is not None:
                total += block.shortcut.params()
        return total + self.feature_channels * self.classes + self.classes

    def forward_flops(self) -> int:
        """Forward FLOPs for one sample at `image_size`."""
        size = self.image_size
        total = self.stem_conv.forward_flops(size)
        size = self.stem_conv.output_size(size)
        if self.stem_maxpool:
            size = (size + 2 - 3) // 2 + 1
        for block in self.blocks():
            block_in = size
            for conv in block.convs:
                total += conv.forward_flops(size)
                size = conv.output_size(size)
            if block.shortcut is not None:
                total += block.shortcut.forward_flops(block_in)
        return total + 2 * self.feature_channels * self.classes

    def train_flops(self) -> int:
        return TRAIN_TO_FORWARD_FLOPS * self.forward_flops()

    def summary(self) -> dict[str, int | str]:
        return {
            "name": self.name,
            "stem": self.stem,
            "image_size": self.image_size,
            "classes": self.classes,
            "trainable_params": self.trainable_params(),
            "forward_flops_per_sample": self.forward_flops(),
            "train_flops_per_sample": self.train_flops(),
        }


def _make_block(kind: BlockKind, in_channels: int, width: int, stride: int) -> Block:
    out_channels = width * EXPANSION[kind]
    if kind == "basic":
        convs = (
            Conv(in_channels, width, kernel=3, stride=stride, padding=1),
            Conv(width, width, kernel=3, stride=1, padding=1),
        )
    else:
        convs = (
            Conv(in_channels, width, kernel=1, stride=1, padding=0),
            Conv(width, width, kernel=3, stride=stride, padding=1),
            Conv(width, out_channels, kernel=1, stride=1, padding=0),
        )
    needs_projection = stride != 1 or in_channels != out_channels
    shortcut = Conv(in_channels, out_channels, 1, stride, 0) if needs_projection else None
    return Block(convs=convs, shortcut=shortcut)


def resnet_spec(
    name: str, stem: str = "imagenet", image_size: int = 224, classes: int = 1000
) -> ResNetSpec:
    if name not in DEPTHS:
        raise ValueError(f"model name: {name!r} is not one of {sorted(DEPTHS)}")
    if stem not in STEMS:
        raise ValueError(f"model stem: {stem!r} is not one of {list(STEMS)}")
    kind, counts = DEPTHS[name]
    return ResNetSpec(name, stem, image_size, classes, kind, counts)  # type: ignore[arg-type]


PARITY_DEPTHS = ("resnet18", "resnet50", "resnet101")
PARITY_VARIANTS = (("imagenet", 224, 1000), ("imagenet", 224, 10), ("cifar", 32, 10))


def parity_specs() -> dict[str, ResNetSpec]:
    """Specs every framework builder is checked against, keyed like ``resnet18-imagenet224-c10``."""
    specs = {}
    for name in PARITY_DEPTHS:
        for stem, size, classes in PARITY_VARIANTS:
            specs[f"{name}-{stem}{size}-c{classes}"] = resnet_spec(name, stem, size, classes)
    return specs


def print_parity_counts(
    build: Callable[[ResNetSpec], object],
    count_params: Callable[[object], int],
    count_flops: Callable[[object, ResNetSpec], int],
    argv: list[str] | None = None,
    after_each: Callable[[], None] = lambda: None,
) -> None:
    """A builder's ``--json`` entry point: counts of every parity model, built for real."""
    parser = argparse.ArgumentParser(description="Parameter and FLOP counts of the built models")
    parser.add_argument("--json", action="store_true", required=True)
    parser.parse_args(argv)
    counts = {}
    for key, spec in parity_specs().items():
        model = build(spec)
        counts[key] = {
            "trainable_params": count_params(model),
            "forward_flops": count_flops(model, spec),
        }
        after_each()
    print(json.dumps(counts, sort_keys=True))
