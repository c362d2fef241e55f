"""FedNova: normalised averaging of unequal local work (Wang, Liu, Liang, Joshi, Poor 2020, "Tackling the
Objective Inconsistency Problem in Heterogeneous Federated Optimization"; docs/algorithms.md, `fednova`).

Every round client i starts from x, runs τ_i local SGD steps (local_sgd's client half: τ_i is the
instruction's `local_steps` if it carries one, else `local_steps`; a client that stops early reports the
steps it ran) and sends Δ_i = y_i − x with `steps` = τ_i. With plain local SGD the paper's a_i is τ_i, so
the server takes each client's normalised direction d_i = −Δ_i/τ_i and, p_i the client's share of the
round's training samples (`weighted`, on by default) or 1/|S|,

    τ_eff = Σ p_i·τ_i,    x ← x − η_g·τ_eff·Σ p_i·d_i.

A client that ran twice the steps moves d_i no further per step, so it pulls x no harder than the others:
FedAvg (x + Σ p_i·Δ_i) would give it twice the weight and drift towards its local optimum. With equal τ_i,
τ_eff·d_i = −Δ_i and FedNova is FedAvg (`local_sgd` with `weighted`), to float rounding — bit for bit when τ
is a power of two.

Choices fixed here: the division by τ_i is the server's, in float64, so the client half and its bytes are
FedAvg's; BatchNorm statistics are averaged with the p_i, as in FedAvg; a client that reports no step
(τ_i = 0) contributes d_i = 0 and its p_i·0 to τ_eff; no local momentum (the paper's a_i for momentum is
not this one) and no all-reduce form.
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, local_epochs_field
from edgesync.algorithms.machinery.base import AlgorithmSpec, Send, Update
from edgesync.algorithms.machinery.participation import ParticipationConfig


class FedNovaConfig(ParticipationConfig):
    name: Literal["fednova"] = "fednova"
    local_steps: int = Field(10, ge=1, description="τ, local SGD steps per round (an instruction may set "
                                                  "fewer or more per client)")
    local_epochs: float | None = local_epochs_field()
    global_lr: float = Field(1.0, gt=0, description="η_g, the server learning rate: x ← x − η_g·τ_eff·Σ p_i·d_i")
    weighted: bool = Field(True, description="p_i = the client's share of the round's training samples; "
                                             "false: 1/|S|")

    @property
    def momentum(self) -> float:
        """LocalRound's local momentum: none, FedNova's a_i = τ_i is plain local SGD's."""
        return 0.0


class FedNovaClient(LocalSGDClient):
    """Local SGD's client half: τ local steps from x, Δ = y − x with `steps` = τ."""

    config: FedNovaConfig


class FedNovaServer(DeltaServer):
    """The barrier round of local SGD with Δ_i/τ_i averaged by p_i and the mean scaled by τ_eff."""

    config: FedNovaConfig

    def _reset(self) -> None:
        super()._reset()
        self.tau_sum = 0.0  # Σ w_i·τ_i of the round; τ_eff = tau_sum / weight_sum

    def on_update(self, client: int, update: Update) -> list[Send]:
        delta = update.tensors.get(self.update_key)
        if delta is not None:  # −d_i = Δ_i/τ_i; the round's weighted mean of these is −Σ p_i·d_i
            tau = int(update.meta.get("steps", 0))
            normalised = delta.double() / tau if tau > 0 else torch.zeros_like(delta, dtype=torch.float64)
            update = Update(tensors={**update.tensors, self.update_key: normalised}, meta=update.meta)
        return super().on_update(client, update)

    def weight(self, update: Update) -> float:
        """p_i's numerator (the client's samples, or 1); called once for each update the round takes in,
        which is where τ_i joins τ_eff's sum."""
        w = super().weight(update)
        self.tau_sum += w * max(0, int(update.meta.get("steps", 0)))
        return w

    def apply(self, mean: torch.Tensor) -> None:
        tau_eff = self.tau_sum / self.weight_sum
        self.params = self.params + (self.config.global_lr * tau_eff) * mean


SPEC = AlgorithmSpec(
    name="fednova", config=FedNovaConfig, server=FedNovaServer, client=FedNovaClient,
    family="synchronous", paper="FedNova (Wang et al. 2020, Tackling the Objective Inconsistency Problem in "
                                "Heterogeneous Federated Optimization)",
)
