"""All-reduce aggregation in the simulator (`aggregation: allreduce`, algorithms/machinery/rounds.py).

The clients' updates stay whole in the simulator (the server half sums them as in the parameter-server
form: the same mean to float precision); what is modelled is the ring's time and traffic, as live:

- a participant's update waits until the round's last participant has finished computing, then the ring
  takes `ring_seconds` over the participants' links (2(N−1) steps of a 1/N chunk each, allreduce/host.py);
- each participant sends (and receives) 2(N−1)/N of the vector [w·update, w·buffers, w], counted in its
  bytes up and the algorithm's; its report (metadata) then crosses its uplink, and the lowest-ranked
  participant's mean follows it over its uplink and the coordinator's (a `ring_mean` event);
- the round closes on the reports, as live, but not before the previous round's mean has arrived; and
  where the next round draws a client without a replica (sampling, a client back) it waits for the
  mean — here, the lead's update arrives with its mean;
- an instruction to a client whose replica holds the round's θ is charged its metadata only.

An update computed for an earlier process group (the round was started again because a participant
went offline) is dropped, as the live client leaves a collective that cannot finish.
"""
from __future__ import annotations

from typing import Any

import torch

from edgesync.algorithms.machinery.base import Instruction, Update
from edgesync.runtime.allreduce.host import ring_bytes, ring_seconds, ring_vector_bytes, wire_tensors
from edgesync.transport import protocol


class SimRing:
    def __init__(self, engine: Any, server: Any):
        """`engine`: the simulator (its clients, account, push); `server`: the round server half."""
        self.engine, self.server = engine, server
        self.active = bool(getattr(server, "all_reduce", False))
        self.given: dict[int, dict] = {}  # rank → the ring metadata of the instruction it is running
        self.held: dict[int, tuple[Any, Update, float, int | None]] = {}  # this group's finished participants
        self.group: int | None = None
        self.vector_bytes = 0
        self.mean_due = 0.0  # when the last round's mean reaches the coordinator

    def started(self, rank: int, instruction: Instruction) -> None:
        """A client starts an instruction: which group and round it computes for."""
        ring = instruction.meta.get("ring") if self.active else None
        if ring is not None:
            self.given[rank] = ring
            self.vector_bytes = ring_vector_bytes(instruction)

    def finished(self, c: Any, update: Update, done: float, seq: int | None) -> bool:
        """Hold `c`'s update until the round's ring can run; False when the ring does not apply."""
        ring = self.given.pop(c.rank, None) if self.active else None
        if ring is None:
            return False
        c.free_at = done
        if ring["group"] != self.server.ring_group:
            return True  # its group was given up: nothing is sent
        if self.group != ring["group"]:
            self.group, self.held = ring["group"], {}
        self.held[c.rank] = (c, update, done, seq)
        if set(self.held) >= set(ring["members"]):
            self._release(ring)
        return True

    def _release(self, ring: dict) -> None:
        engine, server, members = self.engine, self.server, list(ring["members"])
        start = max(done for _, _, done, _ in self.held.values())
        links = [(engine.clients[m].up.link, engine.clients[m].down.link) for m in members]
        end = start + ring_seconds(links, self.vector_bytes, start)
        sent = ring_bytes(self.vector_bytes, len(members))
        # a client without a replica could be drawn next: the round waits for the mean that brings it θ
        waits = getattr(server.config, "samples_clients", False) or not set(server.online) <= set(members)
        previous_mean = self.mean_due  # a round closes only after the previous round's mean is in
        for rank in members:
            c, update, _, seq = self.held[rank]
            c.bytes_up += sent
            engine.account.bytes_up += sent
            c.free_at = end
            c.times.update_sent(end)
            size = protocol.update({**update.meta, "ring": {"bytes": sent}}, {}).wire_size()
            at = max(c.up.arrival(end, size), previous_mean)
            if rank == members[0]:  # the lead: its mean follows its report on the same uplink
                mean = protocol.update({"ring": {"mean_of": 0}}, self._mean_tensors(update)).wire_size()
                self.mean_due = c.up.arrival(end, mean)
                engine.push(self.mean_due, "ring_mean", rank, None, mean, c.epoch)
                at = self.mean_due if waits else at
            engine.push(at, "to_server", c.rank, update, size, c.epoch, seq)
        self.held = {}

    def _mean_tensors(self, update: Update) -> dict[str, torch.Tensor]:
        """What the lead's mean message carries: tensors the size of the update and of the buffers."""
        out = {"mean": update.tensors[self.server.update_key]}
        if "buffers" in update.tensors:
            out["buffers"] = update.tensors["buffers"]
        return out


def wire_size(instruction: Instruction) -> int:
    """An instruction's size as it travels (ring_host.RingHost.wire): θ left out where the client holds it."""
    return protocol.train(instruction.meta, wire_tensors(instruction)).wire_size()
