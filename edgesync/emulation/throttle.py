"""Live-runtime throttling: make each training step last `factor × reference` seconds.

The reference is the ×1 device's step time: the run's base step (emulation/device_model.py), or in
`undisturbed` mode the client's own undisturbed step time, measured once before training. Sleeping
against that fixed reference (rather than "sleep (k−1) × this step's time") keeps the achieved
slowdown within a few percent: noise in one step's computation does not get multiplied by k.
Factors below 1 cannot make the hardware faster; such steps run at full speed (reported).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from edgesync.emulation.profiles import DeviceProfile, FactorSampler
from edgesync.trainer import DeviceOffline, Interrupt, StepAborted, StepSample, StepTimeline


IDLE_EVERY_S = 0.5  # how often a long sleep wakes for `idle` (the live client's heartbeat)


def sleep_until(deadline: float, idle: Callable[[], None] | None = None) -> None:
    """Sleep to a perf_counter deadline; the last millisecond is spun for precision. `idle` is
    called about every IDLE_EVERY_S of a long sleep (a ×100 step still shows its client alive)."""
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        if idle is not None and left > IDLE_EVERY_S:
            time.sleep(IDLE_EVERY_S)
            idle()
            continue
        time.sleep(left - 0.001 if left > 0.002 else 0)


@dataclass
class Throttle:
    sampler: FactorSampler
    reference_s: float
    target_s_total: float = 0.0  # what the profile asked for, summed over steps
    clamped_steps: int = 0       # steps whose target was below the undisturbed time
    idle: Callable[[], None] | None = None  # called during long sleeps (heartbeats)
    factors: StepSample = field(default_factory=StepSample)  # each finished step's drawn factor, sampled
    # The algorithm's clock at a perf_counter reading (a trace's factor is the one in force when the step
    # starts; None while unknown: the trace's start), and when the device goes offline (availability).
    clock: Callable[[float], float | None] = lambda local: None
    offline_at: Callable[[], float] = lambda: math.inf
    timeline: StepTimeline | None = None  # a traced device's steps over time (set for trace profiles)

    def __post_init__(self) -> None:
        profile = getattr(self.sampler, "profile", None)  # a test's bare factor source has none
        if profile is not None and profile.varies_in_time:
            self.timeline = StepTimeline()

    def after_step(self, started: float, interrupt: Interrupt | None = None) -> float:
        at = self.clock(started)
        factor = self.sampler.next(at or 0.0)
        target = factor * self.reference_s
        offline = self.offline_at()
        if started + target > offline:  # the device goes dark during this step: it never finishes
            sleep_until(offline, self.idle)
            elapsed = time.perf_counter() - started
            self.target_s_total += elapsed
            raise DeviceOffline(elapsed)
        left = started + target - time.perf_counter()
        if left < 0:
            self.clamped_steps += 1
        elif interrupt is not None and interrupt(left) is not None:
            elapsed = time.perf_counter() - started
            self.target_s_total += elapsed
            raise StepAborted(elapsed)  # the emulated device stops now: the step never finished
        self.target_s_total += target
        self.factors.add(factor)
        sleep_until(started + target, self.idle)
        elapsed = time.perf_counter() - started
        if self.timeline is not None and at is not None:
            self.timeline.add(at, elapsed)
        return elapsed


def is_throttled(profile: DeviceProfile) -> bool:
    """Anything but constant ×1 slows the steps (and needs the undisturbed step measured first)."""
    return profile.slows_steps


def needs_throttle(sampler: FactorSampler) -> bool:
    return is_throttled(sampler.profile)
