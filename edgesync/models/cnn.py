"""Small CNN for 1x28x28 images (≈0.18 M parameters), the LeNet-style model of the FedAvg experiments.

conv 5x5 (32) → ReLU → maxpool 2 → conv 5x5 (64) → ReLU → maxpool 2 → Linear(64·4·4 → 128) → ReLU → Linear(128 → classes).
"""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    """Two conv layers and two linear layers; `input_size` is the side of the square input (28 for MNIST)."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1, input_size: int = 28) -> None:
        super().__init__()
        side = ((input_size - 4) // 2 - 4) // 2  # 28 -> 24 -> 12 -> 8 -> 4
        if side < 1:
            raise ValueError(f"SmallCNN needs inputs of side >= 16, got {input_size}")
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=5),  # (N, 32, 24, 24)
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),  # (N, 32, 12, 12)
            nn.Conv2d(32, 64, kernel_size=5),  # (N, 64, 8, 8)
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),  # (N, 64, 4, 4)
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),  # (N, 1024)
            nn.Linear(64 * side * side, 128),
            nn.ReLU(inplace=True),
            nn.Linear(128, num_classes),  # (N, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
