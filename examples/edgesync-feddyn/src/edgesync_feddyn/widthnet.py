"""WidthNet: a small CNN whose width is an argument, the width scaling of HeteroFL (Diao et al., ICLR 2021,
"HeteroFL: Computation and Communication Efficient Federated Learning for Heterogeneous Clients"), one width
per run.

    model: {name: widenet, args: {width: 8}}

conv 3×3 (width) → ReLU → maxpool 2 → conv 3×3 (2·width) → ReLU → maxpool 2 → average pool to 4×4 →
Linear(2·width·16 → classes). Every layer's channels scale with `width`: the convolutions' parameters and compute
with width², the classifier's with width. No BatchNorm (nothing to average but the parameters); any input of
side ≥ 4 works.

Sub-model aggregation across widths — HeteroFL proper, where a slow device trains a narrower slice of the
global model and the server averages each parameter over the clients whose slice holds it — is not
implemented: in the extension contract every client builds the one model the scenario names and every update
is one flat vector the size of that model (the coordinator's update check refuses any other size). Giving each
device profile its own width would need a contract change: a model per client, and updates whose size and
slice of the global model the server half declares per client.
"""
from __future__ import annotations

import torch
from torch import nn


class WidthNet(nn.Module):
    """`WidthNet(num_classes, in_channels, width)`: the edgesync.models builder signature, `width` from
    `model.args`."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1, width: int = 16) -> None:
        super().__init__()
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"WidthNet: width must be a whole number ≥ 1 (got {width!r})")
        self.width = width
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, kernel_size=3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, kernel_size=3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(4),  # (N, 2·width, 4, 4) whatever the input's side
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(2 * width * 16, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))
