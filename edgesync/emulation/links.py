"""Links between a client and the coordinator: when a message sent now arrives, per direction.

One direction of one client's link is a `LinkChannel`, a FIFO pipe (TCP keeps order):
- serialization: a message of n bytes occupies the link for n·8/rate seconds, after the messages
  queued before it (a token bucket whose bucket holds one message: store and forward);
- latency: then it travels `latency` seconds, plus a jitter drawn uniformly from ±`jitter`
  (clipped at zero), never overtaking an earlier message;
- loss: each of its ⌈n / 1448⌉ packets is lost with probability `loss`; TCP resends it after one
  round trip (fast retransmit), so every lost packet adds 2·latency plus its own serialization.
  Nothing is ever dropped for good: our transport is reliable, loss shows up as delay.

A link may follow a trace (`trace`: rows (t, rate_mbps, latency_s), emulation/traces.py): from t seconds
after the algorithm started the link has that rate and latency (jitter and loss stay). A message whose
serialization spans a change is sent at each stretch's rate in turn; it then takes the latency in force
when its last bit leaves. A channel's `origin` is the clock reading at which the algorithm started (0 in
the simulator's virtual time; the live ends set it).

The simulator schedules its messages with this model in virtual time; the live transport holds each
outgoing message until its arrival time (`transport/pacing.py`); the kernel backend (`netns/`)
lets `tc` shape the rate instead. The same seed gives the same jitter and losses.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

PACKET_BYTES = 1448  # TCP payload per Ethernet frame (MSS with timestamps)


@dataclass(frozen=True)
class Link:
    rate_mbps: float | None = None  # megabits per second; None = infinite
    latency_s: float = 0.0
    jitter_s: float = 0.0
    loss: float = 0.0               # per packet
    trace: tuple[tuple[float, float, float], ...] = ()  # (t, rate_mbps, latency_s) from t on

    @property
    def unlimited(self) -> bool:
        return self.rate_mbps is None and not (self.latency_s or self.jitter_s or self.loss or self.trace)

    def at(self, t: float) -> "Link":
        """The link in force `t` seconds into the algorithm (without its trace)."""
        if not self.trace:
            return self
        i = bisect.bisect_right([row[0] for row in self.trace], t) - 1
        if i < 0:
            return Link(self.rate_mbps, self.latency_s, self.jitter_s, self.loss)
        _, rate, latency = self.trace[i]
        return Link(rate, latency, self.jitter_s, self.loss)

    def serialized_by(self, start: float, nbytes: int) -> float:
        """When the last bit of `nbytes` whose first leaves at `start` (trace time) has left."""
        if not self.trace:
            return start + self.wire_s(nbytes)
        bits, t = nbytes * 8.0, start
        times = [row[0] for row in self.trace]
        while True:
            rate = self.at(t).rate_mbps
            i = bisect.bisect_right(times, t)
            change = times[i] if i < len(times) else math.inf
            if rate is None:
                return t
            need = bits / (rate * 1e6)
            if t + need <= change:
                return t + need
            bits -= (change - t) * rate * 1e6
            t = change

    def wire_s(self, nbytes: int) -> float:
        return 0.0 if self.rate_mbps is None else nbytes * 8 / (self.rate_mbps * 1e6)

    def transfer_s(self, nbytes: int) -> float:
        """Time to deliver `nbytes` on an idle link without jitter or loss."""
        return self.wire_s(nbytes) + self.latency_s

    def describe(self) -> str:
        if self.unlimited or (self.rate_mbps is None and not (self.latency_s or self.jitter_s or self.loss)
                              and not self.trace):
            return "unlimited"
        parts = ["∞" if self.rate_mbps is None else f"{self.rate_mbps:g} Mbit/s", f"{self.latency_s * 1e3:g} ms"]
        if self.jitter_s:
            parts.append(f"±{self.jitter_s * 1e3:g} ms")
        if self.loss:
            parts.append(f"{self.loss:.2%} loss")
        if self.trace:
            parts.append(f"then a trace of {len(self.trace)} changes")
        return " ".join(parts)


UNLIMITED = Link()


class LinkChannel:
    """One direction of one link, as a FIFO: `arrival(now, nbytes)` schedules a message."""

    def __init__(self, link: Link, seed: int = 0, origin: float = 0.0):
        self.link = link
        self.origin = origin  # the clock reading at which the algorithm (and the link's trace) started
        self.rng = np.random.default_rng(seed)
        self.busy_until = -math.inf   # the link is serializing until then
        self.last_arrival = -math.inf  # FIFO: nothing arrives before what was sent earlier
        self.lost_packets = 0

    def arrival(self, now: float, nbytes: int) -> float:
        link = self.link
        if link.unlimited:
            return now
        start = max(now, self.busy_until)
        if link.trace and math.isinf(self.origin):  # no algorithm clock (yet): the settings before the trace
            link = link.at(-math.inf)
        if link.trace:
            self.busy_until = self.origin + link.serialized_by(start - self.origin, nbytes)
            link = link.at(self.busy_until - self.origin)  # the rate and latency when the last bit leaves
        else:
            self.busy_until = start + link.wire_s(nbytes)
        delay = link.latency_s
        if link.jitter_s:
            delay = max(0.0, delay + self.rng.uniform(-link.jitter_s, link.jitter_s))
        if link.loss:
            packets = max(1, math.ceil(nbytes / PACKET_BYTES))
            lost = int(self.rng.binomial(packets, link.loss))
            self.lost_packets += lost
            delay += lost * (2 * link.latency_s + link.wire_s(PACKET_BYTES))
        self.last_arrival = max(self.busy_until + delay, self.last_arrival)
        return self.last_arrival
