"""`check_profile`: a device profile, parsed as a scenario's client profile is, drawn from as the runtimes draw
(a `FactorSampler` per client, seeded by the run's seed and the client's rank: emulation/profiles.py):

- parses: `clients: [{profile: …}]` validates to a DeviceProfile;
- factors: every draw is finite and positive, and the average device is no faster than the hardware (the
  mean of mean_factor over many runs' clients is at least 1: "nothing emulates a faster device");
- reproducible draws: one (seed, rank) gives one sequence of factors (the simulator and a live client draw
  the same steps);
- mean factor: for a kind whose factors do not depend on time, the draws average to mean_factor;
- least next factor: least_next() is at most the factor drawn next, and draws nothing itself (the simulator's
  look-ahead relies on both);
- travels: pickled (a simulator worker, a Ray task) or dumped to JSON and parsed again (what a live client
  receives at SETUP, runtime/live/phases.py), it is the same profile and draws the same factors.
"""
from __future__ import annotations

import json
import math
import pickle
from typing import Any

import numpy as np

from edgesync.config import ScenarioError, load_scenario
from edgesync.emulation.profiles import DeviceProfile, FactorSampler, parse_profile
from edgesync.testing import tiny_task
from edgesync.testing.rules import (FACTORS, LEAST_NEXT, MEAN_FACTOR, PARSES, REPRODUCIBLE_DRAWS, TRAVELS,
                                    ContractViolation)
from edgesync.testing.tiny_task import SEED

DRAWS = 1000
STEP_S = 0.1          # the draws' start times: every 0.1 s over the first 100 s of an algorithm
RANKS = 4             # clients whose draws are checked
POPULATION = 200      # runs (seeds), a client of each, whose mean factors are averaged
STANDARD_ERRORS = 5   # how far a sample mean may fall from what it estimates


def check_profile(name_or_mapping: str | dict[str, Any]) -> None:
    """Check a device profile against the contract; ContractViolation names the first rule it breaks.
    `name_or_mapping` as a scenario's client `profile:` gives it: a name ('x10', 'gamma-hetero') or a mapping
    whose `kind` is built in, an entry point of edgesync.profiles or a `package.module:Class` reference."""
    profile = _parsed(name_or_mapping)
    what = f"profile {profile.label!r}"
    for rank in range(RANKS):
        draws = _draws(FactorSampler(profile, SEED, rank))
        _check_factors(draws, rank, what)
        _check_reproducible(profile, rank, draws, what)
        _check_least_next(profile, rank, draws, what)
        if not profile.varies_in_time:
            _check_mean(FactorSampler(profile, SEED, rank).mean_factor, draws, rank, what)
    _check_population(profile, what)
    _check_travels(profile, what)


def _parsed(value: str | dict[str, Any]) -> DeviceProfile:
    try:
        sc = load_scenario(tiny_task.scenario("sim", clients=[{"profile": value}, "x1"]))
    except ScenarioError as exc:
        raise ContractViolation(PARSES, f"the tiny task's scenario refuses client profile {value!r}: {exc}") from None
    return sc.clients[0].profile


def _draws(sampler: FactorSampler) -> list[float]:
    return [sampler.next(i * STEP_S) for i in range(DRAWS)]


def _check_factors(draws: list[float], rank: int, what: str) -> None:
    for i, factor in enumerate(draws):
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
            raise ContractViolation(FACTORS, f"{what}: client {rank}'s draw {i} (a step at {i * STEP_S:g} s) is "
                                             f"{factor!r}, expected a finite factor > 0")


def _check_reproducible(profile: DeviceProfile, rank: int, draws: list[float], what: str) -> None:
    again = _draws(FactorSampler(profile, SEED, rank))
    if again != draws:
        i = next(i for i, (a, b) in enumerate(zip(draws, again)) if a != b)
        raise ContractViolation(REPRODUCIBLE_DRAWS, f"{what}: two samplers of client {rank} with seed {SEED} differ "
                                                    f"at draw {i}: {draws[i]!r} against {again[i]!r} (draw from the "
                                                    "rng handed in, never from a global or unseeded one)")


def _check_least_next(profile: DeviceProfile, rank: int, draws: list[float], what: str) -> None:
    sampler = FactorSampler(profile, SEED, rank)
    for i, factor in enumerate(draws):
        bound = sampler.least_next()
        drawn = sampler.next(i * STEP_S)
        if drawn != factor:
            raise ContractViolation(LEAST_NEXT, f"{what}: calling least_next() changed client {rank}'s draw {i} "
                                                f"from {factor!r} to {drawn!r}: it must draw nothing")
        if bound > drawn:
            raise ContractViolation(LEAST_NEXT, f"{what}: least_next() said {bound!r} before client {rank}'s draw "
                                                f"{i} (a step at {i * STEP_S:g} s), which drew {drawn!r}: it must "
                                                "be a lower bound")


def _check_mean(mean_factor: float, draws: list[float], rank: int, what: str) -> None:
    sample = np.asarray(draws)
    allowed = STANDARD_ERRORS * sample.std() / math.sqrt(len(sample)) + 1e-9 * abs(mean_factor)
    if not abs(sample.mean() - mean_factor) <= allowed:
        raise ContractViolation(MEAN_FACTOR, f"{what}: client {rank}'s {len(sample)} draws average "
                                             f"{sample.mean():.6g}, its mean_factor says {mean_factor!r} (allowed "
                                             f"±{allowed:.3g})")


def _check_population(profile: DeviceProfile, what: str) -> None:
    """Over many runs' clients: a kind may draw a whole cluster's speed once per run (gamma-homo)."""
    means = np.asarray([FactorSampler(profile, seed, seed % RANKS).mean_factor for seed in range(POPULATION)])
    if not np.isfinite(means).all():
        raise ContractViolation(FACTORS, f"{what}: a client's mean_factor is not finite")
    floor = 1 - STANDARD_ERRORS * means.std() / math.sqrt(POPULATION) - 1e-9
    if means.mean() < floor:
        raise ContractViolation(FACTORS, f"{what}: over {POPULATION} runs' clients (seeds 0 to {POPULATION - 1}) mean_factor averages "
                                         f"{means.mean():.6g}, below 1: nothing emulates a device faster than the "
                                         "hardware")


def _check_travels(profile: DeviceProfile, what: str) -> None:
    expected = _draws(FactorSampler(profile, SEED, 0))
    wire = json.loads(json.dumps(profile.model_dump(mode="json")))
    for route, rebuild in (("pickled", lambda: pickle.loads(pickle.dumps(profile))),
                           ("dumped to JSON for a live client and parsed", lambda: parse_profile(wire))):
        try:
            copy = rebuild()
        except Exception as exc:  # noqa: BLE001 - whatever fails on the way is the finding
            raise ContractViolation(TRAVELS, f"{what} cannot be {route}: {type(exc).__name__}: {exc}") from exc
        if copy != profile:
            raise ContractViolation(TRAVELS, f"{what} {route} is another profile: {copy!r}")
        if _draws(FactorSampler(copy, SEED, 0)) != expected:
            raise ContractViolation(TRAVELS, f"{what} {route} draws other factors than itself")
