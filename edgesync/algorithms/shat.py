"""SHAT: scale- and heterogeneity-aware asynchronous training (Ko & Kim 2022, shat.txt §3.2–3.3, Alg. 1).

Master (Alg. 1, SHAT_PS): ASGD, θ̃ ← θ̃ − η·g_i, plus a counter per client, c_i = updates by *other*
clients since client i's previous update (since the start for its first). The reply carries θ̃ and
c_i; then c_i ← 0. The master also computes the client's mixing weight (Eq. 4)

    α_i = 1 − s_i / log n,   s_i = n / c_i,   n = the live clients,

and sends it with c_i, so that it can be logged per update and so that an α_i = 0 reply carries no
model at all (the client would not read it). Choices fixed here (docs/algorithms.md): natural log by default
(`log_base`: e or 2); α_i clipped to [0, 1]; n = 1 ⇒ α_i = 1 (checked first: one client is plain
SGD); c_i = 0 ⇒ α_i = 0. With homogeneous clients c_i ≈ n − 1 and for n ≤ 3 (natural log) or n = 2
(base 2) α_i is clipped to 0 on every update: SHAT runs as ENSEMBLE. The `alpha` and `c_i` fields of
updates.jsonl show it, and the server warns when it starts.

Client (Alg. 1, SHAT_WORKER): keeps its own model θ_i. It computes g_i = ∇J(θ_i), takes its own local
step θ_i ← θ_i − η·g_i (Eq. 2–3; Alg. 1 leaves it implicit) and sends g_i (Alg. 1 line 5: the master
applies the raw gradient, as ASGD). On the reply it mixes θ_i ← (1 − α_i)·θ_i + α_i·θ̃ (Eq. 3), and
its BatchNorm statistics the same way; then computes the next gradient. The first instruction carries
α = 1: θ_i starts at θ̃₀; so does the first one after a lost client is back (its c_i counts from then).

Momentum (`momentum: m`, default 0 = Alg. 1 as written). shat.txt §4.1.3 says only "we use momentum SGD
and set momentum as 0.9", for SHAT and its baselines alike. Read here as the worker's optimizer: the
client keeps a learning-rate-free velocity v ← m·v + g_i (heavy ball, TensorFlow's MomentumOptimizer,
the paper's framework), steps θ_i ← θ_i − η·v and sends v where Alg. 1 sends g_i; the master applies
θ̃ ← θ̃ − η·v. So α = 1 is ASGD with client-side momentum (ASP trained with momentum SGD), one client is
heavy-ball SGD, and the master's mirror of θ_i needs no change. Being learning-rate free, v needs no
correction under the warm-up. v survives between instructions in `state_dict` (Flower restarts the
client process); a client half that starts afresh starts with v = 0.

Variants (the paper's baselines), each overriding one hook: ASP is `asgd` (α = 1); `ensemble`
(α = 0, local-only training: θ̃ is never sent after the first instruction); `shat_root`
(α_i = 1 − s_i/√n). The global model evaluated is the master's θ̃ (Alg. 1 returns it).

Gap: θ_computed is the client's own θ_i, which the master mirrors (it knows g_i, η and α_i): one
model-sized replica per client, kept only to measure the gap ‖θ̃ − θ_i‖/√k, which SHAT exists to
shrink. It is normalised by the RMS of the raw g_i, as for every algorithm (`staleness`): with
momentum the client sends v, so it reports g_i's RMS in its meta.
"""
from __future__ import annotations

import logging
import math
from typing import Literal

import torch
from pydantic import Field, field_validator

from edgesync import model_passes
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import AlgorithmSpec, ClientAlgorithm, Instruction, Update
from edgesync.algorithms.machinery.gradient_client import model_instruction
from edgesync.algorithms.machinery.staleness import GRAD_RMS, rms
from edgesync.algorithms.machinery.warmup import WarmupConfig, instruction_lr

log = logging.getLogger("edgesync.algorithms.shat")


class SHATFamilyConfig(WarmupConfig):
    """The keys SHAT, SHAT-root and ENSEMBLE share (their clients are one class)."""

    momentum: float = Field(0.0, ge=0, lt=1, description="m, the client's heavy-ball momentum (shat.txt §4.1.3 "
                            "trains with 0.9); 0 = plain SGD, as the paper's Alg. 1")


class SHATConfig(SHATFamilyConfig):
    name: Literal["shat"] = "shat"
    log_base: Literal["e", "2"] = Field("e", description="base of log n in α_i = 1 − s_i/log n")

    @field_validator("log_base", mode="before")
    @classmethod
    def _base_as_text(cls, v):
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v  # YAML's 2 is an int


class SHATRootConfig(SHATFamilyConfig):
    name: Literal["shat_root"] = "shat_root"


class EnsembleConfig(SHATFamilyConfig):
    name: Literal["ensemble"] = "ensemble"


def shat_alpha(c: int, n: int, scale: float) -> float:
    """α = 1 − (n/c)/scale, clipped to [0, 1]; n = 1 ⇒ 1; c = 0 ⇒ 0 (docs/algorithms.md, SHAT)."""
    if n <= 1:
        return 1.0
    if c <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - (n / c) / scale))


def mix(local: torch.Tensor, global_: torch.Tensor, alpha: float) -> torch.Tensor:
    """(1 − α)·local + α·global, out of place; α = 0 never reads `global_`, α = 1 returns it."""
    if alpha <= 0.0:
        return local
    if alpha >= 1.0:
        return global_
    return torch.lerp(local, global_, alpha)


class SHATServer(AsyncServer):
    config: SHATConfig  # shat_root and ensemble have no log_base: they override what reads it
    mixes = True  # False: α ≡ 0 by design (ENSEMBLE), so α = 0 is no degeneration worth a warning

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.previous = {c: 0 for c in self.clients}  # self.updates after c's previous update
        self.owed: dict[int, tuple[int, float]] = {}  # (c_i, α_i) for the reply each client is owed
        self.local = {c: self.params for c in self.clients}  # mirror of each θ_i, for the gap
        self.lr_sent: dict[int, float] = {}  # η each client takes its local step with
        n = len(self.clients)
        if self.mixes and n > 1 and self.alpha(n - 1, n) == 0.0:
            log.warning("%s with n = %d clients: α = 0 whenever c_i ≤ n − 1, as with homogeneous clients;"
                        " it then runs as ENSEMBLE (docs/algorithms.md, SHAT)", config.name, n)

    def scale(self, n: int) -> float:
        """The denominator of s_i in α_i: log n."""
        return math.log(n) if self.config.log_base == "e" else math.log2(n)

    def alpha(self, c: int, n: int) -> float:
        return shat_alpha(c, n, self.scale(n))

    def apply(self, client: int, update: Update, lr: float):
        """θ̃ − η·g, as ASGD, to the bit (α = 1 reproduces it), and the client's mirror: its own step, then its mixing
        with the reply."""
        return self._mirrored_step(client, update, lr)[1]

    def computed_on(self, client: int) -> torch.Tensor:
        return self.local[client]

    def gap_and_apply(self, client: int, update: Update, lr: float) -> tuple[float, dict]:
        """`gap_before` and `apply` in one pass: θ, g and the mirror read once (model_passes.mirrored)."""
        if not self.hooks_are(SHATServer, "apply", "gap_before", "computed_on"):
            return super().gap_and_apply(client, update, lr)
        sq, extra = self._mirrored_step(client, update, lr)
        return self.gap_of(sq), extra

    def _mirrored_step(self, client: int, update: Update, lr: float) -> tuple[float, dict]:
        """The step and the mirror's; Σ (θ − mirror)² before them, and the update log's fields."""
        g = update.tensors["grad"]
        c, n = self.updates - self.previous[client], len(self.clients)
        alpha = self.alpha(c, n)
        self.params, self.local[client], sq = model_passes.mirrored(  # the mirror: the client's step, then its mix
            self.params, self.local[client], g, -lr, -self.lr_sent.get(client, lr), alpha)
        self.previous[client] = self.updates + 1
        self.owed[client] = (c, alpha)
        return sq, {"c_i": c, "alpha": round(alpha, 6), "n": n}

    def instruction(self, client: int, theta: torch.Tensor) -> Instruction:
        c, alpha = self.owed.pop(client, (0, 1.0))  # the first instruction: θ̃ itself
        self.lr_sent[client] = self.lr
        meta = {"c_i": c, "alpha": alpha, "lr": self.lr}
        if alpha == 0.0:
            return Instruction(meta={"version": self.updates, **meta})
        return model_instruction(theta, self.buffers, self.updates, **meta)

    def on_client_lost(self, client: int):
        for table in (self.previous, self.owed, self.local, self.lr_sent):
            table.pop(client, None)
        return super().on_client_lost(client)

    def on_client_joined(self, client: int):
        """Back (its client half may be a new process): taken in as at the start. Its reply is the first
        instruction again (θ̃ itself, α = 1, c_i = 0), its c_i counts from now, its mirror starts at θ̃."""
        self.owed.pop(client, None)
        self.previous[client] = self.updates
        self.local[client] = self.params
        return super().on_client_joined(client)


class SHATRootServer(SHATServer):
    def scale(self, n: int) -> float:
        return math.sqrt(n)


class EnsembleServer(SHATServer):
    mixes = False

    def alpha(self, c: int, n: int) -> float:
        return 0.0


class SHATClient(ClientAlgorithm):
    """Own model θ_i: mix with the reply's θ̃ by α, gradient at θ_i, local step, send the step's direction."""

    config: SHATFamilyConfig

    def __init__(self, config, trainer):
        super().__init__(config, trainer)
        self.theta: torch.Tensor | None = None
        self.buffers: torch.Tensor | None = None
        self.velocity: torch.Tensor | None = None  # v, learning-rate free; None with m = 0

    def direction(self, g: torch.Tensor) -> torch.Tensor:
        """The step's direction: g, or with momentum v ← m·v + g (heavy ball, TF's MomentumOptimizer)."""
        m = self.config.momentum
        if m == 0:
            return g
        self.velocity = g if self.velocity is None else m * self.velocity + g
        return self.velocity

    def on_instruction(self, instruction: Instruction) -> Update:
        alpha = float(instruction.meta.get("alpha", 1.0))
        if self.theta is None:  # the first instruction: θ_i ← θ̃₀
            self.theta = instruction.tensors["params"]
            self.buffers = instruction.tensors.get("buffers")
        elif alpha > 0.0:
            self.theta = mix(self.theta, instruction.tensors["params"], alpha)
            if self.buffers is not None and "buffers" in instruction.tensors:
                self.buffers = mix(self.buffers, instruction.tensors["buffers"], alpha)
        t = self.trainer
        t.set_params(self.theta)
        if self.buffers is not None and self.buffers.numel():
            t.set_buffers(self.buffers)
        g, loss = t.gradient(self.config.weight_decay)
        lr = instruction_lr(instruction.meta)
        step = self.direction(g)
        self.theta = torch.add(self.theta, step, alpha=-lr)  # the local step (as the master mirrors it)
        tensors = {"grad": step}
        buffers = t.get_buffers()
        if buffers.numel():
            self.buffers = tensors["buffers"] = buffers
        meta = {"loss": loss, "steps": 1, "samples": t.batch_samples, "data_size": t.num_samples,
                "version": instruction.meta.get("version", 0)}
        if self.config.momentum:  # it sends v, not g: the gap's normaliser is the raw g (staleness)
            meta[GRAD_RMS] = rms(g)
        return Update(tensors=tensors, meta=meta)

    def state_dict(self) -> dict:
        return {"theta": self.theta, "buffers": self.buffers, "velocity": self.velocity}

    def load_state_dict(self, state: dict) -> None:
        self.theta, self.buffers = state.get("theta"), state.get("buffers")
        self.velocity = state.get("velocity")


PAPER = "SHAT (Ko & Kim 2022), shat.txt"
SHAT_SPEC = AlgorithmSpec(name="shat", config=SHATConfig, server=SHATServer, client=SHATClient,
                          family="asynchronous", paper=f"{PAPER} §3.2–3.3, Eq. 3–4, Alg. 1")
ROOT_SPEC = AlgorithmSpec(name="shat_root", config=SHATRootConfig, server=SHATRootServer,
                          client=SHATClient, family="asynchronous", paper=f"{PAPER} §4.1.2 (SHAT-root)")
ENSEMBLE_SPEC = AlgorithmSpec(name="ensemble", config=EnsembleConfig, server=EnsembleServer,
                              client=SHATClient, family="asynchronous",
                              paper=f"{PAPER} §4.1.2 (ENSEMBLE, α = 0)")
