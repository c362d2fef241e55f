"""The machine figure the simulator's clock rests on — a model's undisturbed step time — measured so that it
does not drift with the load, and kept with the conditions it was measured under.

Every simulated second of a user's later runs is a multiple of the cached step time, so a value measured
while the test suite (or anything else) ran would stretch all of them: on one machine the same step measured
12.4 ms with the suite running and 15.4 ms half an hour later. Hence:

- **The least disturbed of several rounds.** ROUNDS medians of CALIBRATION_STEPS steps each; the cached figure
  is their minimum (a busy machine only ever slows a step down, so the fastest round is the closest to the
  undisturbed one), and every round is kept.
- **The load checked.** The 1-minute load average and the cores this process may use are read before the
  rounds; a load of BUSY_LOAD_PER_CORE per core or more marks the figure *busy*.
- **Re-measured when it was busy.** A busy figure is kept while the machine stays busy (so that runs side by
  side share one clock) and measured again by the first run that needs it on a quiet machine. A figure cached
  before conditions were recorded is measured again once.
- **Recorded.** The run folder's scenario.yaml holds the figure used (`sim.measured_step_s`) and its
  conditions (`sim.calibration`); `edgesync calibrate` shows the cache and measures it again.
"""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable

from edgesync.constants import CALIBRATION_STEPS, CALIBRATION_WARMUP_STEPS

ROUNDS = 5
BUSY_LOAD_PER_CORE = 0.75  # 1-min load average per usable core: past it, other work likely shared the cores


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load_1min() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # not every platform has one
        return None


def is_busy(load: float | None, cores: int) -> bool:
    return load is not None and load >= BUSY_LOAD_PER_CORE * cores


def round_medians(step: Callable[[], None], rounds: int) -> list[float]:
    """`step` run CALIBRATION_WARMUP_STEPS times untimed, then `rounds` rounds of CALIBRATION_STEPS timed runs:
    each round's median wall time."""
    for _ in range(CALIBRATION_WARMUP_STEPS):
        step()
    medians = []
    for _ in range(rounds):
        times = []
        for _ in range(CALIBRATION_STEPS):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        medians.append(statistics.median(times))
    return medians


def measure(step: Callable[[], None], rounds: int = ROUNDS) -> dict:
    """`step` (one undisturbed training step) timed in `rounds` rounds after a warm-up: the cache entry, the
    minimum of the rounds' medians as `step_s`, with the rounds and the conditions."""
    cores, load = usable_cores(), load_1min()
    medians = round_medians(step, rounds)
    return {"step_s": round(min(medians), 6), "rounds_s": [round(m, 6) for m in medians], "load_1min": load,
            "cores": cores, "busy": is_busy(load, cores), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def busy_now() -> bool:
    return is_busy(load_1min(), usable_cores())


def keep(old: object, new: Callable[[], dict], busy: Callable[[], bool] | None = None) -> tuple[dict, bool]:
    """What the cache keeps for a key holding `old` (None if nothing), and whether that changed it: a figure
    measured on a quiet machine is kept; a busy one is kept while the machine is still busy (runs on a busy
    machine then share one clock) and measured again once it is quiet; a figure without conditions (cached
    before they were recorded), or none, is measured now."""
    measured = isinstance(old, dict) and "step_s" in old
    if measured and (not old.get("busy") or (busy or busy_now)()):
        return old, False
    fresh = new()
    if measured:
        fresh["remeasured"] = old.get("remeasured", 0) + 1
        fresh["replaced_s"] = old["step_s"]
    return fresh, True


def describe(entry: dict) -> str:
    """'21.10 ms (min of 5 rounds, 21.10–21.90 ms; load 0.12 on 2 cores, quiet; 2026-11-27T12:00:00+0000)'."""
    rounds = entry.get("rounds_s") or []
    spread = f", {1e3 * min(rounds):.2f}–{1e3 * max(rounds):.2f} ms" if rounds else ""
    load = entry.get("load_1min")
    state = "busy: measured again on a quiet machine" if entry.get("busy") else "quiet"
    return (f"{1e3 * entry['step_s']:.2f} ms (min of {len(rounds)} rounds{spread}; load "
            f"{'unknown' if load is None else f'{load:g}'} on {entry.get('cores', '?')} cores, {state}; "
            f"{entry.get('measured_at', 'time unknown')})")
