"""The simulator's coordinator side as K parameter-server shards, each with its own thread and link.

One shard with an unlimited link is the single coordinator of coordinator.py. With `shards: K` each
shard owns a slice of the parameters (models/shard_plan.py) and serves its part of every update and every
instruction: its work is the coordinator's cost times its share of the parameters, and its part of a
message, that share of the bytes, crosses its own link (`coordinator_link`: the server machine's NIC,
one FIFO per direction). Shards work in parallel; each serves the parts it receives in arrival order.

How an update goes (a fork and a join):
- it leaves the client whole (its link carries every part); part j then crosses shard j's inbound link;
- shard j starts on it once the part is in and it has finished what came before (`starts`); the server
  half's state changes when every shard has started (`ready`): with one shard, when the coordinator
  starts on it, as before;
- shard j is busy for its share of the charge, then encodes its part of each message sent back, one
  after the other, each crossing shard j's outbound link; the client has a message when its last part
  has come (then its own downlink carries the whole).

A query (ESync's State Server) and its reply are the lead's (shard 0's) alone. Not modelled: the few
hundred bytes of header each part adds, and per-message costs that do not scale with its size.

Each shard's load (metrics/coordinator_load.py): busy from its start on a message until its last part is encoded,
and each part's wait from its arrival in the shard to that start; the run reports the busiest shard's.
"""
from __future__ import annotations

import math

from edgesync.constants import TIME_GRID_DIGITS
from edgesync.emulation.links import Link, LinkChannel
from edgesync.metrics.coordinator_load import CoordinatorLoad


class Shards:
    def __init__(self, fractions: tuple[float, ...], inbound: Link, outbound: Link, seed: int = 0):
        self.fractions = fractions
        self.free = [0.0] * len(fractions)  # each shard's thread is busy until then
        # each shard's NIC, one FIFO per direction; its jitter and losses seeded apart from the clients' links
        self.ins = [LinkChannel(inbound, seed=[seed, 1, 2 * j]) for j in range(len(fractions))]
        self.outs = [LinkChannel(outbound, seed=[seed, 1, 2 * j + 1]) for j in range(len(fractions))]
        self.loads = [CoordinatorLoad() for _ in fractions]
        self.began = list(self.free)  # each shard's start on the message being served: busy from there

    @property
    def lead_only(self) -> tuple[float, ...]:
        return (1.0,) + (0.0,) * (len(self.fractions) - 1)

    def parts(self, size: int, shares: tuple[float, ...] | None = None) -> list[int]:
        """Each shard's part of a `size`-byte message."""
        if len(self.fractions) == 1:
            return [size]
        return [math.ceil(size * f) for f in (shares or self.fractions)]

    def arrive(self, t: float, size: int, shares: tuple[float, ...] | None = None) -> tuple[float, ...]:
        """When each part of a message that reached the server side at `t` is in its shard (a shard with no
        part: `t`). Called in arrival order: the links are FIFOs."""
        return tuple(channel.arrival(t, part) if part or shares is None else t
                     for channel, part in zip(self.ins, self.parts(size, shares)))

    def starts(self, arrivals: tuple[float, ...]) -> list[float]:
        return [max(a, free) for a, free in zip(arrivals, self.free)]

    def ready(self, arrivals: tuple[float, ...], shares: tuple[float, ...] | None = None) -> float:
        """When every shard with a part has started on a message that arrived so: the server half
        handles it then."""
        shares = shares or self.fractions
        return max(s for s, f in zip(self.starts(arrivals), shares) if f)

    def took(self, arrivals: tuple[float, ...], shares: tuple[float, ...] | None, update: bool) -> None:
        """A client's message is taken up: each shard with a part of it waited from its arrival to its start."""
        for load, start, arrival, f in zip(self.loads, self.starts(arrivals), arrivals, shares or self.fractions):
            if f:
                load.served(start - arrival, update)

    def serve(self, arrivals: tuple[float, ...], busy: float, shares: tuple[float, ...] | None = None) -> list[float]:
        """Each shard works its share of `busy` from its start; returns when each is done."""
        self.began = self.starts(arrivals)
        return [s + busy * f for s, f in zip(self.began, shares or self.fractions)]

    def send(self, done: list[float], sizes: list[int], encode_s: list[float],
             shares: tuple[float, ...] | None = None) -> list[float]:
        """Each shard encodes its part of every message in turn from `done` and puts it on its link.
        Returns when each message's last part arrives at the client side; the shards are then free."""
        shares = shares or self.fractions
        t, arrivals = list(done), []
        for size, encode in zip(sizes, encode_s):
            last = -math.inf
            for j, part in enumerate(self.parts(size, shares)):
                if not shares[j]:
                    continue
                t[j] += encode * shares[j]
                last = max(last, self.outs[j].arrival(t[j], part))
            arrivals.append(last)
        for j, f in enumerate(shares):
            if f:
                self.free[j] = round(t[j], TIME_GRID_DIGITS)
                self.loads[j].busy(self.began[j], self.free[j])
        return arrivals

    def load(self, end: float) -> dict:
        """The busiest shard's load figures over the run to `end` (one shard: the coordinator's)."""
        figures = [load.finish(end, "virtual", len(self.loads)) for load in self.loads]
        return max(figures, key=lambda f: f["busy_s"])
