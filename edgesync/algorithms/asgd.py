"""ASGD / ASP: the asynchronous parameter server, Hogwild-style (ALGORITHMS.md, "Asynchronous").

The master applies each gradient the moment it arrives, θ ← θ − η·g, and replies to that client
alone with the new θ. Nobody waits for anybody; gradients are computed on stale models. The master
keeps the BatchNorm statistics of the latest update. Each reply carries the model version so the
lag τ (updates applied by others since the client's model was sent) is known; each applied update
logs τ and DANA's gap G between the model applied to and the one the gradient was computed on.
"""
from __future__ import annotations

from typing import Literal

import torch

from edgesync.algorithms.base import AlgorithmConfig, AlgorithmSpec, Send, ServerAlgorithm, Update
from edgesync.algorithms.gradient_client import GradientClient, model_instruction
from edgesync.algorithms.registry import register
from edgesync.algorithms.staleness import staleness_fields


class ASGDConfig(AlgorithmConfig):
    name: Literal["asgd"] = "asgd"


class ASGDServer(ServerAlgorithm):
    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.lag_sum = 0  # Σ τ over applied updates, for the mean lag
        self.sent: dict[int, torch.Tensor] = {}  # the model each client is computing on (no copies:
        #                                         the global model is replaced, never changed in place)

    def start(self) -> list[Send]:
        return [self._reply(c) for c in self.clients]

    def on_update(self, client: int, update: Update) -> list[Send]:
        if client not in self.clients:
            return []
        lag = self.updates - int(update.meta.get("version", self.updates))
        self.lag_sum += lag
        g = update.tensors["grad"]
        self.log_update(client, **staleness_fields(lag, self.params, self.sent.get(client, self.params), g))
        self.params = self.params - self.config.lr * g
        if "buffers" in update.tensors:
            self.buffers = update.tensors["buffers"].clone()
        self.updates += 1
        return [self._reply(client)]

    def on_client_lost(self, client: int) -> list[Send]:
        if client in self.clients:
            self.clients.remove(client)
        return []

    def _reply(self, client: int) -> Send:
        self.sent[client] = self.params
        return Send(client, model_instruction(self.params, self.buffers, self.updates))


SPEC = register(AlgorithmSpec(
    name="asgd", config=ASGDConfig, server=ASGDServer, client=GradientClient,
    family="asynchronous", paper="Asynchronous parameter-server SGD (survey §3.3.2)",
))
