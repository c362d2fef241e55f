"""A VGG-like network for 28x28 inputs whose parameters sit almost all in one late layer (≈1.66 M
parameters, 96% of them in the first fully connected layer).

It stands in for VGG-16 in SHAT's parameter-sharding experiment (shat.txt §4.4, Fig. 6(b)): there a few
layers hold over 90% of the parameters, so sharding by whole layers leaves one server with nearly all
the traffic. Four 3x3 conv layers in two VGG blocks, then two linear layers:

conv 3x3 (32) → ReLU → conv 3x3 (32) → ReLU → maxpool 2 → conv 3x3 (64) → ReLU → conv 3x3 (64) → ReLU
→ maxpool 2 → Linear(64·7·7 → 512) → ReLU → Linear(512 → classes).
"""

from __future__ import annotations

import torch
from torch import nn


def _block(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]


class SmallVGG(nn.Module):
    """`input_size` is the side of the square input (28: two poolings leave 7x7)."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1, input_size: int = 28) -> None:
        super().__init__()
        side = input_size // 4
        if side < 1:
            raise ValueError(f"SmallVGG needs inputs of side >= 4, got {input_size}")
        self.features = nn.Sequential(*_block(in_channels, 32), *_block(32, 64))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(64 * side * side, 512), nn.ReLU(inplace=True),
                                        nn.Linear(512, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
