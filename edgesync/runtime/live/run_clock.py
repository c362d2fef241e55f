"""The algorithm's clock as a live client sees it, for emulation that changes with time.

Traces (a device's factor, a link's rate) and availability are written in seconds since the algorithm
started, and the coordinator's clock is the one that counts (the simulator's virtual clock plays its part
there). Where a scenario has any of them, the coordinator stamps every message it sends with its clock at the
message's arrival (the protocol's `clock` header field: the time it was sent, plus its time on the
emulated link to that client, which the coordinator's pacer knows). A client estimates the offset between
that clock and its own perf_counter from each stamped message as `clock − received_at`; a message that
waited longer than planned (in the kernel, or for the coordinator's loop to release it) makes the estimate
too small by its delay, so the largest estimate — the least delayed message, as NTP's minimum-delay
filter — is kept. What is left is the real network's one-way latency of the quickest message
(microseconds on one machine, about a millisecond on a lab's LAN), by which the client runs behind.

A client forgets the offset when it is set up for an algorithm (SETUP: the coordinator's clock restarts
at zero for each algorithm) and learns it again from the next stamped message.
"""
from __future__ import annotations

import time


class RunClock:
    def __init__(self) -> None:
        self.offset: float | None = None  # algorithm time − perf_counter

    def observe(self, clock_s: float, received_at: float | None = None) -> None:
        estimate = clock_s - (time.perf_counter() if received_at is None else received_at)
        if self.offset is None or estimate > self.offset:
            self.offset = estimate

    def reset(self) -> None:
        self.offset = None

    @property
    def known(self) -> bool:
        return self.offset is not None

    def now(self, local: float | None = None) -> float | None:
        """The algorithm's time at perf_counter reading `local` (now), or None before the first stamp."""
        if self.offset is None:
            return None
        return (time.perf_counter() if local is None else local) + self.offset

    def local(self, algorithm_s: float) -> float | None:
        """The perf_counter reading at algorithm time `algorithm_s`."""
        return None if self.offset is None else algorithm_s - self.offset
