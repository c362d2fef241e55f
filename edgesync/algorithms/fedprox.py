"""FedProx: FedAvg whose clients are held near the global model (Li et al. 2020, "Federated Optimization in
Heterogeneous Networks"; docs/algorithms.md, `fedprox`).

Each round a client starts from the global model x and runs H local SGD steps on its loss plus the proximal
term μ/2·‖y − x‖², so every step's gradient gets μ·(y − x) added (local_sgd's `LocalRound`, `proximal_mu`),
before the local momentum, if any. It sends Δ_i = y_i − x and the server aggregates exactly as FedAvg:
x ← x + ε·Σ p_i Δ_i, p_i the client's share of the training samples (`weighted`, on by default here).

With μ = 0 a client's steps are local SGD's, operation for operation, and FedProx is FedAvg bit for bit.
The paper's inexact local solutions (a client stopping after fewer steps) are what the runtimes' per-round
step budgets already give (`local_steps` in an instruction); nothing here drops stragglers.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgesync.algorithms.machinery.base import AlgorithmSpec
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig


class FedProxConfig(LocalSGDConfig):
    name: Literal["fedprox"] = "fedprox"  # type: ignore[assignment]
    mu: float = Field(0.01, ge=0, description="μ, the proximal coefficient: each local gradient gets μ·(y − x)")
    weighted: bool = Field(True, description="weight Δ_i by the client's training samples (FedAvg's p_i)")


class FedProxClient(LocalSGDClient):
    """Local SGD's client with the proximal term μ·(y − x) in every local gradient."""

    config: FedProxConfig

    @property
    def proximal_mu(self) -> float:
        return self.config.mu


SPEC = AlgorithmSpec(
    name="fedprox", config=FedProxConfig, server=DeltaServer, client=FedProxClient,
    family="synchronous", paper="FedProx (Li et al. 2020, Federated Optimization in Heterogeneous Networks)",
)
