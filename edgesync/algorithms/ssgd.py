"""SSGD / BSP: synchronous mini-batch SGD with a barrier every round (ALGORITHMS.md, "Synchronous").

Every client computes one gradient on the same θ; when all live clients have reported, the master
steps θ ← θ − η·mean_i(g_i) (heavy-ball momentum on the master if `momentum` > 0) and broadcasts θ.
BatchNorm statistics are averaged over the clients.
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field

from edgesync.algorithms.base import AlgorithmConfig, AlgorithmSpec, Send, ServerAlgorithm, Update
from edgesync.algorithms.gradient_client import GradientClient, model_instruction
from edgesync.algorithms.registry import register


class SSGDConfig(AlgorithmConfig):
    name: Literal["ssgd"] = "ssgd"
    momentum: float = Field(0.0, ge=0, lt=1, description="master momentum m")


class SSGDServer(ServerAlgorithm):
    config: SSGDConfig

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.round = 0
        self.pending: dict[int, Update] = {}
        self.velocity: torch.Tensor | None = None

    def start(self) -> list[Send]:
        return self._broadcast()

    def on_update(self, client: int, update: Update) -> list[Send]:
        if update.meta.get("version") != self.round or client not in self.clients:
            return []  # a late update from an earlier round or a dropped client: not part of this round
        self.pending[client] = update
        return self._aggregate_if_complete()

    def on_client_lost(self, client: int) -> list[Send]:
        if client in self.clients:
            self.clients.remove(client)
        self.pending.pop(client, None)
        return self._aggregate_if_complete()

    def _aggregate_if_complete(self) -> list[Send]:
        if not self.clients or set(self.pending) != set(self.clients):
            return []
        updates = [self.pending[c] for c in sorted(self.pending)]
        g = torch.stack([u.tensors["grad"] for u in updates]).mean(0)
        if self.config.momentum:
            self.velocity = g if self.velocity is None else self.config.momentum * self.velocity + g
            g = self.velocity
        self.params = self.params - self.config.lr * g
        if self.buffers.numel():
            self.buffers = torch.stack([u.tensors["buffers"] for u in updates]).mean(0)
        self.updates += 1
        self.round += 1
        self.pending = {}
        return self._broadcast()

    def _broadcast(self) -> list[Send]:
        return [Send(c, model_instruction(self.params, self.buffers, self.round)) for c in self.clients]


SPEC = register(AlgorithmSpec(
    name="ssgd", config=SSGDConfig, server=SSGDServer, client=GradientClient,
    family="synchronous", paper="Bulk-synchronous parallel SGD (survey §3.3.1)",
))
