"""A stand-in for a lab's own package (tests/extensions/): an algorithm on the public contract (edgesync.api) only,
a model builder, and the broken specs the loader must refuse."""
from __future__ import annotations

from typing import Literal

from pydantic import Field
from torch import nn

from edgesync.api import API_VERSION, AlgorithmSpec, ClientAlgorithm, DeltaConfig, DeltaServer, Instruction, LocalRound, Update


class HalfStepConfig(DeltaConfig):
    """FedAvg whose clients take `local_steps` steps at half the learning rate."""

    name: Literal["halfstep"] = "halfstep"
    local_steps: int = Field(2, ge=1, description="local steps per round")


class HalfStepClient(ClientAlgorithm):
    config: HalfStepConfig

    def on_instruction(self, instruction: Instruction) -> Update:
        local = LocalRound(self, Instruction(instruction.tensors, {**instruction.meta, "lr": self.config.lr / 2}))
        for _ in range(self.config.local_steps):
            local.step()
        return local.finish()


HALFSTEP = AlgorithmSpec(name="halfstep", config=HalfStepConfig, server=DeltaServer, client=HalfStepClient,
                         family="synchronous", paper="a test fixture", api_version=API_VERSION)
NO_VERSION = AlgorithmSpec(name="noversion", config=HalfStepConfig, server=DeltaServer, client=HalfStepClient,
                           family="synchronous")
FUTURE = AlgorithmSpec(name="future", config=HalfStepConfig, server=DeltaServer, client=HalfStepClient,
                       family="synchronous", api_version="2.0")
NOT_A_SPEC = {"name": "halfstep"}


def tiny_net(num_classes: int, in_channels: int, width: int = 8) -> nn.Module:
    """A model builder with an argument of its own (`model.args.width`)."""
    return nn.Sequential(nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                         nn.Flatten(), nn.Linear(width * 16, num_classes))


def stripes(root: str | None = None, n: int = 400, classes: int = 4) -> "ArrayDataset":
    """A dataset loader with arguments of its own: 8×8 grayscale images of horizontal stripes, the label the
    stripe's row band — learnable in a few steps."""
    import numpy as np

    from edgesync.api import ArrayDataset

    rng = np.random.default_rng(0)

    def make(count: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, classes, count)
        x = rng.integers(0, 40, (count, 8, 8)).astype(np.uint8)
        for i, label in enumerate(y):
            x[i, 2 * label % 8] = 255
        return x, y.astype(np.int64)

    (train_x, train_y), (test_x, test_y) = make(n), make(n // 4)
    return ArrayDataset(train_x, train_y, test_x, test_y, num_classes=classes, mean=0.2, std=0.3, name="stripes")
