"""ESync with the State Server's decision made at the start of each round: for runtimes whose clients
cannot be asked anything in the middle of an instruction (a Flower ClientApp gets one message and sends
one reply), and usable by name (`esync_budget`) in every runtime.

ESync's client asks its State Server before every local iteration whether to stop (esync.txt Alg. 1-2,
`edgesync.algorithms.esync`). Here the server keeps each client's capability c_i (its mean step time in
its last round, measured on the runtime's clock, emulated slowdown included) and sends, in each
client's instruction:

- `budget: steps` (default): n_i = clamp(⌊(c_max − ε) / c_i⌋, 1, max_local_steps), ε = `slack_s`.
  Alg. 2 makes client i READY once its next iteration would end after the slowest client (capability
  c_max, one iteration) is ready; with capabilities steady over a round that is after exactly n_i
  iterations.
- `budget: time`: time_budget_s = c_max − ε; the client runs iterations while the next one (at its
  mean step time so far this round) ends within the budget, at least one. The client's own clock
  decides, as in Alg. 1, so a client that slows down mid-round still stops on time.

Until every capability is known (the first round) each client runs one step: Alg. 1's
RUN-BATCH-DATA-TEST. The aggregation is ESync's, θ ← θ + ε_g·mean(Δ_i) (`local_sgd.DeltaServer`).
Per round the server logs each client's n_i, c_i and budget to updates.jsonl. ESync's spec names this
algorithm as its stand-in where clients cannot query (`AlgorithmSpec.without_queries`).
"""
from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from edgesync.algorithms.machinery.base import AlgorithmSpec, ClientAlgorithm, Instruction, ModelState, Update
from edgesync.algorithms.esync import ESyncKeys
from edgesync.algorithms.local_sgd import DeltaServer, LocalRound


class ESyncBudgetConfig(ESyncKeys):
    name: Literal["esync_budget"] = "esync_budget"
    budget: Literal["steps", "time"] = Field("steps", description="how each client's round is bounded: "
                                             "n_i local steps, or seconds on its own clock")


def step_budget(c_i: float, c_max: float, slack_s: float, cap: int) -> int:
    """n_i: local iterations of a client with step time c_i while the slowest (c_max) runs one."""
    if c_i <= 0:
        return cap
    return max(1, min(cap, math.floor((c_max - slack_s) / c_i + 1e-9)))


class ESyncBudgetServer(DeltaServer):
    """ESync's aggregation with the State Server's decision made once per round, per client."""

    config: ESyncBudgetConfig

    def __init__(self, config: ESyncBudgetConfig, initial: ModelState, clients: list[int]):
        super().__init__(config, initial, clients)
        self.capability: dict[int, float] = {}  # c_i, seconds per local iteration
        self.sent_budget: dict[int, dict] = {}

    def instruction_meta(self, client: int) -> dict:
        meta = super().instruction_meta(client)
        known = [self.capability.get(c) for c in self.clients]
        if any(c is None for c in known):
            meta["local_steps"] = 1  # RUN-BATCH-DATA-TEST: every capability measured first
        else:
            c_max = max(known)
            if self.config.budget == "time":
                meta["time_budget_s"] = max(0.0, c_max - self.config.slack_s)
            else:
                meta["local_steps"] = step_budget(self.capability[client], c_max, self.config.slack_s,
                                                  self.config.max_local_steps)
        self.sent_budget[client] = {k: meta[k] for k in ("local_steps", "time_budget_s") if k in meta}
        return meta

    def on_update(self, client: int, update: Update):
        counted = update.meta.get("version") == self.round and client in self.clients
        if counted and isinstance(update.meta.get("step_s"), (int, float)):
            self.capability[client] = float(update.meta["step_s"])
            self.log_update(client, round=self.round, n_i=update.meta.get("steps"),
                            c_i=round(self.capability[client], 6), **self.sent_budget.get(client, {}))
        return super().on_update(client, update)

    def on_client_lost(self, client: int):
        self.capability.pop(client, None)
        return super().on_client_lost(client)


class ESyncBudgetClient(ClientAlgorithm):
    """Local SGD for as many iterations as the instruction's budget allows (steps or seconds)."""

    config: ESyncBudgetConfig

    def on_instruction(self, instruction: Instruction) -> Update:
        meta, cap = instruction.meta, self.config.max_local_steps
        steps, budget_s = int(meta.get("local_steps", 1)), meta.get("time_budget_s")
        session = LocalRound(self, instruction)
        started = self.ctx.now()
        while True:
            session.step()
            if session.steps >= cap:
                break
            if budget_s is None:
                if session.steps >= steps:
                    break
            else:
                elapsed = self.ctx.now() - started
                if elapsed + elapsed / session.steps > budget_s:
                    break
        step_s = (self.ctx.now() - started) / session.steps  # c_i on the runtime's clock, slowdown included
        update = session.finish()
        update.meta["step_s"] = step_s
        return update


SPEC = AlgorithmSpec(
    name="esync_budget", config=ESyncBudgetConfig, server=ESyncBudgetServer, client=ESyncBudgetClient,
    family="synchronous", paper="ESync (Li, Zhou, Yu): esync.txt Alg. 1–2, decided per round",
)
