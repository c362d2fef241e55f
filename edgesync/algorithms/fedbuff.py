"""FedBuff: federated learning with buffered asynchronous aggregation (Nguyen et al. 2022, "Federated
Learning with Buffered Asynchronous Aggregation"; docs/algorithms.md, `fedbuff`).

A client pulls the global model x at version τ, runs K local SGD steps from it (FedAsync's client
half: local_sgd's `LocalRound`, optional momentum restarted every pull) and sends Δ = x_local − x_pulled.
The server adds each Δ to a buffer, weighted by w = 1/√(1 + t − τ) (`staleness_weighting`, on by
default as in the paper) or 1, t the version when Δ arrives. After B contributions (`buffer_size`)

    x ← x + η_g·(buffer / B),   version t ← t + 1,   buffer cleared

(η_g = `server_lr`). Every contribution arriving at version t goes into the flush t → t + 1, so it is
applied to x_t exactly once: the buffer is emptied by the flush that applies it.

Choices fixed here:
- **A contributor gets the current model back at once**, without waiting for the flush: that is
  FedBuff's point (no client waits for others), and the buffer fills because clients come back. Until
  the flush the model it gets is the one it pulled (the same version, so its next Δ has the same lag);
  one client may contribute several times to one buffer, as in the paper where B is independent of
  the number of clients.
- **`updates` counts flushes** (global model versions): stop rules, checkpoints, the simulator's apply
  cost and the metrics' update count see x change B times less often than contributions arrive. The
  update log has one row per contribution: its lag t − τ, the gap ‖x_t − x_τ‖/√k (x_t is what Δ is
  applied to, x changes only at flushes) normalised by the mean RMS of the client's raw gradients over
  its K steps, its `weight`, `buffered` (contributions in the buffer with it) and `flushed`.
- **BatchNorm statistics are averaged over the buffer at the flush** (weighted by the same w,
  normalised by their sum): the synchronous rule per aggregation, so the statistics change when the
  weights do, and with B = 1 they are the latest, the asynchronous rule.
- A client lost with contributions in the buffer: they stay (they were computed on a model the server
  sent); a client that comes back gets the current model at once, as in ASGD.
- **Concurrency** (`concurrency`, the paper's C; off by default: every client trains at once): at most C
  clients train at a time. The server starts C clients drawn uniformly; each contribution frees its slot and
  the next trainer is drawn uniformly among the clients not training (the contributor among them), as FedBuff's
  server samples and as FLGo and Plato run it. A lost trainer's slot goes to a draw among the others; a client
  that comes back waits to be drawn. The draws are a pure function of the run's seed and their count.
- Defaults: B = 10 (the paper's K), η_g = 1, weighting on, K = 10 local steps (local_sgd's H).
  With B = 1, η_g = 1, no weighting and K = 1 every contribution is −η·g and FedBuff is ASGD.
"""
from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
from pydantic import Field

from edgesync import model_passes
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import AlgorithmConfig, AlgorithmSpec, Instruction, Send, Update
from edgesync.algorithms.fedasync import LocalStepsClient
from edgesync.algorithms.machinery.gradient_client import model_instruction
from edgesync.algorithms.machinery.staleness import raw_gradient_rms, staleness_fields


class FedBuffConfig(AlgorithmConfig):
    name: Literal["fedbuff"] = "fedbuff"
    buffer_size: int = Field(10, ge=1, description="B, contributions per global update (flush)")
    server_lr: float = Field(1.0, gt=0, description="η_g, the server learning rate: x ← x + η_g·(buffer / B)")
    staleness_weighting: bool = Field(True, description="weight each Δ by 1/√(1 + t − τ) in the buffer")
    local_steps: int = Field(10, ge=1, description="K, local SGD steps per pull")
    momentum: float = Field(0.0, ge=0, lt=1, description="local heavy-ball momentum, restarted every pull")
    concurrency: int | None = Field(None, ge=1, description="C, the most clients training at once, each next one "
                                    "drawn uniformly among those not training; null: every client at once")


DRAW_SALT = 0xB0FF  # keeps FedBuff's draws apart from the run's other seeded streams


class FedBuffClient(LocalStepsClient):
    sends = "delta"


class FedBuffServer(AsyncServer):
    config: FedBuffConfig
    update_key = "delta"
    latest_statistics = False  # averaged over the buffer at each flush

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.buffer: torch.Tensor | None = None  # Σ w·Δ of the contributions since the last flush
        self.statistics_sum: torch.Tensor | None = None  # Σ w·(BatchNorm statistics) of the same
        self.statistics_weight = 0.0
        self.contributions = 0
        self.training: list[int] = []  # under `concurrency`: the clients training now
        self.draws = 0  # under `concurrency`: trainers drawn so far (the draws' seed)

    def instruction(self, client: int, theta: torch.Tensor) -> Instruction:
        return model_instruction(theta, self.buffers, self.updates, lr=self.lr)

    def on_update(self, client: int, update: Update) -> list[Send]:
        if client not in self.clients or self.update_key not in update.tensors:
            return []  # a dropped client's late update, or a malformed one: not buffered
        cfg = self.config
        lr = self.warmup.observe(client, update.meta)
        lag = self.lag_of(update)
        self.lag_sum += lag
        weight = 1.0 / math.sqrt(1 + max(0, lag)) if cfg.staleness_weighting else 1.0
        fields = staleness_fields(lag, self.params, self.computed_on(client),
                                  raw_gradient_rms(update.meta, update.tensors))
        if cfg.warmup_epochs:
            fields["lr"] = lr
        self.buffer = _add(self.buffer, update.tensors["delta"], weight)
        if "buffers" in update.tensors:
            self.statistics_sum = _add(self.statistics_sum, update.tensors["buffers"], weight)
            self.statistics_weight += weight
        self.contributions += 1
        flush = self.contributions >= cfg.buffer_size
        self.log_update(client, **fields, weight=round(weight, 9), buffered=self.contributions, flushed=flush)
        if flush:
            self.flush()
        self.lr = self.warmup.lr()
        return self.after_update(client)

    # -- concurrency: at most C clients training ---------------------------------------------------
    def start(self) -> list[Send]:
        if self.config.concurrency is None:
            return super().start()
        return [self.reply(c) for c in self._draw(min(self.config.concurrency, len(self.clients)))]

    def after_update(self, client: int) -> list[Send]:
        if self.config.concurrency is None:
            return super().after_update(client)
        if client in self.training:
            self.training.remove(client)
        return [self.reply(c) for c in self._draw(self.config.concurrency - len(self.training))]

    def on_client_lost(self, client: int) -> list[Send]:
        sends = super().on_client_lost(client)
        if self.config.concurrency is None or client not in self.training:
            return sends
        self.training.remove(client)
        return sends + [self.reply(c) for c in self._draw(1)]

    def on_client_joined(self, client: int) -> list[Send]:
        if self.config.concurrency is None:
            return super().on_client_joined(client)
        self.take_back(client)  # it waits to be drawn
        return [self.reply(c) for c in self._draw(self.config.concurrency - len(self.training))]

    def _draw(self, k: int) -> list[int]:
        """Up to k trainers drawn uniformly, without replacement, among the clients not training."""
        idle = [c for c in self.clients if c not in self.training]
        k = min(k, len(idle))
        if k <= 0:
            return []
        rng = np.random.default_rng([self.population.seed, self.draws, DRAW_SALT])
        self.draws += 1
        chosen = sorted(int(idle[i]) for i in rng.choice(len(idle), size=k, replace=False))
        self.training.extend(chosen)
        return chosen

    def flush(self) -> None:
        """x ← x + η_g·(buffer / B); the statistics' weighted mean; a new version; an empty buffer."""
        self.params, _ = model_passes.step(self.params, self.buffer, self.config.server_lr / self.config.buffer_size)
        if self.statistics_sum is not None:
            self.buffers = self.statistics_sum / self.statistics_weight
        self.updates += 1
        self.buffer, self.statistics_sum, self.statistics_weight, self.contributions = None, None, 0.0, 0


def _add(total: torch.Tensor | None, x: torch.Tensor, weight: float) -> torch.Tensor:
    """total + weight·x, in place on our own running sum; `x` (maybe a read-only view) is never changed."""
    return x * weight if total is None else total.add_(x, alpha=weight)


SPEC = AlgorithmSpec(
    name="fedbuff", config=FedBuffConfig, server=FedBuffServer, client=FedBuffClient,
    family="asynchronous", paper="FedBuff (Nguyen et al. 2022, Federated Learning with Buffered Asynchronous "
                                 "Aggregation)",
)
