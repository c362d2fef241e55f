"""FedAvgM: FedAvg with heavy-ball momentum on the server (Hsu, Qi, Brown 2019, "Measuring the Effects of
Non-Identical Data Distribution for Federated Visual Classification"; docs/algorithms.md, `fedavgm`).

The clients run FedAvg's round (H local SGD steps from x, Δ_i = y_i − x). The server averages
Δ = Σ p_i Δ_i (p_i the client's share of the training samples, `weighted`, on by default here) and steps

    v ← β·v + Δ,   x ← x + η_g·v,

v starting at 0 (β = `server_momentum`, η_g = `global_lr`). β = 0 and η_g = 1 give FedAvg bit for bit.

This is Flower's FedAvgM too (flwr 1.41 `server/strategy/fedavgm.py`): it keeps the pseudo-gradient −Δ,
v ← β·v + (−Δ), x ← x − η_g·v, the same numbers with the sign on the other side, and its first round's
v = −Δ is β·0 − Δ (tests/algorithms/test_fed_adaptive_vs_flower.py).

v is the server half's state: a checkpoint keeps it, and under `aggregation: allreduce` it travels to a
client whose replica is not current (`replica_state`), as SSGD's velocity does.
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.machinery.base import AlgorithmSpec
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig


class FedAvgMConfig(LocalSGDConfig):
    name: Literal["fedavgm"] = "fedavgm"  # type: ignore[assignment]
    server_momentum: float = Field(0.9, ge=0, lt=1, description="β, the server's momentum: v ← β·v + Δ")
    global_lr: float = Field(1.0, gt=0, description="η_g, the server learning rate: x ← x + η_g·v")
    weighted: bool = Field(True, description="weight Δ_i by the client's training samples (FedAvg's p_i)")


class FedAvgMServer(DeltaServer):
    config: FedAvgMConfig

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.velocity = torch.zeros_like(self.params)  # v, the server's momentum buffer

    def apply(self, mean: torch.Tensor) -> None:
        # v ← μ·v + mean, x ← x + ε·v: new tensors (v may have been sent), in one pass
        self.params, self.velocity, _ = model_passes.momentum(self.params, self.velocity, mean,
                                                           self.config.server_momentum, self.config.global_lr)

    def replica_state(self) -> dict[str, torch.Tensor]:
        return {"velocity": self.velocity}

    def load_replica_state(self, tensors: dict[str, torch.Tensor]) -> None:
        self.velocity = tensors["velocity"]


SPEC = AlgorithmSpec(
    name="fedavgm", config=FedAvgMConfig, server=FedAvgMServer, client=LocalSGDClient,
    family="synchronous", paper="FedAvgM (Hsu, Qi, Brown 2019, Measuring the Effects of Non-Identical Data "
                                "Distribution for Federated Visual Classification)",
)
