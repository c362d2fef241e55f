"""Throttle: a step lasts factor × reference seconds, measured against a fake 2 ms computation."""
import statistics
import time

import pytest
import torch
from torch import nn

from edgesync.emulation.profiles import ConstantProfile, FactorSampler, parse_profile
from edgesync.emulation.throttle import Throttle, needs_throttle, sleep_until
from edgesync.trainer import Trainer, TrainerStats

pytestmark = pytest.mark.timing  # elapsed times: one at a time, at normal priority (scripts/test.sh)

COMPUTE_S = 0.002


def _throttle(profile: str, reference_s: float) -> Throttle:
    return Throttle(FactorSampler(parse_profile(profile), seed=0, rank=0), reference_s=reference_s)


def _fake_steps(throttle: Throttle, n: int) -> list[float]:
    """n steps of `time.sleep(COMPUTE_S)` "compute", each followed by the throttle: their durations."""
    durations = []
    for _ in range(n):
        started = time.perf_counter()
        time.sleep(COMPUTE_S)
        throttle.after_step(started)
        durations.append(time.perf_counter() - started)
    return durations


def test_step_lasts_factor_times_reference():
    # Prepare: x5 of a 20 ms reference = 100 ms per step. Steps this long keep a busy host's wake-up latency
    # (1.2 ms measured beside the other lanes) well inside 5%, while sleeping (k − 1) × each step's own time,
    # which overshoots 5–10%, would still fail.
    throttle = _throttle("x5", 0.020)
    # Execute
    durations = _fake_steps(throttle, 30)
    # Assert
    assert statistics.median(durations) == pytest.approx(0.100, rel=0.05)
    assert min(durations) >= 0.100  # never shorter than asked
    assert throttle.target_s_total == pytest.approx(30 * 0.100)
    assert throttle.clamped_steps == 0


def test_steps_slower_than_their_target_are_counted():
    # Prepare: x1 of a 1 ms reference asks for 1 ms, but the compute alone takes 2 ms
    throttle = _throttle("x1", 0.001)
    # Execute
    durations = _fake_steps(throttle, 5)
    # Assert: nothing to sleep; each step is clamped and runs at full speed
    assert throttle.clamped_steps == 5
    assert throttle.target_s_total == pytest.approx(5 * 0.001)
    assert statistics.median(durations) < 0.010


def test_clamped_steps_count_only_the_short_targets():
    # Prepare: a sampler that alternates factors 1 and 100 over a 1 ms reference: targets 1 ms and 100 ms, for
    # steps that report 2 ms of compute (their start set 2 ms back, not slept: a busy host's delays, which once
    # stretched a slept 2 ms past a 5 ms target, would only add to it, and 98 ms of them is not a hiccup)
    class Alternating:
        def __init__(self):
            self.factors = iter([1.0, 100.0] * 3)

        def next(self, t=0.0):  # FactorSampler.next(t): the step's start on the algorithm's clock
            return next(self.factors)

    throttle = Throttle(Alternating(), reference_s=0.001)
    # Execute
    for _ in range(6):
        throttle.after_step(time.perf_counter() - 0.002)
    # Assert
    assert throttle.clamped_steps == 3
    assert throttle.target_s_total == pytest.approx(3 * 0.001 + 3 * 0.100)


@pytest.mark.parametrize("ahead_s", [-0.01, 0.0, 0.0002, 0.0009, 0.001, 0.0015, 0.0021, 0.004])
def test_sleep_until_never_returns_early(ahead_s):
    for _ in range(5):
        deadline = time.perf_counter() + ahead_s
        sleep_until(deadline)
        assert time.perf_counter() >= deadline


def test_sleep_until_a_past_deadline_returns_at_once():
    started = time.perf_counter()
    sleep_until(started - 1.0)
    assert time.perf_counter() - started < 0.001


def test_needs_throttle_only_when_slowed():
    assert not needs_throttle(FactorSampler(ConstantProfile(factor=1), seed=0, rank=0))
    assert needs_throttle(FactorSampler(ConstantProfile(factor=2), seed=0, rank=0))
    assert needs_throttle(FactorSampler(parse_profile("gamma-homo"), seed=0, rank=0))


def test_trainer_counts_injected_delay_as_compute_time():
    # Prepare: a tiny model whose real step takes far less than 10 ms; x3 of 10 ms = 30 ms per step
    trainer = Trainer(model=nn.Linear(2, 2), x=torch.randn(4, 2), y=torch.tensor([0, 1, 0, 1]),
                      batch_size=4, seed=0)
    trainer.gradient()  # warm-up, unthrottled and not counted below
    trainer.hook, trainer.stats = _throttle("x3", 0.010), TrainerStats()
    # Execute
    for _ in range(3):
        trainer.gradient()
    # Assert: each step is counted once, with its injected delay
    assert trainer.stats.steps == 3
    assert trainer.stats.last_step_s >= 0.030
    assert 0.090 <= trainer.stats.compute_s < 0.090 * 2
