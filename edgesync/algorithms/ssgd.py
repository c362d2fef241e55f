"""SSGD / BSP: synchronous mini-batch SGD with a barrier every round (docs/algorithms.md, `ssgd`).

Every client computes one gradient on the same θ; when all live clients have reported, the master
steps θ ← θ − η·mean_i(g_i) (heavy-ball momentum on the master if `momentum` > 0) and broadcasts θ.
BatchNorm statistics are averaged over the clients (the round itself is `rounds.RoundServer`).
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.machinery.base import AlgorithmSpec
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.machinery.rounds import RoundConfig, RoundServer


class SSGDConfig(RoundConfig):
    name: Literal["ssgd"] = "ssgd"
    momentum: float = Field(0.0, ge=0, lt=1, description="master momentum m")


class SSGDServer(RoundServer):
    config: SSGDConfig
    update_key = "grad"

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.velocity: torch.Tensor | None = None

    def apply(self, mean: torch.Tensor) -> None:
        # v is lr-free: no momentum correction needed; v and θ new tensors (either may have been sent), one pass
        if self.config.momentum and self.velocity is not None:
            self.params, self.velocity, _ = model_passes.momentum(self.params, self.velocity, mean, self.config.momentum,
                                                               -self.round_lr)
            return
        if self.config.momentum:
            self.velocity = mean
        self.params, _ = model_passes.step(self.params, mean, -self.round_lr)

    def replica_state(self) -> dict[str, torch.Tensor]:
        return {} if self.velocity is None else {"velocity": self.velocity}

    def load_replica_state(self, tensors: dict[str, torch.Tensor]) -> None:
        self.velocity = tensors.get("velocity")


SPEC = AlgorithmSpec(
    name="ssgd", config=SSGDConfig, server=SSGDServer, client=GradientClient,
    family="synchronous", paper="Bulk-synchronous parallel SGD (survey §3.3.1)",
)
