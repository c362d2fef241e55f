"""The lead of a sharded coordinator: the coordinator's side of its follower shards (server.py).

The coordinator stays the run's only lead: it owns slice 0 of the model (and the BatchNorm buffers),
and everything else it does today. This module is what it adds with `sharding: layer | memory`:
- it connects to every follower (a DEALER each, `LEAD_TYPES` answers) and tells it its index and link;
- per algorithm it sets each follower up on its slice of θ₀ and wraps the lead's server half in a
  `ShardedServer`, through which the coordinator's own calls reach the followers too: `start`, a client
  lost or back (in the order the lead handles them), and `global_params`, which gathers every slice;
- clients learn the followers' addresses and the bounds in SETUP (`meta`).
Unsharded, `NoShards` stands in and changes nothing.
"""
from __future__ import annotations

import itertools
import logging
import uuid
from dataclasses import asdict
from typing import Any

import torch

from edgesync.algorithms.machinery.base import AlgorithmConfig, ModelState, ServerAlgorithm
from edgesync.constants import READY_TIMEOUT_S
from edgesync.models.shard_plan import ShardPlan, plan_for
from edgesync.runtime.sharding.slices import sliced_state
from edgesync.config import Scenario
from edgesync.transport.contracts.shard import SHARD, ShardOp
from edgesync.transport.protocol import LEAD_TYPES, Message, MessageType as T
from edgesync.transport.security import ClientKeys
from edgesync.transport.sockets import ClientSocket

log = logging.getLogger("edgesync.coordinator")


class ShardFailed(RuntimeError):
    """A follower shard did not answer, or answered wrongly: the run cannot go on without its slice."""


class NoShards:
    """One coordinator holds the whole model."""

    meta: dict | None = None
    traffic = (0, 0)

    def lead_state(self, initial: ModelState) -> ModelState:
        return initial

    def wrap(self, server: ServerAlgorithm, config: AlgorithmConfig, initial: ModelState,
             clients: list[int]) -> ServerAlgorithm:
        return server

    def end(self) -> None:
        pass

    def close(self, shutdown: bool = True) -> None:
        pass


class ShardLead:
    def __init__(self, scenario: Scenario, plan: ShardPlan, addresses: list[str], keys: ClientKeys | None = None):
        if len(addresses) != plan.shards - 1:
            raise ValueError(f"{plan.shards} shards need {plan.shards - 1} follower addresses, got {len(addresses)}")
        self.scenario, self.plan, self.addresses = scenario, plan, addresses
        self.socks = [ClientSocket(a, keys=keys, accepts=LEAD_TYPES) for a in addresses]
        self.traffic = (0, 0)  # the followers' bytes up and down, this algorithm, as of their last answer
        self.final: list[torch.Tensor] | None = None  # their slices once the algorithm has ended
        self.saved_tag: str | None = None  # the checkpoint the followers last saved their halves for
        self._ids = itertools.count()
        inbound, outbound = scenario.coordinator_links()
        link = None if scenario.coordinator_link is None else {"in": asdict(inbound), "out": asdict(outbound)}
        try:  # first contact: each follower checks the lead's contract, the lead each follower's answer
            for j, sock in enumerate(self.socks, start=1):
                sock.send(Message(T.SHARD, {"op": ShardOp.HELLO, "index": j, "link": link, "seed": scenario.seed,
                                            **SHARD.offer()}))
            for address, answer in zip(addresses, self._answers(ShardOp.HELLO)):
                if (refused := SHARD.refusal(answer.meta, here="client")) is not None:
                    raise ShardFailed(f"shard at {address}: {refused}")
        except BaseException:
            self.close(shutdown=False)  # nothing left connected
            raise
        log.info("%d shards (sharding %s: %s of the parameters); followers at %s", plan.shards,
                 scenario.sharding, plan.describe(), ", ".join(addresses))

    @property
    def meta(self) -> dict:
        """What a client needs to split its updates and join its instructions (SETUP's `shards`)."""
        return {"bounds": [list(b) for b in self.plan.bounds], "addresses": self.addresses}

    def lead_state(self, initial: ModelState) -> ModelState:
        return sliced_state(initial, self.plan.bounds, 0)

    def wrap(self, server: ServerAlgorithm, config: AlgorithmConfig, initial: ModelState,
             clients: list[int]) -> ServerAlgorithm:
        """Set every follower up for `config` on its slice of `initial`; the lead's `server` (on slice 0)
        then speaks for all of them."""
        for j, sock in enumerate(self.socks, start=1):
            state = sliced_state(initial, self.plan.bounds, j)
            sock.send(Message(T.SHARD, {"op": ShardOp.SETUP, "algorithm": config.model_dump(mode="json"),
                                        "sizes": list(state.sizes), "clients": clients,
                                        "seed": server.population.seed,
                                        "data_sizes": server.population.data_sizes}, {"params": state.params}))
        self._answers(ShardOp.SETUP)
        self.traffic, self.final, self.saved_tag = (0, 0), None, None
        return ShardedServer(server, self)

    def command(self, op: ShardOp, **meta: Any) -> None:
        for sock in self.socks:
            sock.send(Message(T.SHARD, {"op": op, **meta}))

    def gather(self, lead_params: torch.Tensor, op: ShardOp = ShardOp.SNAPSHOT) -> torch.Tensor:
        """The whole global model: the lead's slice and every follower's. During the algorithm a follower
        answers at once, with the updates it has applied so far (a part may still be on its way: an
        evaluation's model is a few updates behind on that slice at most); after `end`, the final slices."""
        if self.final is not None:
            return torch.cat([lead_params, *self.final])
        ident = next(self._ids)
        self.command(op, id=ident)
        answers = self._answers(op, ident)
        self.traffic = (sum(a.meta["bytes_up"] for a in answers), sum(a.meta["bytes_down"] for a in answers))
        slices = [a.tensors["params"] for a in answers]
        if op == ShardOp.END:
            self.final = slices
        return torch.cat([lead_params, *slices])

    def save(self, tag: str) -> None:
        """Every follower saves its server half's state for the lead's checkpoint `tag`."""
        ident = next(self._ids)
        self.command(ShardOp.SAVE, id=ident, checkpoint=tag)
        self._answers(ShardOp.SAVE, ident)
        self.saved_tag = tag

    def load(self, tag: str | None, followers: int) -> None:
        """Every follower restores the state it saved for checkpoint `tag` (taken with `followers` of them)."""
        if followers != len(self.socks):
            raise ValueError(f"the checkpoint was taken with {followers} follower shards, this run has "
                             f"{len(self.socks)}: resume it with the shards it had")
        self.command(ShardOp.LOAD, checkpoint=tag)
        self._answers(ShardOp.LOAD)

    def end(self) -> None:
        """The algorithm is over: each follower applies what the lead applied, answers its last slice and
        counters (kept for the final evaluation) and drops its server half."""
        self.gather(torch.zeros(0), ShardOp.END)

    def close(self, shutdown: bool = True) -> None:
        """`shutdown`: the followers exit (False: they wait for the next variant's lead). Once: a second
        call (the coordinator's close after its run) does nothing."""
        try:
            if shutdown:
                self.command(ShardOp.SHUTDOWN)
        finally:
            for sock in self.socks:
                sock.close(linger_ms=1000)
            self.socks = []

    def _answers(self, op: ShardOp, ident: int | None = None) -> list[Message]:
        out = []
        for address, sock in zip(self.addresses, self.socks):
            while True:
                msg = sock.recv(READY_TIMEOUT_S)
                if msg is None:
                    raise ShardFailed(f"shard at {address} did not answer {op} within {READY_TIMEOUT_S:.0f} s: "
                                      "is `edgesync shard` running there?")
                if msg.type == T.ERROR:
                    raise ShardFailed(f"shard at {address}: {msg.meta.get('reason')}")
                if msg.type == T.SHARD_STATE and msg.meta.get("op") == op and msg.meta.get("id") == ident:
                    out.append(msg)
                    break
        return out


class ShardedServer:
    """The lead's server half, speaking for the whole sharded server: the coordinator's calls that every
    shard must hear go to the followers too; `global_params` is the whole model. Everything else is the
    lead's server half's own."""

    def __init__(self, inner: ServerAlgorithm, lead: ShardLead):
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_lead", lead)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    def start(self):
        self._lead.command(ShardOp.START)
        return self._inner.start()

    def on_update(self, client: int, update):
        # the followers apply this update's parts (numbered by the client) in the lead's order
        self._lead.command(ShardOp.APPLY, rank=client, part=update.meta.get("part", -1))
        return self._inner.on_update(client, update)

    def on_client_lost(self, client: int):
        self._lead.command(ShardOp.LOST, rank=client)
        return self._inner.on_client_lost(client)

    def on_client_joined(self, client: int):
        self._lead.command(ShardOp.JOINED, rank=client)
        return self._inner.on_client_joined(client)

    def global_params(self) -> torch.Tensor:
        return self._lead.gather(self._inner.global_params())

    def state_dict(self) -> dict:
        """The lead's state; each follower saves its own (its --state-dir), tagged with this checkpoint. Once
        the algorithm has ended the followers hold no server half: the checkpoint that carries the final row
        points at their last saved state (a resume past the final row only ends the entry)."""
        if self._lead.final is not None:
            tag = self._lead.saved_tag
        else:
            tag = f"{uuid.uuid4().hex[:12]}@{self._inner.updates}"
            self._lead.save(tag)
        return {"lead": self._inner.state_dict(), "checkpoint": tag, "followers": len(self._lead.socks)}

    def load_state_dict(self, state: dict) -> None:
        self._lead.load(state.get("checkpoint"), state.get("followers", 0))
        self._inner.load_state_dict(state["lead"])


def lead_for(scenario: Scenario, workload, addresses: list[str], keys: ClientKeys | None = None) -> NoShards | ShardLead:
    """The coordinator's shards: none unsharded; else a lead connected to the followers at `addresses`."""
    if scenario.shard_count == 1:
        return NoShards()
    data = workload.data
    plan = plan_for(scenario.model.id, scenario.shard_count, scenario.sharding, data.num_classes,
                    data.input_shape[0])
    return ShardLead(scenario, plan, addresses, keys)

