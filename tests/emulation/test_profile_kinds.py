"""A profile kind is one DeviceProfile subclass: written here and nowhere else, it runs in the simulator's
step hook and look-ahead and in the live throttle, through the same methods the built-in kinds have."""
import time
from typing import Any, Literal

import numpy as np
import pytest

from edgesync.emulation.profiles import DeviceProfile, FactorSampler
from edgesync.emulation.throttle import Throttle, needs_throttle
from edgesync.runtime.sim.virtual_step import VirtualStep
from edgesync.runtime.sim.worker import initial_floor


class BurstyProfile(DeviceProfile):
    """A device ×`slow` during the first `burst_s` seconds of every `period_s`, ×1 otherwise, plus a random
    extra of up to `jitter` per step: a new kind that varies in time and draws."""

    kind: Literal["bursty"] = "bursty"
    slow: float = 4.0
    period_s: float = 10.0
    burst_s: float = 2.0
    jitter: float = 0.5

    @property
    def varies_in_time(self) -> bool:
        return True

    def step_factor(self, t: float, rng: np.random.Generator, machine: Any) -> float:
        base = self.slow if t % self.period_s < self.burst_s else 1.0
        return base + self.jitter * float(rng.random())

    def mean_factor(self, machine: Any) -> float:
        share = self.burst_s / self.period_s
        return share * self.slow + (1 - share) + self.jitter / 2


def test_the_simulators_step_hook_runs_a_new_kind():
    profile = BurstyProfile()
    hook = VirtualStep(FactorSampler(profile, seed=0, rank=1), base_step_s=0.5)
    draws = FactorSampler(profile, seed=0, rank=1)
    expected = []
    for _ in range(8):  # the hook's time moves on with its own steps: into the burst and out of it
        expected.append(draws.next(hook.now()) * 0.5)
        assert hook.after_step(0.0) == pytest.approx(expected[-1])
    assert hook.elapsed == pytest.approx(sum(expected))
    assert hook.timeline is not None  # it varies in time: its steps are kept on a timeline
    assert min(expected) >= 0.5 and max(expected) >= 4 * 0.5


def test_the_simulators_look_ahead_bounds_a_new_kinds_next_step():
    # The default lower bound is the next draw itself, read from a copy: drawing it changes nothing.
    sampler = FactorSampler(BurstyProfile(), seed=3, rank=0)
    floor = sampler.least_next()
    assert sampler.next() == floor
    assert initial_floor(BurstyProfile(), 3, 0) == floor


def test_the_live_throttle_paces_a_new_kind():
    profile = BurstyProfile(slow=3.0, jitter=0.0)
    throttle = Throttle(FactorSampler(profile, seed=0, rank=0), reference_s=0.002, clock=lambda local: 1.0)
    assert needs_throttle(throttle.sampler) and throttle.timeline is not None
    started = time.perf_counter()
    elapsed = throttle.after_step(started)  # 1 s into the algorithm: in the burst, ×3
    assert elapsed >= 3 * 0.002
    assert throttle.target_s_total == pytest.approx(3 * 0.002)
    assert throttle.timeline is not None


def test_a_kind_that_does_not_say_its_factors_fails_clearly():
    class Silent(DeviceProfile):
        kind: Literal["silent"] = "silent"

    with pytest.raises(NotImplementedError, match="silent does not say its step factors"):
        FactorSampler(Silent(), seed=0, rank=0).next()
