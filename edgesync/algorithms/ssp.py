"""SSP: stale synchronous parallel, ASGD with a delay bound (Ho et al. 2013; survey §3.3.4).

The master applies every gradient at once, as ASGD (θ ← θ − η·g), and counts each client's clock
t_i = the updates it has pushed. A client whose clock runs more than s ahead of the slowest live
client, t_i − min_j t_j > s, gets no reply yet: it waits until the slowest catches up, and is then
sent the model as it is at that moment. So a reply always includes all of the client's own updates and
the client is never more than s pushes ahead of anyone.

- s = 0 is lock-step (BSP): everyone waits for the round's last push, then all are released at once.
  The gradients of a round are applied one by one as they arrive, all computed on the same θ, so a
  round adds −η·Σ_i g_i (SSGD's update with η·N and a sum, not a mean).
- s ≥ the number of pushes in a run is ASGD.
- A lost client leaves the minimum: anyone waiting on it is released.

Per update it logs the lag, the gap, the client's clock and whether its reply is held.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.machinery.base import AlgorithmSpec, Send, Update
from edgesync.algorithms.machinery.warmup import WarmupConfig


class SSPConfig(WarmupConfig):
    name: Literal["ssp"] = "ssp"
    staleness: int = Field(3, ge=0, description="s: how many pushes a client may run ahead of the slowest")


class SSPServer(AsyncServer):
    config: SSPConfig

    def __init__(self, config, initial, clients):
        super().__init__(config, initial, clients)
        self.clock = {c: 0 for c in self.clients}  # t_i: updates client i has pushed
        self.waiting: set[int] = set()  # clients whose reply is held

    def gap_and_apply(self, client: int, update: Update, lr: float):
        """ASGD's step and gap (one pass: `apply` is ASGD's), the client's clock ticked first."""
        self.clock[client] += 1
        g, extra = super().gap_and_apply(client, update, lr)
        return g, {**extra, "clock": self.clock[client], "held": self._ahead(client)}

    def after_update(self, client: int) -> list[Send]:
        self.waiting.add(client)
        return self.release()

    def release(self) -> list[Send]:
        """Replies to every waiting client that is no more than s ahead of the slowest (by rank)."""
        ready = sorted(c for c in self.waiting if not self._ahead(c))
        self.waiting.difference_update(ready)
        return [self.reply(c) for c in ready]

    def on_client_joined(self, client: int) -> list[Send]:
        if client not in self.clock:  # level with the slowest: neither held nor holding anyone back
            self.clock[client] = min((self.clock[c] for c in self.clients), default=0)
        return super().on_client_joined(client)

    def on_client_lost(self, client: int) -> list[Send]:
        self.clock.pop(client, None)
        self.waiting.discard(client)
        super().on_client_lost(client)
        return self.release()

    def _ahead(self, client: int) -> bool:
        slowest = min(self.clock[c] for c in self.clients)
        return self.clock[client] - slowest > self.config.staleness


SPEC = AlgorithmSpec(
    name="ssp", config=SSPConfig, server=SSPServer, client=GradientClient, family="asynchronous",
    paper="Stale synchronous parallel (Ho et al. 2013; survey §3.3.4)",
)
