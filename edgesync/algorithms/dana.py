"""DANA: Nesterov's look-ahead for asynchronous momentum (Hakimi et al. 2019, dana.txt §4, App. B.1).

- **DANA-Zero** (§4.1, Alg. 3, Eq. 4): the master of Multi-ASGD (one velocity v_i per client,
  v_i ← γ·v_i + g_i; θ ← θ − η·v_i) that replies not θ but the look-ahead
  θ̂ = θ − η·γ·Σ_j v_j, the master's estimated position after every client's next update. Σ_j v_j is
  a running sum (add v_i,new − v_i,old); a lost client's v_j leaves it. The client is ASGD's.
- **DANA-Slim** (§4.2, Alg. 4, Eq. 8): the master is plain ASGD, Θ ← Θ − η·(sent step); the client
  keeps v: it receives Θ, computes g = ∇J(Θ), v ← γ·v + g and sends γ·v + g (Bengio-NAG). Its v is
  learning-rate free and η is applied at the master, so the warm-up needs no momentum correction here:
  this form is what the correction reproduces. With one client it is torch.optim.SGD(nesterov=True).
- **DANA-DC** (§4.3, Alg. 9): DANA-Zero with the delay-compensated gradient
  ĝ = g + λ·g⊙g⊙(θ − θ̂_i), θ̂_i the look-ahead last sent to client i (`momentum_asgd.delay_compensate`).

The gap (Def. 1) is ‖θ_apply − θ_computed‖/√k with θ_computed the look-ahead the client was sent (for
DANA-Slim, the Θ it was sent): the look-ahead is what makes DANA's gap small. It is normalised by the
RMS of the client's raw gradient g, as for every algorithm (`staleness`): DANA-Zero/DC's clients send
g itself; DANA-Slim's sends γ·v + g and reports g's RMS in its meta. The model evaluated is the
master's θ (DANA-Slim: Θ).
"""
from __future__ import annotations

from typing import Literal

import torch

from edgesync import model_passes
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.machinery.base import AlgorithmSpec, Instruction, Update
from edgesync.algorithms.momentum_asgd import DCASGDConfig, DelayCompensation, MomentumConfig, MultiASGDServer
from edgesync.algorithms.machinery.staleness import GRAD_RMS, rms


class DanaZeroConfig(MomentumConfig):
    name: Literal["dana_zero"] = "dana_zero"


class DanaSlimConfig(MomentumConfig):
    name: Literal["dana_slim"] = "dana_slim"


class DanaDCConfig(DCASGDConfig):
    name: Literal["dana_dc"] = "dana_dc"  # type: ignore[assignment]


class DanaZeroServer(MultiASGDServer):
    track_sum = True

    def outgoing(self, client: int) -> torch.Tensor:
        """θ̂ = θ − η·γ·Σ_j v_j (velocities are η·v: θ − γ·Σ_j u_j at the current η)."""
        total = self.velocities.total(self.lr)
        if total is None:
            return self.params
        return model_passes.step(self.params, total, -self.config.momentum)[0]  # θ − γ·Σ_j u_j, one pass


class DanaDCServer(DelayCompensation, DanaZeroServer):
    config: DanaDCConfig


class DanaSlimClient(GradientClient):
    """Alg. 4: the gradient at the Θ it was sent, folded into its own v; sends γ·v + g."""

    config: DanaSlimConfig

    def __init__(self, config, trainer):
        super().__init__(config, trainer)
        self.velocity: torch.Tensor | None = None

    def on_instruction(self, instruction: Instruction) -> Update:
        update = super().on_instruction(instruction)
        g, gamma = update.tensors["grad"], self.config.momentum
        self.velocity = g if self.velocity is None else gamma * self.velocity + g  # (k,)
        update.tensors["grad"] = gamma * self.velocity + g  # the step the master applies, times η
        update.meta[GRAD_RMS] = rms(g)  # the gap's normaliser is the raw g, not the step sent (staleness)
        return update

    def state_dict(self) -> dict:
        return {"velocity": self.velocity}

    def load_state_dict(self, state: dict) -> None:
        self.velocity = state.get("velocity")


PAPER = "DANA (Hakimi et al. 2019), dana.txt"
ZERO_SPEC = AlgorithmSpec(name="dana_zero", config=DanaZeroConfig, server=DanaZeroServer,
                          client=GradientClient, family="asynchronous", paper=f"{PAPER} §4.1, Alg. 3")
SLIM_SPEC = AlgorithmSpec(name="dana_slim", config=DanaSlimConfig, server=AsyncServer,
                          client=DanaSlimClient, family="asynchronous", paper=f"{PAPER} §4.2, Alg. 4")
DC_SPEC = AlgorithmSpec(name="dana_dc", config=DanaDCConfig, server=DanaDCServer,
                        client=GradientClient, family="asynchronous", paper=f"{PAPER} §4.3, Alg. 9")
