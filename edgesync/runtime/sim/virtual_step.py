"""The simulator's step hook: a step lasts factor × base seconds of virtual time."""
from __future__ import annotations

import math
from typing import Callable

from edgesync.emulation.profiles import FactorSampler
from edgesync.trainer import DeviceOffline, Interrupt, StepAborted, StepSample, StepTimeline


class VirtualStep:
    """The simulator's StepHook: each step lasts factor × base seconds of virtual time, the factor its
    profile gives at the step's start (a trace's changes with the time). A step the device's availability
    cuts (it goes offline at `offline_at`) raises DeviceOffline: the instruction's work is lost."""

    def __init__(self, sampler: FactorSampler, base_step_s: float):
        self.sampler = sampler
        self.base_step_s = base_step_s
        self.elapsed = 0.0  # virtual seconds of the instruction being run
        self.factors = StepSample()  # each finished step's drawn factor (the fidelity figures)
        self.now: Callable[[], float] = lambda: self.elapsed  # the virtual time now (the client's context's)
        self.offline_at = math.inf  # when the device goes offline next
        self.timeline = StepTimeline() if sampler.profile.varies_in_time else None

    def after_step(self, started: float, interrupt: Interrupt | None = None) -> float:
        now = self.now()
        factor = self.sampler.next(now)
        step = factor * self.base_step_s
        left = self.offline_at - now
        cut = interrupt(min(step, left)) if interrupt is not None else None
        if cut is not None:
            self.elapsed += cut
            raise StepAborted(cut)
        if step > left:
            self.elapsed += left
            raise DeviceOffline(left)
        self.elapsed += step
        self.factors.add(factor)
        if self.timeline is not None:
            self.timeline.add(now, step)
        return step
