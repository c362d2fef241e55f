"""The model (EdgeSync's small CNN, by torch) and this node's data: a slice of Fashion-MNIST by partition."""
from __future__ import annotations

import torch
from torch import nn

from edgesync.data.datasets import load_dataset, to_tensor
from edgesync.models import build_model

TRAIN_PER_NODE = 500


def load_model() -> nn.Module:
    return build_model("cnn", num_classes=10, in_channels=1)


def load_data(partition_id: int, num_partitions: int):
    data = load_dataset("fashion_mnist")
    start = partition_id * TRAIN_PER_NODE
    x = to_tensor(data.train_x[start:start + TRAIN_PER_NODE], data.mean, data.std)
    y = torch.from_numpy(data.train_y[start:start + TRAIN_PER_NODE]).long()
    return x, y


def train(model: nn.Module, x, y, steps: int, lr: float, batch_size: int) -> float:
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    g = torch.Generator().manual_seed(0)
    total = 0.0
    for _ in range(steps):
        idx = torch.randint(0, len(x), (batch_size,), generator=g)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        total += loss.item()
    return total / max(1, steps)


@torch.no_grad()
def test(model: nn.Module, x, y) -> tuple[float, float]:
    model.eval()
    out = model(x)
    return nn.functional.cross_entropy(out, y).item(), (out.argmax(1) == y).float().mean().item()
