"""A live client's own availability, on the algorithm's clock: when it must go offline, and when it is back.

The client half never hears of it. The client checks `offline_deadline()` between steps and its throttle
sleeps up to it, so a device goes dark at its time even inside a long emulated step (a step's computation
itself, at most one undisturbed step, is not preempted). Until the client has heard the algorithm's clock
(run_clock.py) it cannot tell, and stays online; the coordinator follows the same schedule on its own clock
and ignores whatever an offline client still says.
"""
from __future__ import annotations

import math
import time

from edgesync.emulation.availability import Schedule, parse_availability
from edgesync.runtime.live.run_clock import RunClock


class DeviceSchedule:
    def __init__(self, spec: dict | None, seed: int, rank: int, clock: RunClock):
        self.schedule = Schedule(parse_availability(spec), seed, rank)
        self.clock = clock

    def offline_deadline(self) -> float:
        """The perf_counter reading at which the device goes offline (−∞ if it is offline now; ∞ if it never
        does, or the algorithm's clock is not known yet)."""
        if self.schedule.always or not self.clock.known:
            return math.inf
        now = self.clock.now()
        if not self.schedule.online(now):
            return -math.inf
        return self.clock.local(self.schedule.next_change(now))

    def due(self) -> bool:
        return time.perf_counter() >= self.offline_deadline()

    def back_at(self) -> tuple[float, float]:
        """(algorithm time, perf_counter reading) at which the device is online again (∞ if never)."""
        now = self.clock.now()
        back = self.schedule.next_change(now) if not self.schedule.online(now) else now
        return back, (math.inf if math.isinf(back) else self.clock.local(back))
