"""ASGD with momentum on the master: NAG-ASGD, Multi-ASGD, DC-ASGD (dana.txt §3, App. B.1 Alg. 6–8).

The client is ASGD's (one gradient at the θ it was sent); only the master changes.

- **NAG-ASGD** (Alg. 6): one velocity for all clients, v ← γ·v + g; θ ← θ − η·v. Despite the name
  Alg. 6 is heavy-ball momentum, and so is this (docs/algorithms.md, `nag_asgd`).
- **Multi-ASGD** (Alg. 7): one velocity per client, v_i ← γ·v_i + g_i; θ ← θ − η·v_i.
- **DC-ASGD** (Alg. 8, Zheng et al. 2017, Eq. 9 of dana.txt): the gradient is first delay-compensated
  with a diagonal Hessian approximation, ĝ = g + λ·g⊙g⊙(θ − θ_i^sent), θ_i^sent the model last sent
  to client i; then as Multi-ASGD with ĝ. λ = 2 as in DANA's experiments (MXNet's default: 0.04).

Velocities are kept in parameter units, u = η·v (u ← γ·u + η·g; θ ← θ − u), so that the warm-up's
momentum correction (`warmup`) is literally "scale the stored momentum by η_new/η_old"; `Velocities`
does it lazily, when a vector is next used. At a constant η this is the update above.
The gap of an update is ‖θ − θ_i^sent‖/√k, normalized by the RMS of the received gradient g (not ĝ),
which is the client's raw gradient: the normaliser every algorithm uses (`staleness`).
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.machinery.base import AlgorithmSpec, Update
from edgesync.algorithms.machinery.staleness import rms
from edgesync.algorithms.machinery.warmup import WarmupConfig, correct_momentum


class MomentumConfig(WarmupConfig):
    momentum: float = Field(0.9, ge=0, lt=1, description="γ, the master's momentum")


class NAGASGDConfig(MomentumConfig):
    name: Literal["nag_asgd"] = "nag_asgd"


class MultiASGDConfig(MomentumConfig):
    name: Literal["multi_asgd"] = "multi_asgd"


class DCASGDConfig(MomentumConfig):
    name: Literal["dc_asgd"] = "dc_asgd"
    dc_lambda: float = Field(2.0, ge=0, description="λ, delay-compensation strength (DANA's runs: 2)")


def delay_compensate(g: torch.Tensor, lam: float, drift: torch.Tensor | None) -> torch.Tensor:
    """ĝ = g + λ·g⊙g⊙(θ − θ_sent): g as if computed on θ, not θ_sent (DC-ASGD, DANA-DC); `drift` is θ − θ_sent,
    None when nothing was applied in between (then ĝ = g). Two passes into one new tensor: g⊙g, then
    g + λ·(g⊙g)⊙drift in one fused op (the coordinator's time, benchmarks/coordinator_floor.py)."""
    if drift is None:
        return g
    out = torch.mul(g, g)
    return torch.addcmul(g, out, drift, value=lam, out=out)


class DelayCompensation:
    """The DC members' hooks (DC-ASGD, DANA-DC): θ − θ_sent is taken once, for the gap and for ĝ."""

    config: DCASGDConfig
    _drift: torch.Tensor | None = None  # θ − θ_sent of the update being applied

    def gap_before(self, client: int) -> float:
        theta, sent = self.params, self.computed_on(client)
        self._drift = None if theta is sent else theta - sent
        return 0.0 if self._drift is None else rms(self._drift)

    def gradient(self, client: int, g: torch.Tensor) -> torch.Tensor:
        drift, self._drift = self._drift, None
        return delay_compensate(g, self.config.dc_lambda, drift)

    def gap_and_apply(self, client: int, update: Update, lr: float) -> tuple[float, dict]:
        """The gap and ĝ in one pass over g, θ and θ_sent (model_passes.delay_compensated), then the momentum step:
        where these hooks and NAG-ASGD's `apply` are the ones this fuses."""
        if not (self.hooks_are(DelayCompensation, "gap_before", "gradient") and self.hooks_are(NAGASGDServer, "apply")):
            return super().gap_and_apply(client, update, lr)
        sent, g, sq = self.computed_if_behind(client), update.tensors["grad"], None
        if sent is not None:
            g, sq = model_passes.delay_compensated(g, self.params, sent, self.config.dc_lambda)
        self.params, _ = self.velocities.step(self.velocity_key(client), g, lr, self.params)
        return self.gap_of(sq), {}


class Velocities:
    """Momentum vectors u_k in parameter units, one per key, with lazy momentum correction.

    Each u_k is stored with the η it was last written at; read at another η it is scaled by
    η_new/η_old, which equals correcting every stored vector at every change of η. With
    `track_sum`, Σ_k u_k is kept as a running sum (DANA's look-ahead), corrected the same way.
    """

    def __init__(self, momentum: float, track_sum: bool = False):
        self.momentum = momentum
        self.track_sum = track_sum
        self.u: dict[int, torch.Tensor] = {}
        self.lr_of: dict[int, float] = {}
        self._sum: torch.Tensor | None = None
        self._sum_lr = 0.0

    def get(self, key: int, lr: float) -> torch.Tensor | None:
        u = self.u.get(key)
        return None if u is None else correct_momentum(u, self.lr_of[key], lr)

    def total(self, lr: float) -> torch.Tensor | None:
        return None if self._sum is None else correct_momentum(self._sum, self._sum_lr, lr)

    def push(self, key: int, g: torch.Tensor, lr: float) -> torch.Tensor:
        """u_key ← γ·u_key + η·g (out of place); returns the new u_key, the step θ ← θ − u_key."""
        old = self.get(key, lr)
        new = lr * g if old is None else torch.add(self.momentum * old, g, alpha=lr)  # γ·u + η·g, one pass less
        if self.track_sum:
            total = self.total(lr)
            if total is None:
                self._sum = new
            else:
                self._sum = total + new if old is None else total + (new - old)
            self._sum_lr = lr
        self.u[key], self.lr_of[key] = new, lr
        return new

    def step(self, key: int, g: torch.Tensor, lr: float, theta: torch.Tensor,
             gap_of: torch.Tensor | None = None) -> tuple[torch.Tensor, float | None]:
        """`push`, then θ − u_key: (the new θ, Σ (θ − gap_of)² or None). One pass over θ, u_key, g (the tracked sum,
        gap_of) where u_key exists (model_passes.momentum, momentum_sum)."""
        old = self.get(key, lr)
        total = self.total(lr) if self.track_sum and old is not None else None  # push reads it itself otherwise
        if old is None or (self.track_sum and total is None):
            sq = model_passes.sq_dist(theta, gap_of) if gap_of is not None else None
            theta_out, _ = model_passes.step(theta, self.push(key, g, lr), -1.0)  # θ − u, one pass
            return theta_out, sq
        if self.track_sum:  # Σ_j u_j ← Σ_j u_j + (u_key' − u_key) in the same pass
            theta_out, self.u[key], self._sum, sq = model_passes.momentum_sum(theta, old, g, total, self.momentum,
                                                                               -1.0, b=lr, gap_of=gap_of)
            self._sum_lr = lr
        else:
            theta_out, self.u[key], sq = model_passes.momentum(theta, old, g, self.momentum, -1.0, b=lr, gap_of=gap_of)
        self.lr_of[key] = lr
        return theta_out, sq

    def drop(self, key: int) -> None:
        u = self.u.pop(key, None)
        lr = self.lr_of.pop(key, None)
        if u is not None and self.track_sum and self._sum is not None:
            self._sum = self.total(lr) - u
            self._sum_lr = lr


class NAGASGDServer(AsyncServer):
    """NAG-ASGD's master; `velocity_key` and `gradient` are the hooks its variants override."""

    config: MomentumConfig
    track_sum = False  # DANA keeps Σ_j v_j for its look-ahead

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.velocities = Velocities(config.momentum, track_sum=self.track_sum)

    def velocity_key(self, client: int) -> int:
        return -1  # one velocity shared by everyone

    def gradient(self, client: int, g: torch.Tensor) -> torch.Tensor:
        """The gradient that enters the momentum (DC variants compensate it here)."""
        return g

    def apply(self, client: int, update: Update, lr: float):
        g = self.gradient(client, update.tensors["grad"])
        self.params, _ = self.velocities.step(self.velocity_key(client), g, lr, self.params)
        return {}

    def gap_and_apply(self, client: int, update: Update, lr: float) -> tuple[float, dict]:
        """The gap read in the pass that steps θ and u (unless a subclass overrides a hook it fuses)."""
        if not self.hooks_are(NAGASGDServer, "apply", "gradient", "gap_before", "computed_on"):
            return super().gap_and_apply(client, update, lr)
        key, sent = self.velocity_key(client), self.computed_if_behind(client)
        self.params, sq = self.velocities.step(key, update.tensors["grad"], lr, self.params, sent)
        return self.gap_of(sq), {}


class MultiASGDServer(NAGASGDServer):
    def velocity_key(self, client: int) -> int:
        return client

    def on_client_lost(self, client: int):
        self.velocities.drop(client)
        return super().on_client_lost(client)


class DCASGDServer(DelayCompensation, MultiASGDServer):
    config: DCASGDConfig


PAPER = "DANA (Hakimi et al. 2019), dana.txt App. B.1"
NAG_SPEC = AlgorithmSpec(name="nag_asgd", config=NAGASGDConfig, server=NAGASGDServer,
                         client=GradientClient, family="asynchronous", paper=f"{PAPER} Alg. 6")
MULTI_SPEC = AlgorithmSpec(name="multi_asgd", config=MultiASGDConfig, server=MultiASGDServer,
                           client=GradientClient, family="asynchronous", paper=f"{PAPER} Alg. 7")
DC_SPEC = AlgorithmSpec(name="dc_asgd", config=DCASGDConfig, server=DCASGDServer,
                        client=GradientClient, family="asynchronous",
                        paper=f"DC-ASGD (Zheng et al. 2017) as in {PAPER} Alg. 8")
