"""Link emulation in the live transport: each outgoing message is held until it would have arrived.

A socket with a link set for a peer hands its messages to a `Pacer` instead of ZeroMQ. The pacer
schedules each one on that peer's `LinkChannel` (serialization at the link's rate after the messages
before it, then latency, jitter and loss as delay: `emulation/links.py`) and releases it at that
time. Both ends pace what they send, so a client's uplink and the coordinator's downlink to each
client are shaped independently. A sender's own link (`set_own_link`: the coordinator's, a scenario's
`coordinator_link`) is a stage every message crosses first, shared by all destinations, before the
destination's link (store and forward, as in the simulator). Releasing happens inside the sockets' `recv`, which both ends call
whenever they wait: no extra thread touches a ZeroMQ socket. (A client computing a step releases a
due message at its next receive; ESync's non-blocking queries are the only messages sent while a
client computes, and its throttled steps wait through `recv`.)

Held frames are copied: the algorithm may change a tensor in place after sending it.
"""
from __future__ import annotations

import heapq
import math
import itertools
import time
from typing import Hashable

from edgesync.emulation.links import Link, LinkChannel


def _origin(origin: float | None) -> float:
    return math.inf if origin is None else origin  # an infinite origin puts every moment before the trace


class Pacer:
    """Messages in flight on emulated links, per destination, released at their arrival times."""

    def __init__(self):
        self.origin: float | None = None  # perf_counter when the algorithm started: link traces run from then
        self.channels: dict[Hashable, LinkChannel] = {}
        self.own: LinkChannel | None = None  # the sender's own link, shared by every destination
        self.exempt: set[Hashable] = set()  # destinations beside it (a follower shard's lead: another network)
        self._held: list[tuple[float, int, Hashable, list[bytes]]] = []
        self._seq = itertools.count()

    def set_link(self, dest: Hashable, link: Link, seed: int = 0) -> None:
        if link.unlimited:
            self.channels.pop(dest, None)
        else:
            self.channels[dest] = LinkChannel(link, seed, origin=_origin(self.origin))

    def set_own_link(self, link: Link, seed=0) -> None:
        self.own = None if link.unlimited else LinkChannel(link, seed, origin=_origin(self.origin))

    def set_origin(self, origin: float | None) -> None:
        """Link traces count from `origin`, a perf_counter reading; None (no algorithm runs, or a client that
        has not heard the algorithm's clock yet): the links keep their settings from before a trace's first row."""
        self.origin = origin
        for channel in [*self.channels.values(), *([self.own] if self.own else [])]:
            channel.origin = _origin(origin)

    def shapes(self, dest: Hashable) -> bool:
        return (self.own is not None and dest not in self.exempt) or dest in self.channels

    def schedule(self, dest: Hashable, size: int) -> float:
        """Put a message of `size` bytes for `dest` on its links now; returns its arrival time (perf_counter).
        Once per message: `hold` it with that time."""
        due = time.perf_counter()
        if self.own is not None and dest not in self.exempt:
            due = self.own.arrival(due, size)
        if (channel := self.channels.get(dest)) is not None:
            due = channel.arrival(due, size)
        return due

    def hold(self, dest: Hashable, frames: list, size: int, due: float | None = None) -> float:
        """Hold a message for `dest` until `due` (by default: scheduled now); returns its release time."""
        due = self.schedule(dest, size) if due is None else due
        copied = [bytes(f) for f in frames]
        heapq.heappush(self._held, (due, next(self._seq), dest, copied))
        return due

    def next_due(self) -> float | None:
        return self._held[0][0] if self._held else None

    def release(self, now: float | None = None) -> list[tuple[Hashable, list[bytes]]]:
        """Messages whose time has come, oldest first."""
        now = time.perf_counter() if now is None else now
        out = []
        while self._held and self._held[0][0] <= now:
            _, _, dest, frames = heapq.heappop(self._held)
            out.append((dest, frames))
        return out

    def drain(self) -> list[tuple[Hashable, list[bytes]]]:
        """Everything still held (on close: better late than lost)."""
        out = [(dest, frames) for _, _, dest, frames in sorted(self._held)]
        self._held.clear()
        return out

    def __len__(self) -> int:
        return len(self._held)
