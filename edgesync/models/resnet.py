"""ResNet-18 (He et al. 2016, torchvision's) adapted to small 28x28 inputs.

The ImageNet stem (7x7 stride-2 conv + max-pool) would shrink 28x28 to 7x7 before the first block, so
conv1 becomes 3x3 stride 1 padding 1 over `in_channels`, and the max-pool is removed. No pretrained weights.
"""

from __future__ import annotations

from torch import nn


def resnet18_small(num_classes: int = 10, in_channels: int = 1) -> nn.Module:
    """torchvision resnet18(weights=None) with a 3x3 stride-1 stem and no max-pool (≈11.2 M parameters)."""
    import torchvision  # imported here: `import edgesync.models` stays cheap

    model = torchvision.models.resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model
