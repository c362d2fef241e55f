"""Local SGD / FedAvg: H local steps per client, then average the model differences.

Every round each client starts from θ, runs H local SGD steps (momentum, if any, starts from zero
each round) and sends Δ_i = θ_i − θ. The master applies θ ← θ + ε·mean_i(Δ_i) — unweighted, or
weighted by each client's number of training samples (FedAvg, McMahan et al. 2017) with
`weighted: true`. ε is the global learning rate (1 = plain model averaging). An instruction may
carry `local_steps` to override H for that client and round (used by ESync-style step budgets).
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from edgesync.algorithms.base import AlgorithmConfig, AlgorithmSpec, ClientAlgorithm, Instruction, Update
from edgesync.algorithms.registry import register
from edgesync.algorithms.rounds import RoundServer


class LocalSGDConfig(AlgorithmConfig):
    name: Literal["local_sgd"] = "local_sgd"
    local_steps: int = Field(10, ge=1, description="H, local SGD steps per round")
    momentum: float = Field(0.0, ge=0, lt=1, description="local heavy-ball momentum, reset every round")
    global_lr: float = Field(1.0, gt=0, description="ε, the global learning rate")
    weighted: bool = Field(False, description="weight Δ_i by the client's training samples (FedAvg)")


class DeltaServer(RoundServer):
    """θ ← θ + ε·mean(Δ): the aggregation local SGD and ESync share."""

    update_key = "delta"

    def apply(self, mean: torch.Tensor) -> None:
        self.params = self.params + self.config.global_lr * mean

    def weight(self, update: Update) -> float:
        return float(update.meta.get("data_size", 1)) if getattr(self.config, "weighted", False) else 1.0


def run_local_steps(client: ClientAlgorithm, instruction: Instruction, steps: int, momentum: float) -> Update:
    """Load θ, run `steps` local SGD steps, return Δ = θ_local − θ with the round's metadata."""
    trainer, config = client.trainer, client.config
    theta = instruction.tensors["params"]
    trainer.set_params(theta)
    if "buffers" in instruction.tensors:
        trainer.set_buffers(instruction.tensors["buffers"])
    loss, _ = trainer.sgd_steps(steps, config.lr, momentum, config.weight_decay)
    tensors = {"delta": trainer.get_params() - theta}
    buffers = trainer.get_buffers()
    if buffers.numel():
        tensors["buffers"] = buffers
    meta = {"loss": loss, "steps": steps, "samples": steps * trainer.batch_samples,
            "data_size": trainer.num_samples, "version": instruction.meta.get("version", 0)}
    return Update(tensors=tensors, meta=meta)


class LocalSGDClient(ClientAlgorithm):
    config: LocalSGDConfig

    def on_instruction(self, instruction: Instruction) -> Update:
        steps = int(instruction.meta.get("local_steps", self.config.local_steps))
        return run_local_steps(self, instruction, steps, self.config.momentum)


SPEC = register(AlgorithmSpec(
    name="local_sgd", config=LocalSGDConfig, server=DeltaServer, client=LocalSGDClient,
    family="synchronous", paper="Local SGD / FedAvg (McMahan et al. 2017; survey §3.3)",
))
