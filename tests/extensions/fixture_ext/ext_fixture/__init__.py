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
