"""Links between a client and the coordinator: how long a message of n bytes takes, per direction.

transfer time = bytes · 8 / rate + latency. A rate of None is an infinite rate (only latency
counts). The simulator uses this model in virtual time; the bandwidth work adds per-client links to
scenarios and live pacing in the transport.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    rate_mbps: float | None = None  # megabits per second; None = infinite
    latency_s: float = 0.0

    def transfer_s(self, nbytes: int) -> float:
        wire = 0.0 if self.rate_mbps is None else nbytes * 8 / (self.rate_mbps * 1e6)
        return wire + self.latency_s


UNLIMITED = Link()
