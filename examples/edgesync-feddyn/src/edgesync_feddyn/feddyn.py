"""FedDyn: federated learning with dynamic regularisation (Acar et al., ICLR 2021, "Federated Learning Based on
Dynamic Regularization", Algorithm 1), written on `edgesync.api` alone.

Each round the server sends θ^{t−1} to the round's clients P_t. Client k keeps g_k = ∇L_k(θ_k), the gradient
of its loss at its last local model (0 at the start), and minimises

    L_k(θ) − ⟨g_k, θ⟩ + (α/2)·‖θ − θ^{t−1}‖²

by `local_steps` steps of SGD from θ^{t−1}: θ ← θ − η·(∇L_k(θ) − g_k + α·(θ − θ^{t−1})). It sends
Δ_k = θ_k^t − θ^{t−1} and updates g_k ← g_k − α·Δ_k. With every report in, the server (m = every client of
the run, not only P_t) sets

    h ← h − α·(1/m)·Σ_{k∈P_t} Δ_k,    θ^t = mean_{k∈P_t} θ_k^t − (1/α)·h.

So h stays the mean of all the g_k, which the server never sees.

Choices fixed here:
- **g_k lives in the client half** (`state_dict`) and survives from one instruction to the next. It is lost
  when the half is set up afresh (a device back from offline in the simulator, a live client set up again, or
  every client after the coordinator resumes from its checkpoint); a client without g_k starts from 0, the
  paper's initialisation. h is the server half's state and is checkpointed.
- **h stays the mean of the g_k, or both restart.** A g_k lost with its half, or moved by an update the server
  never applied (late or refused), leaves h holding a share of a g_k no client has. Each update says which
  round its g_k comes from (`dyn_round`, None for a g_k of 0); the server remembers, per client, the round of
  the last update it applied. When they disagree, that round's θ is the plain mean of the clients' models, h
  restarts from 0 and the instructions carry a new `dyn_epoch`, on which every client restarts its g_k from 0:
  the paper's start again, logged as a `dyn_reset` row in updates.jsonl. A client keeps its g_k unchanged when
  its Δ_k is not finite (the runtime refuses that update, so the server does not apply it either).
- Plain local SGD (no momentum), the round's η from the instruction (warm-up applies), every client weighted 1
  as in Algorithm 1; BatchNorm statistics averaged as in FedAvg; no all-reduce form.
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from edgesync.api import (API_VERSION, AlgorithmSpec, ClientAlgorithm, DeltaServer, Instruction, LocalRound,
                          RoundConfig, Send, Update)


class FedDynConfig(RoundConfig):
    """FedDyn's keys, besides the participation keys of every barrier round (`clients_per_round`, …)."""

    name: Literal["feddyn"] = "feddyn"
    alpha: float = Field(0.01, gt=0, description="α, the dynamic regulariser's weight (the paper: 0.1 to 0.001)")
    local_steps: int = Field(10, ge=1, description="local SGD steps per round (an instruction may set its own)")
    aggregation: Literal["ps"] = Field("ps", description="ps only: h is the coordinator's state, so FedDyn has no "
                                                         "all-reduce form")

    @property
    def momentum(self) -> float:
        """LocalRound's local momentum: none, FedDyn's local steps are plain SGD."""
        return 0.0


class FedDynClient(ClientAlgorithm):
    config: FedDynConfig

    def __init__(self, config: FedDynConfig, trainer):
        super().__init__(config, trainer)
        self.grad_state: torch.Tensor | None = None  # g_k = ∇L_k(θ_k); None is 0 (the start, or a fresh half)
        self.epoch: int | None = None  # the server's dyn_epoch g_k belongs to
        self.state_round: int | None = None  # the round whose instruction produced g_k

    def on_instruction(self, instruction: Instruction) -> Update:
        alpha = self.config.alpha
        epoch = int(instruction.meta.get("dyn_epoch", 0))
        if self.epoch != epoch:  # the server restarted h: this client restarts g_k with it
            self.grad_state, self.state_round = None, None
        local = LocalRound(self, instruction, proximal_mu=alpha)  # each gradient gets α·(θ − θ^{t−1})
        for _ in range(int(instruction.meta.get("local_steps", self.config.local_steps))):
            local.step()
            if self.grad_state is not None:
                local.theta.add_(self.grad_state, alpha=local.lr)  # … and −g_k: the linear term's gradient
        update = local.finish()
        update.meta["dyn_round"] = self.state_round
        delta = update.tensors["delta"]
        if bool(torch.isfinite(delta).all()):
            previous = torch.zeros_like(delta) if self.grad_state is None else self.grad_state
            self.grad_state = previous - alpha * delta  # ∇L_k(θ_k^t) = ∇L_k(θ_k^{t−1}) − α·(θ_k^t − θ^{t−1})
            self.epoch, self.state_round = epoch, int(instruction.meta.get("version", 0))
        return update

    def state_dict(self) -> dict:
        if self.grad_state is None:
            return {}
        return {"grad_state": self.grad_state, "epoch": self.epoch, "state_round": self.state_round}

    def load_state_dict(self, state: dict) -> None:
        self.grad_state = state.get("grad_state")
        self.epoch = state.get("epoch")
        self.state_round = state.get("state_round")


class FedDynServer(DeltaServer):
    """h ← h − α·(1/m)·ΣΔ_k and θ ← mean θ_k − h/α at each round's close (DeltaServer's barrier round)."""

    config: FedDynConfig

    def __init__(self, config: FedDynConfig, initial, clients: list[int]):
        super().__init__(config, initial, clients)
        self.h = torch.zeros_like(self.params)
        self.dyn_epoch = 0  # goes up each time h restarts from 0 (clients restart their g_k with it)
        self.applied_rounds: dict[int, int] = {}  # client → the round of its last update applied, this epoch
        self.n_clients = len(self.clients)  # m where the runtime gives no population (unit tests)

    def _reset(self) -> None:
        super()._reset()
        self.out_of_step: dict[int, str] = {}  # clients of this round whose g_k is not the one h holds

    def instruction_meta(self, client: int) -> dict:
        return {**super().instruction_meta(client), "dyn_epoch": self.dyn_epoch}

    def on_update(self, client: int, update: Update) -> list[Send]:
        return super().on_update(client, Update(update.tensors, {**update.meta, "feddyn_client": client}))

    def weight(self, update: Update) -> float:
        """Called once for each update the round takes in: every one counts 1 (Algorithm 1's plain mean)."""
        client = update.meta["feddyn_client"]
        if update.meta.get("dyn_round") != self.applied_rounds.get(client):
            self.out_of_step[client] = ("its g_k started afresh" if update.meta.get("dyn_round") is None
                                        else "its g_k moved by an update that was not applied")
        self.applied_rounds[client] = self.round
        return 1.0

    def apply(self, mean: torch.Tensor) -> None:
        if self.out_of_step:  # h is not the mean of the g_k any more: both restart from 0
            self.log_update(-1, round=self.round, dyn_reset=sorted(self.out_of_step),
                            reason=sorted(set(self.out_of_step.values())))
            self.h = torch.zeros_like(self.params)
            self.dyn_epoch += 1
            self.applied_rounds = {}
            self.params = self.params + mean  # the plain mean of the clients' models
            return
        m = len(self.population.data_sizes) or self.n_clients
        alpha = self.config.alpha
        self.h = self.h - (alpha * self.weight_sum / m) * mean  # Σ Δ_k = |P_t|·mean: every update weighs 1
        self.params = self.params + mean - self.h / alpha  # out of place: a sent θ is never changed


FEDDYN = AlgorithmSpec(
    name="feddyn", config=FedDynConfig, server=FedDynServer, client=FedDynClient, family="synchronous",
    paper="FedDyn (Acar et al. 2021, Federated Learning Based on Dynamic Regularization, Algorithm 1)",
    api_version=API_VERSION,
)
