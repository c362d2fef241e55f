"""SSGD / BSP: synchronous mini-batch SGD with a barrier every round (ALGORITHMS.md, "Synchronous").

Every client computes one gradient on the same θ; when all live clients have reported, the master
steps θ ← θ − η·mean_i(g_i) (heavy-ball momentum on the master if `momentum` > 0) and broadcasts θ.
BatchNorm statistics are averaged over the clients. The round keeps running sums, not every update,
so its memory does not grow with the number of clients. A gradient from a client lost after it
reported still counts: it was computed on this round's θ.
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
        self.reported: set[int] = set()
        self.grad_sum: torch.Tensor | None = None
        self.buffer_sum: torch.Tensor | None = None
        self.velocity: torch.Tensor | None = None

    def start(self) -> list[Send]:
        return self._broadcast()

    def on_update(self, client: int, update: Update) -> list[Send]:
        if update.meta.get("version") != self.round or client not in self.clients or client in self.reported:
            return []  # a late update from an earlier round or a dropped client: not part of this round
        self.reported.add(client)
        self.grad_sum = _accumulate(self.grad_sum, update.tensors["grad"])
        if "buffers" in update.tensors:
            self.buffer_sum = _accumulate(self.buffer_sum, update.tensors["buffers"])
        return self._aggregate_if_complete()

    def on_client_lost(self, client: int) -> list[Send]:
        if client in self.clients:
            self.clients.remove(client)
        return self._aggregate_if_complete()

    def _aggregate_if_complete(self) -> list[Send]:
        if not self.reported or not self.reported.issuperset(self.clients):
            return []
        g = self.grad_sum / len(self.reported)
        if self.config.momentum:
            self.velocity = g if self.velocity is None else self.config.momentum * self.velocity + g
            g = self.velocity
        self.params = self.params - self.config.lr * g
        if self.buffer_sum is not None:
            self.buffers = self.buffer_sum / len(self.reported)
        self.updates += 1
        self.round += 1
        self.reported, self.grad_sum, self.buffer_sum = set(), None, None
        return self._broadcast()

    def _broadcast(self) -> list[Send]:
        return [Send(c, model_instruction(self.params, self.buffers, self.round)) for c in self.clients]


def _accumulate(total: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    return x.clone() if total is None else total.add_(x)


SPEC = register(AlgorithmSpec(
    name="ssgd", config=SSGDConfig, server=SSGDServer, client=GradientClient,
    family="synchronous", paper="Bulk-synchronous parallel SGD (survey §3.3.1)",
))
