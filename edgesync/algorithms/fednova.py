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

from pydantic import Field

from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, local_epochs_field
from edgesync.algorithms.machinery.base import AlgorithmSpec
from edgesync.algorithms.machinery.stragglers import StragglerConfig


class FedNovaConfig(StragglerConfig):
    name: Literal["fednova"] = "fednova"
    partial_work: Literal["drop", "normalise"] = Field(
        "normalise", description="with a deadline: normalise (each client stops by it and reports what it did: "
                                 "FedNova's setting) or drop (a late report is discarded)")
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
    """The barrier round of local SGD with Δ_i/τ_i averaged by p_i and the mean scaled by τ_eff (DeltaServer's
    normalised mean, always on here)."""

    config: FedNovaConfig

    @property
    def normalises(self) -> bool:
        return True


SPEC = AlgorithmSpec(
    name="fednova", config=FedNovaConfig, server=FedNovaServer, client=FedNovaClient,
    family="synchronous", paper="FedNova (Wang et al. 2020, Tackling the Objective Inconsistency Problem in "
                                "Heterogeneous Federated Optimization)",
)
