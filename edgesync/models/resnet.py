"""ResNet-18 (He et al. 2016, torchvision's) adapted to small inputs: 28x28 grayscale, 32x32 colour (CIFAR).

The ImageNet stem (7x7 stride-2 conv + max-pool) would shrink 32x32 to 8x8 (28x28 to 7x7) before the first
block, so conv1 becomes 3x3 stride 1 padding 1 over `in_channels` (1 for Fashion-MNIST, 3 for CIFAR-10),
and the max-pool is removed: the stem ResNet-18 is usually trained with on CIFAR-10 (He et al.'s own CIFAR
networks, §4.2, start with a 3x3 conv and no pooling too). The four stages then see 32, 16, 8 and 4 pixels
a side (28, 14, 7, 4 for 28x28); the global average pool makes the classifier independent of the input
size. No pretrained weights.
"""

from __future__ import annotations

from torch import nn


def resnet18_small(num_classes: int = 10, in_channels: int = 1) -> nn.Module:
    """torchvision resnet18(weights=None) with a 3x3 stride-1 stem and no max-pool (≈11.2 M parameters:
    11 173 962 for 3 channels and 10 classes)."""
    import torchvision  # imported here: `import edgesync.models` stays cheap

    model = torchvision.models.resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model
