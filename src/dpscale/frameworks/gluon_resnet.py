"""MXNet Gluon (1.9) builder of dpscale's ResNet specification (no model zoo).

Gluon pads convolutions and max pooling symmetrically like PyTorch (max pooling ignores
the padding), and floors output sizes like PyTorch's default, so the layers map one to one.
Every layer is given its input size, so parameter shapes are known without a forward pass.
"""

from __future__ import annotations

import math

import mxnet as mx
from mxnet.gluon import nn

from dpscale.plan.resnet_spec import Block, Conv, ResNetSpec, print_parity_counts

# Gluon's momentum is the weight of the old running value: 0.9 matches torch's momentum=0.1.
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9
# torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu") for convolutions.
CONV_INIT = mx.init.MSRAPrelu(factor_type="out", slope=0.0)


def conv_bn(conv: Conv) -> nn.HybridSequential:
    layer = nn.HybridSequential(prefix="")
    layer.add(
        nn.Conv2D(
            conv.out_channels,
            conv.kernel,
            strides=conv.stride,
            padding=conv.padding,
            use_bias=False,
            in_channels=conv.in_channels,
            weight_initializer=CONV_INIT,
        ),
        nn.BatchNorm(
            axis=1, momentum=BN_MOMENTUM, epsilon=BN_EPSILON, in_channels=conv.out_channels
        ),
    )
    return layer


class ResidualBlock(nn.HybridBlock):
    def __init__(self, block: Block, **kwargs) -> None:
        super().__init__(**kwargs)
        self.depth = len(block.convs)
        with self.name_scope():
            for index, conv in enumerate(block.convs):
                setattr(self, f"conv{index + 1}", conv_bn(conv))
            self.shortcut = conv_bn(block.shortcut) if block.shortcut is not None else None

    def hybrid_forward(self, F, x):  # noqa: N803 (Gluon's signature)
        identity = self.shortcut(x) if self.shortcut is not None else x
        out = x
        for index in range(1, self.depth + 1):
            out = getattr(self, f"conv{index}")(out)
            if index < self.depth:
                out = F.relu(out)
        return F.relu(out + identity)


def _classifier(spec: ResNetSpec) -> nn.Dense:
    # torch.nn.Linear's default init: weight and bias uniform in +-1/sqrt(fan_in).
    bound = 1.0 / math.sqrt(spec.feature_channels)
    return nn.Dense(
        spec.classes,
        in_units=spec.feature_channels,
        weight_initializer=mx.init.Uniform(bound),
        bias_initializer=mx.init.Uniform(bound),
    )


def build_gluon_resnet(spec: ResNetSpec) -> nn.HybridSequential:
    """The Gluon network of `spec` (NCHW input, logits out), not yet initialized."""
    net = nn.HybridSequential(prefix=f"{spec.name}_")
    with net.name_scope():
        net.add(conv_bn(spec.stem_conv), nn.Activation("relu"))
        if spec.stem_maxpool:
            net.add(nn.MaxPool2D(pool_size=3, strides=2, padding=1))
        for stage_index, stage in enumerate(spec.stages(), start=1):
            for block_index, block in enumerate(stage, start=1):
                net.add(ResidualBlock(block, prefix=f"stage{stage_index}_block{block_index}_"))
        net.add(nn.GlobalAvgPool2D(), _classifier(spec))
    return net


def trainable_param_count(model: nn.HybridBlock) -> int:
    params = model.collect_params().values()
    return sum(math.prod(param.shape) for param in params if param.grad_req != "null")


def _blocks(block: nn.Block):
    yield block
    for child in block._children.values():
        yield from _blocks(child)


def count_conv_dense_flops(net: nn.Block, image_size: int, ctx: mx.Context | None = None) -> int:
    """Forward FLOPs per sample of an initialised network, from one imperative forward
    pass's real shapes: its convolutions (grouped ones by their groups) and dense layers, a
    multiply-add counted as two (resnet_spec's convention). Any Gluon block: the shared
    ResNet and the model zoo's."""
    total = 0

    def conv_hook(block: nn.Conv2D, _inputs, output) -> None:
        nonlocal total
        out_channels, in_per_group, kh, kw = block.weight.shape
        total += 2 * kh * kw * in_per_group * out_channels * output.shape[2] * output.shape[3]

    def dense_hook(block: nn.Dense, _inputs, _output) -> None:
        nonlocal total
        out_features, in_features = block.weight.shape
        total += 2 * in_features * out_features

    handles = []
    for block in _blocks(net):
        if isinstance(block, nn.Conv2D):
            handles.append(block.register_forward_hook(conv_hook))
        elif isinstance(block, nn.Dense):
            handles.append(block.register_forward_hook(dense_hook))
    net(mx.nd.zeros((1, 3, image_size, image_size), ctx=ctx)).wait_to_read()
    for handle in handles:
        handle.detach()
    return total


def count_forward_flops(model: nn.HybridBlock, spec: ResNetSpec) -> int:
    """The shared ResNet's FLOPs, counted as for any Gluon block (initialised first)."""
    if not _is_initialized(model):
        model.initialize()
    return count_conv_dense_flops(model, spec.image_size)


def _is_initialized(model: nn.Block) -> bool:
    try:
        for param in model.collect_params().values():
            param.data()
    except (RuntimeError, mx.gluon.parameter.DeferredInitializationError):
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    print_parity_counts(build_gluon_resnet, trainable_param_count, count_forward_flops, argv)


if __name__ == "__main__":
    main()
