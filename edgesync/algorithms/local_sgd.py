"""Local SGD / FedAvg: H local steps per client, then average the model differences.

Every round each client starts from θ, runs H local SGD steps (momentum, if any, starts from zero
each round) and sends Δ_i = θ_i − θ. The master applies θ ← θ + ε·mean_i(Δ_i) — unweighted, or
weighted by each client's number of training samples (FedAvg, McMahan et al. 2017) with
`weighted: true`. ε is the global learning rate (1 = plain model averaging). An instruction may
carry `local_steps` to override H for that client and round (used by ESync-style step budgets).
"""
from __future__ import annotations

import math

from typing import Literal

import torch
from pydantic import Field, model_validator

from edgesync import model_passes
from edgesync.algorithms.machinery.base import AlgorithmSpec, ClientAlgorithm, Instruction, Update
from edgesync.algorithms.machinery.rounds import RoundConfig, RoundServer
from edgesync.algorithms.machinery.stragglers import PartialWork, check_partial_work, partial_work_field
from edgesync.algorithms.machinery.staleness import rms
from edgesync.algorithms.machinery.warmup import instruction_lr
from edgesync.trainer import Interrupt


class DeltaConfig(RoundConfig):
    """Keys of every algorithm that averages model differences (local SGD, ESync)."""

    momentum: float = Field(0.0, ge=0, lt=1, description="local heavy-ball momentum, reset every round")
    global_lr: float = Field(1.0, gt=0, description="ε, the global learning rate")
    weighted: bool = Field(False, description="weight Δ_i by the client's training samples (FedAvg)")


def local_epochs_field():
    """The `local_epochs` key of every config whose clients run `round_steps` (local SGD's, SCAFFOLD's, FedNova's)."""
    return Field(None, gt=0, description="E: each client runs ⌈E·n_i/B⌉ steps a round instead of local_steps (n_i "
                 "its samples, B the batch): unequal work where the shards differ, as in FedAvg's and FedNova's "
                 "papers")


class LocalSGDConfig(DeltaConfig):
    name: Literal["local_sgd"] = "local_sgd"
    local_steps: int = Field(10, ge=1, description="H, local SGD steps per round")
    local_epochs: float | None = local_epochs_field()
    partial_work: PartialWork = partial_work_field()

    @model_validator(mode="after")
    def _partial_work_has_a_deadline(self) -> "LocalSGDConfig":
        check_partial_work(self)
        return self


def round_steps(config, instruction: Instruction, trainer) -> int:
    """τ_i, the local steps of this round: the instruction's `local_steps` when it sets them (a step budget),
    else ⌈E·n_i/B⌉ when the config counts epochs (`local_epochs`), else the config's `local_steps`."""
    if "local_steps" in instruction.meta:
        return int(instruction.meta["local_steps"])
    if config.local_epochs:
        return max(1, math.ceil(config.local_epochs * trainer.num_samples / trainer.batch_samples))
    return int(config.local_steps)


class DeltaServer(RoundServer):
    """θ ← θ + ε·mean(Δ): the aggregation local SGD and ESync share.

    Normalised (FedNova's weighting: `partial_work: normalise`, and always in fednova.py): each Δ_i is divided
    by its τ_i (`steps`; d_i = 0 for a client that ran none) before the weighted mean, which is then scaled by
    τ_eff = Σ w_i·τ_i / Σ w_i, so that a client that ran more steps pulls θ no harder than the others."""

    update_key = "delta"

    @property
    def normalises(self) -> bool:
        return getattr(self.config, "partial_work", "drop") == "normalise"

    def _reset(self) -> None:
        super()._reset()
        self.tau_sum = 0.0  # Σ w_i·τ_i of the round (normalised); τ_eff = tau_sum / weight_sum

    def sum_weight(self, update: Update, w: float) -> float:
        """−d_i = Δ_i/τ_i joins the sum with weight w_i (d_i = 0 for a client that ran no step): Δ_i·w_i/τ_i."""
        if not self.normalises:
            return w
        tau = int(update.meta.get("steps", 0))
        return w / tau if tau > 0 else 0.0

    def mean_scale(self) -> tuple[float, float]:
        if not self.normalises:
            return super().mean_scale()
        # τ_eff·Σ w_i·(−d_i)/Σ w_i in one pass over the float64 sum, rounded to float32 once
        return 1.0, self.tau_sum / self.weight_sum / self.weight_sum

    def apply(self, mean: torch.Tensor) -> None:
        self.params, _ = model_passes.step(self.params, mean, self.config.global_lr)  # one pass: θ + ε·mean

    def apply_round(self) -> None:
        """θ + ε·mean in the pass that takes the mean from the float64 sum (the same rounding as `apply(round_mean())`:
        the mean is rounded to float32 first), unless a subclass changes what `apply` does with it."""
        if type(self).apply is not DeltaServer.apply:
            return super().apply_round()
        self.params = model_passes.mean(self.update_sum, *self.mean_scale(), theta=self.params,
                                        eps=self.config.global_lr)

    def instruction_meta(self, client: int) -> dict:
        # Under warm-up the clients' local η follows the schedule; momentum restarts every round.
        return {"lr": self.round_lr} if self.config.warmup_epochs else {}

    def weight(self, update: Update) -> float:
        """w_i: the client's samples (`weighted`) or 1; called once for each update the round takes in, which
        is where τ_i joins τ_eff's sum when the round normalises."""
        w = float(update.meta.get("data_size", 1)) if self.config.weighted else 1.0
        if self.normalises:
            self.tau_sum += w * max(0, int(update.meta.get("steps", 0)))
        return w


class LocalRound:
    """One round of local SGD from an instruction's θ: `step()` as often as wanted, then `finish()`.

    The replica θ_local (and BatchNorm statistics) live here, not in the trainer's model, and are
    loaded before every step: in the simulator other clients use the same model between our steps.
    With `measure_grad_rms` it also sums the RMS of every step's raw gradient (before momentum), the
    normaliser of the gap an asynchronous master logs (`staleness`; FedAsync, FedBuff): `grad_rms()`.
    With `proximal_mu` each gradient gets FedProx's μ·(θ − θ0) (Li et al. 2020).
    """

    def __init__(self, client: ClientAlgorithm, instruction: Instruction, measure_grad_rms: bool = False,
                 proximal_mu: float = 0.0):
        self.trainer, self.config = client.trainer, client.config
        self.instruction = instruction
        self.theta0 = instruction.tensors["params"]
        self.theta = self.theta0.clone()
        self.buffers = instruction.tensors.get("buffers")
        self.velocity: torch.Tensor | None = None
        self.steps = 0
        self.loss_sum = 0.0
        self.lr = instruction_lr(instruction.meta, self.config.lr, self.config.warmup_epochs)
        self.measure_grad_rms = measure_grad_rms
        self.grad_rms_sum = 0.0
        self.proximal_mu = proximal_mu  # FedProx: μ/2·‖θ − θ0‖² added to the loss (a stock Flower FedProx)

    def step(self, interrupt: Interrupt | None = None) -> None:
        """One local step; with `interrupt` it may raise StepAborted and then changes nothing."""
        t, cfg = self.trainer, self.config
        t.set_params(self.theta)
        if self.buffers is not None:
            t.set_buffers(self.buffers)
        g, loss = t.gradient(cfg.weight_decay, interrupt)
        if self.measure_grad_rms:
            self.grad_rms_sum += rms(g)  # the raw gradient, before momentum folds it into the velocity
        if self.proximal_mu:
            g = g + self.proximal_mu * (self.theta - self.theta0)
        if cfg.momentum:
            self.velocity = g if self.velocity is None else self.velocity.mul_(cfg.momentum).add_(g)
            g = self.velocity
        self.theta.sub_(g, alpha=self.lr)
        if self.buffers is not None:
            self.buffers = t.get_buffers()
        self.steps += 1
        self.loss_sum += loss

    def grad_rms(self) -> float:
        """The mean over this round's steps of each raw gradient's RMS (`measure_grad_rms` only)."""
        return self.grad_rms_sum / max(1, self.steps)

    def finish(self) -> Update:
        tensors = {"delta": self.theta - self.theta0}
        if self.buffers is not None:
            tensors["buffers"] = self.buffers
        meta = {"loss": self.loss_sum / max(1, self.steps), "steps": self.steps,
                "samples": self.steps * self.trainer.batch_samples, "data_size": self.trainer.num_samples,
                "version": self.instruction.meta.get("version", 0)}
        return Update(tensors=tensors, meta=meta)


class LocalSGDClient(ClientAlgorithm):
    config: LocalSGDConfig
    proximal_mu = 0.0  # FedProx's μ (fedprox.py): the local round's proximal term

    def __init__(self, config, trainer):
        super().__init__(config, trainer)
        self.step_s: float | None = None  # its last local step's time on the runtime's clock (partial work)

    def on_instruction(self, instruction: Instruction) -> Update:
        session = LocalRound(self, instruction, proximal_mu=self.proximal_mu)
        steps = round_steps(self.config, instruction, self.trainer)
        budget = instruction.meta.get("time_budget_s")
        if budget is None:
            for _ in range(steps):
                session.step()
            return session.finish()
        # partial work: stop before a step that would end past the deadline (judged by the last step's time;
        # a client never timed runs one step to learn it)
        start = self.ctx.now()
        while session.steps < steps:
            t = self.ctx.now()
            if self.step_s is not None and t - start + self.step_s > budget:
                break
            session.step()
            self.step_s = self.ctx.now() - t
        return session.finish()


SPEC = AlgorithmSpec(
    name="local_sgd", config=LocalSGDConfig, server=DeltaServer, client=LocalSGDClient,
    family="synchronous", paper="Local SGD / FedAvg (McMahan et al. 2017; survey §3.3)",
)
