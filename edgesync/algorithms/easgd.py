"""Asynchronous EASGD: elastic averaging SGD (Zhang, Choromanska, LeCun 2015; survey §3.3.5, Eq. 1, Fig. 10).

Every client trains its own model θ_i and is pulled, elastically, towards the master's center θ̃,
which is pulled towards it by the same amount (α = β in the survey's Eq. 1: a symmetric force):

    client:  τ local SGD steps on θ_i, then  δ = α·(θ_i − θ̃);  θ_i ← θ_i − δ
    master:  θ̃ ← θ̃ + δ

One exchange does the pull and the push at once: the client sends θ_i after its τ steps; the master
computes δ against its current θ̃ (the freshest center, and no other update can slip between the
pull and the push), applies θ̃ ← θ̃ + δ and replies δ; the client applies θ_i ← θ_i − δ and starts
its next τ steps. The first instruction carries θ̃₀ (θ_i starts there).

Defaults: α = 0.9/N (β = Nα = 0.9 in Zhang et al.; `moving_rate: null`, N = the clients at the
start); τ = 10 (the survey leaves τ open; Zhang et al. use τ = 10 on ImageNet and 1–64 on CIFAR,
and 10 is local SGD's H here). BatchNorm statistics stay with each client (they are its own model's);
the master keeps the latest it received, for evaluating θ̃. Per update it logs the lag, the gap
‖θ̃ − θ̃ as the client last saw it‖/√k and `distance` = ‖θ_i − θ̃‖/√k before the move. The gap is
normalised, as for every algorithm (`staleness`), by the raw gradients' RMS, not by δ: the client
reports the mean over its τ steps of the RMS of each step's raw gradient (a single step's scale in
expectation, whatever τ).
"""
from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import AlgorithmSpec, ClientAlgorithm, Instruction, Update
from edgesync.algorithms.machinery.gradient_client import model_instruction
from edgesync.algorithms.machinery.staleness import GRAD_RMS, rms
from edgesync.algorithms.machinery.warmup import WarmupConfig, instruction_lr


class EASGDConfig(WarmupConfig):
    name: Literal["easgd"] = "easgd"
    local_steps: int = Field(10, ge=1, description="τ, local SGD steps between exchanges")
    moving_rate: float | None = Field(None, gt=0, le=1, description="α, the elastic pull; null = 0.9/N")


class EASGDServer(AsyncServer):
    config: EASGDConfig
    update_key = "params"

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.alpha = config.moving_rate if config.moving_rate is not None else 0.9 / max(1, len(self.clients))
        self.delta: dict[int, torch.Tensor] = {}  # the δ each client is owed

    def apply(self, client: int, update: Update, lr: float):
        return self._pull(client, update)[1]

    def gap_and_apply(self, client: int, update: Update, lr: float) -> tuple[float, dict]:
        """The gap read in the pass of the pull, unless a subclass overrides a hook this fuses."""
        if not self.hooks_are(EASGDServer, "apply", "gap_before", "computed_on"):
            return super().gap_and_apply(client, update, lr)
        sq_gap, fields = self._pull(client, update, self.computed_if_behind(client))
        return self.gap_of(sq_gap), fields

    def _pull(self, client: int, update: Update, gap_of: torch.Tensor | None = None) -> tuple[float | None, dict]:
        """θ̃ + α·(x − θ̃) in one pass (model_passes.lerp), δ as the step θ̃ actually took (so θ̃ + δ is θ̃'s new
        value, to the bit); the distance ‖x − θ̃‖ is ‖δ‖/α. Returns Σ (θ̃ − gap_of)² (None without gap_of) and the
        log's fields."""
        self.params, delta, sq_gap, sq = model_passes.lerp(self.params, update.tensors["params"], self.alpha, gap_of,
                                                           with_step=True)
        self.delta[client] = delta
        return sq_gap, {"distance": round(math.sqrt(sq / delta.numel()) / self.alpha, 9)}

    def instruction(self, client: int, theta: torch.Tensor) -> Instruction:
        meta = {"lr": self.lr, "local_steps": self.config.local_steps}
        if client in self.delta:
            return Instruction(tensors={"delta": self.delta.pop(client)}, meta={"version": self.updates, **meta})
        return model_instruction(theta, self.buffers, self.updates, **meta)

    def on_client_lost(self, client: int):
        self.delta.pop(client, None)
        return super().on_client_lost(client)


class EASGDClient(ClientAlgorithm):
    config: EASGDConfig

    def __init__(self, config, trainer):
        super().__init__(config, trainer)
        self.theta: torch.Tensor | None = None
        self.buffers: torch.Tensor | None = None

    def on_instruction(self, instruction: Instruction) -> Update:
        if "delta" in instruction.tensors:
            self.theta = self.theta - instruction.tensors["delta"]  # the elastic pull towards θ̃
        else:
            self.theta = instruction.tensors["params"]
            self.buffers = instruction.tensors.get("buffers")
        t, cfg = self.trainer, self.config
        lr = instruction_lr(instruction.meta)
        steps = max(1, int(instruction.meta.get("local_steps", cfg.local_steps)))
        if self.buffers is not None and self.buffers.numel():
            t.set_buffers(self.buffers)
        loss_sum = rms_sum = 0.0
        for _ in range(steps):
            t.set_params(self.theta)
            g, loss = t.gradient(cfg.weight_decay)
            self.theta = self.theta - lr * g
            loss_sum += loss
            rms_sum += rms(g)  # the raw gradient's scale, for the gap's normaliser (staleness)
        tensors = {"params": self.theta}
        buffers = t.get_buffers()
        if buffers.numel():
            self.buffers = tensors["buffers"] = buffers
        meta = {"loss": loss_sum / steps, "steps": steps, "samples": steps * t.batch_samples,
                "data_size": t.num_samples, "version": instruction.meta.get("version", 0),
                GRAD_RMS: rms_sum / steps}  # the mean over the steps
        return Update(tensors=tensors, meta=meta)

    def state_dict(self) -> dict:
        return {"theta": self.theta, "buffers": self.buffers}

    def load_state_dict(self, state: dict) -> None:
        self.theta, self.buffers = state.get("theta"), state.get("buffers")


SPEC = AlgorithmSpec(
    name="easgd", config=EASGDConfig, server=EASGDServer, client=EASGDClient, family="asynchronous",
    paper="EASGD (Zhang et al. 2015), asynchronous, as in the survey §3.3.5 (Eq. 1, Fig. 10)",
)
