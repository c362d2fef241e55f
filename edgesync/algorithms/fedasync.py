"""FedAsync: asynchronous federated optimization by staleness-weighted model mixing (Xie, Koyejo, Gupta
2019, "Asynchronous Federated Optimization"; docs/algorithms.md, `fedasync`).

A client pulls the global model x at server version τ, runs H local SGD steps from it (local_sgd's
`LocalRound`: optional heavy-ball momentum, restarted every pull) and sends its new model x_new. The
server, at version t, mixes

    x ← (1 − α_t)·x + α_t·x_new,   α_t = α·s(t − τ)

with the staleness function s: `polynomial` s(d) = (d + 1)^(−a), `hinge` s(d) = 1 if d ≤ b else
1/(a(d − b) + 1), or `constant` s = 1. Every mix is one global update (the version goes up by one) and
the sender gets the new model at once, as in ASGD; nobody waits for anybody.

Choices fixed here:
- **The client sends its model**, not its difference: `params` = x_new, which is what Xie et al.'s
  worker pushes and what the server mixes. The bytes are the same as a difference's, and the server
  needs no copy of what it sent to rebuild x_new (d = 0 and α = 1 give x = x_new bit for bit).
- **BatchNorm statistics are mixed with the same α_t** (`latest_statistics = False`), not replaced by
  the latest as the other asynchronous masters do: the statistics belong to the model x_new, and a
  stale update that moves the weights by a small α_t must not replace the global statistics whole.
  So x and its statistics stay one convex combination of the same models, and α = 0 moves neither.
- No proximal term: Xie et al.'s worker may add ρ/2·‖x − x_τ‖² to its local loss; EdgeSync's
  reading runs plain local SGD, weight decay being the only regulariser.
- Defaults α = 0.9 (Plato's and APPFL's), a = 0.5 (fixed here), b = 4 (APPFL's), H = 10 (local_sgd's).
  `a` is shared by the polynomial and the hinge function.
- η the clients step with is the master's (`lr` in every instruction), so the warm-up applies.

Per update the log has the lag d = t − τ, the gap ‖x − x_τ‖/√k normalised by the mean RMS of the
client's raw gradients over its H steps (`staleness`), and `alpha` = α_t. The client half is shared
with FedBuff (`LocalStepsClient`), which sends the difference instead.
"""
from __future__ import annotations

from typing import ClassVar, Literal

import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import AlgorithmConfig, AlgorithmSpec, ClientAlgorithm, Instruction, Update
from edgesync.algorithms.machinery.gradient_client import model_instruction
from edgesync.algorithms.local_sgd import LocalRound
from edgesync.algorithms.machinery.staleness import GRAD_RMS

Staleness = Literal["polynomial", "hinge", "constant"]


class FedAsyncConfig(AlgorithmConfig):
    name: Literal["fedasync"] = "fedasync"
    alpha: float = Field(0.9, ge=0, le=1, description="α, the mixing weight of a fresh model: "
                         "x ← (1 − α_t)·x + α_t·x_new with α_t = α·s(t − τ)")
    staleness: Staleness = Field("polynomial", description="s(d) of the lag d = t − τ: polynomial (d + 1)^(−a), "
                                 "hinge (1 if d ≤ b else 1/(a(d − b) + 1)) or constant 1")
    a: float = Field(0.5, ge=0, description="a, the decay of the polynomial and hinge staleness functions")
    b: int = Field(4, ge=0, description="b, the lag up to which the hinge function is 1")
    local_steps: int = Field(10, ge=1, description="H, local SGD steps per pull")
    momentum: float = Field(0.0, ge=0, lt=1, description="local heavy-ball momentum, restarted every pull")


def staleness_weight(kind: str, lag: int, a: float, b: int) -> float:
    """s(d) for a lag d ≥ 0 (a negative lag, a client ahead of the master, counts as fresh)."""
    d = max(0, lag)
    if kind == "polynomial":
        return (d + 1) ** (-a)
    if kind == "hinge":
        return 1.0 if d <= b else 1.0 / (a * (d - b) + 1.0)
    if kind == "constant":
        return 1.0
    raise ValueError(f"staleness {kind!r}: expected polynomial, hinge or constant")


class FedAsyncServer(AsyncServer):
    config: FedAsyncConfig
    update_key = "params"
    latest_statistics = False  # mixed with α_t in apply()

    def apply(self, client: int, update: Update, lr: float) -> dict:
        return self._mix(update)[1]

    def gap_and_apply(self, client: int, update: Update, lr: float) -> tuple[float, dict]:
        """The gap read in the pass of the mix, unless a subclass overrides a hook this fuses."""
        if not self.hooks_are(FedAsyncServer, "apply", "gap_before", "computed_on"):
            return super().gap_and_apply(client, update, lr)
        sent = self.computed_if_behind(client)
        sq, fields = self._mix(update, None if sent is None else (self.params, sent))
        return self.gap_of(sq), fields

    def _mix(self, update: Update,
             gap_of: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[float | None, dict]:
        """x ← (1 − α_t)·x + α_t·x_new in one pass (model_passes.step), the statistics mixed the same; Σ (x −
        θ_computed)² when `gap_of` is given, and the log's fields."""
        cfg = self.config
        alpha_t = cfg.alpha * staleness_weight(cfg.staleness, self.lag_of(update), cfg.a, cfg.b)
        self.params, sq = model_passes.step(self.params, update.tensors["params"], alpha_t, gap_of, scale=1.0 - alpha_t)
        if "buffers" in update.tensors:
            self.buffers = mix(self.buffers, update.tensors["buffers"], alpha_t)
        return sq, {"alpha": round(alpha_t, 9)}

    def instruction(self, client: int, theta: torch.Tensor) -> Instruction:
        return model_instruction(theta, self.buffers, self.updates, lr=self.lr)


def mix(x: torch.Tensor, x_new: torch.Tensor, alpha: float) -> torch.Tensor:
    """(1 − α)·x + α·x_new, out of place; α = 1 gives x_new and α = 0 gives x exactly."""
    return x.mul(1.0 - alpha).add_(x_new, alpha=alpha)


class LocalStepsClient(ClientAlgorithm):
    """H local SGD steps from the model it is sent; sends the new model (`sends = "params"`, FedAsync) or
    its difference from the model it was sent (`sends = "delta"`, FedBuff), the BatchNorm statistics,
    the echoed version and the mean RMS of its steps' raw gradients (the gap's normaliser)."""

    sends: ClassVar[str] = "params"

    def on_instruction(self, instruction: Instruction) -> Update:
        session = LocalRound(self, instruction, measure_grad_rms=True)
        for _ in range(int(instruction.meta.get("local_steps", self.config.local_steps))):
            session.step()
        update = session.finish()  # the difference θ_local − θ, statistics and meta
        if self.sends == "params":
            update.tensors["params"] = session.theta
            del update.tensors["delta"]
        update.meta[GRAD_RMS] = session.grad_rms()
        return update


SPEC = AlgorithmSpec(
    name="fedasync", config=FedAsyncConfig, server=FedAsyncServer, client=LocalStepsClient,
    family="asynchronous", paper="FedAsync (Xie, Koyejo, Gupta 2019, Asynchronous Federated Optimization)",
)
