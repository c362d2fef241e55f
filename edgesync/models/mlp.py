"""FedAvg's "2NN" (McMahan et al. 2017, §3): a multilayer perceptron with two hidden layers of 200 ReLU units,
≈0.2 M parameters for 1x28x28 images — as many as the small CNN, so the same bytes on the wire, at a small
fraction of its compute. For experiments whose question is how the clients' time is spent (many runs, each
short), not how far a model can go.

flatten → Linear(784·channels → 200) → ReLU → Linear(200 → 200) → ReLU → Linear(200 → classes).
"""
from __future__ import annotations

import torch
from torch import nn


class TwoLayerMLP(nn.Module):
    def __init__(self, num_classes: int = 10, in_channels: int = 1, input_size: int = 28, hidden: int = 200) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Flatten(),
            nn.Linear(in_channels * input_size * input_size, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)
