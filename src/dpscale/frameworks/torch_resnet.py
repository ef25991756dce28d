"""PyTorch builder of dpscale's ResNet specification (no torchvision needed)."""

from __future__ import annotations

import torch
from torch import nn

from dpscale.plan.resnet_spec import Block, Conv, ResNetSpec, print_parity_counts


def conv_bn(conv: Conv) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(
            conv.in_channels,
            conv.out_channels,
            conv.kernel,
            stride=conv.stride,
            padding=conv.padding,
            bias=False,
        ),
        nn.BatchNorm2d(conv.out_channels, eps=1e-5, momentum=0.1),
    )


class ResidualBlock(nn.Module):
    def __init__(self, block: Block) -> None:
        super().__init__()
        self.main = nn.ModuleList(conv_bn(conv) for conv in block.convs)
        self.shortcut = conv_bn(block.shortcut) if block.shortcut is not None else nn.Identity()
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = self.shortcut(x)
        out = x
        for index, layer in enumerate(self.main):
            out = layer(out)
            if index < len(self.main) - 1:
                out = self.relu(out)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, spec: ResNetSpec) -> None:
        super().__init__()
        stem: list[nn.Module] = [conv_bn(spec.stem_conv), nn.ReLU(inplace=True)]
        if spec.stem_maxpool:
            stem.append(nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
        self.stem = nn.Sequential(*stem)
        self.stages = nn.Sequential(
            *(nn.Sequential(*(ResidualBlock(b) for b in stage)) for stage in spec.stages())
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(spec.feature_channels, spec.classes)
        self._init_weights()

    def _init_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def build_torch_resnet(spec: ResNetSpec) -> ResNet:
    return ResNet(spec)


def trainable_param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def count_forward_flops(model: nn.Module, spec: ResNetSpec) -> int:
    """FLOPs of convolutions and linear layers, read from the built model's real shapes."""
    total = 0

    def conv_hook(module: nn.Conv2d, _inputs, output: torch.Tensor) -> None:
        nonlocal total
        kh, kw = module.kernel_size
        macs = kh * kw * module.in_channels * module.out_channels // module.groups
        total += 2 * macs * output.shape[-2] * output.shape[-1]

    def linear_hook(module: nn.Linear, _inputs, _output) -> None:
        nonlocal total
        total += 2 * module.in_features * module.out_features

    hooks = []
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            hooks.append(module.register_forward_hook(conv_hook))
        elif isinstance(module, nn.Linear):
            hooks.append(module.register_forward_hook(linear_hook))
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, spec.image_size, spec.image_size))
    for hook in hooks:
        hook.remove()
    return total


def main(argv: list[str] | None = None) -> None:
    print_parity_counts(build_torch_resnet, trainable_param_count, count_forward_flops, argv)


if __name__ == "__main__":
    main()
