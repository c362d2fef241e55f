"""Calibrating the coordinator's cost model (server_cost.py): the real server half, fed by real clients.

A calibration is a short, throw-away simulation of one algorithm entry beside the run that needs its
costs: the same model, data, step time and algorithm configuration, with `SERVER_CALIBRATION_CLIENTS`
×1 clients on unlimited links and `server_time: measured`, so every update is decoded from real frames,
checked, applied by the real server half and its replies encoded, each part timed
(`CoordinatorWork`), with updates and queries the real client halves computed. It runs until it has
timed `SERVER_CALIBRATION_UPDATES` applied updates (a few seconds at most: about 20 gradient steps for
ASGD, 80 for SSGD's 20 rounds of 4), and the costs are the medians of each class. Nothing of it is
recorded, and it leaves the run's random state as it found it, so a run that calibrated and one that
read the cache are the same run.

Why a fixed handful of clients, not the scenario's: an aggregation needs every client's update, so
calibrating with 1,000 clients would take 1,000 gradients per sample. The costs per event hardly depend
on the client count: encoding a round's message per client is charged per message, and only building
those instructions inside `on_update` (1–2 µs a client) is not scaled (docs/simulator.md).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

import torch

from edgesync.algorithms.machinery.base import AlgorithmConfig, ModelState
from edgesync.constants import (SERVER_CALIBRATION_CLIENTS, SERVER_CALIBRATION_LIMIT_S,
                                SERVER_CALIBRATION_MIN_UPDATES, SERVER_CALIBRATION_TARGET_S,
                                SERVER_CALIBRATION_UPDATES)
from edgesync.metrics.recorder import RunRecorder
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.runtime.sim.server_cost import CostSamples, cached_costs, cost_key
from edgesync.config import Scenario
from edgesync.config.clients import ClientSpec
from edgesync.config.links import LinksSpec
from edgesync.config.sim import ServerCostSpec


class PreparedRun(Protocol):
    """The prepared simulator a calibration runs beside (simulator.py's `Simulator`, which calls this
    module, so it is not imported here): its scenario and θ₀ key the costs, its progress display says
    what is measured, and its own class runs the throw-away simulation on its data (`share_prepared`,
    `begin`, `coordinator.start`, `step`, `end_processes`)."""

    scenario: Scenario
    initial: ModelState
    progress: Progress


def cached_or_calibrated(run: PreparedRun, config: AlgorithmConfig) -> ServerCostSpec:
    """The costs of `config` on this machine: from the cache, else calibrated beside `run` and cached."""
    key = cost_key(config, run.scenario.model.id, run.initial, SERVER_CALIBRATION_CLIENTS)

    def calibrate_now() -> ServerCostSpec:
        run.progress.status(f"{config.key}: timing the coordinator's work (once on this machine)")
        return calibrate(run, config)

    return cached_costs(key, calibrate_now)


def calibration_scenario(scenario: Scenario, clients: int = SERVER_CALIBRATION_CLIENTS) -> Scenario:
    """`scenario` with the calibration's clients (×1, unlimited links) and the coordinator's work timed."""
    return scenario.model_copy(update={
        "clients": [ClientSpec() for _ in range(clients)], "links": LinksSpec(),
        "sweep": {}, "sim": scenario.sim.model_copy(update={"server_time": "measured", "backend": "serial"})})


def calibrate(run: PreparedRun, config: AlgorithmConfig) -> ServerCostSpec:
    """Time the coordinator's work on `config`'s events in a throw-away simulation sharing `run`'s prepared
    data and model; returns the median cost of each class."""
    samples = timed_events(run, config)
    try:
        return samples.costs()
    except ValueError as exc:
        raise ValueError(f"{config.key}: calibrating the coordinator's costs: {exc}") from None


def timed_events(run: PreparedRun, config: AlgorithmConfig, clients: int = SERVER_CALIBRATION_CLIENTS) -> CostSamples:
    """The calibration's throw-away simulation with `clients` ×1 clients: every event's time and message size
    (what `calibrate` takes the medians of; the coordinator benchmarks read them whole)."""
    samples = CostSamples()
    started = time.perf_counter()
    # fork_rng: whatever the calibration draws from torch's global generator, the run draws the same after it
    with tempfile.TemporaryDirectory(prefix="edgesync-calibration-") as tmp, \
            RunRecorder(Path(tmp)) as recorder, torch.random.fork_rng(devices=[]):
        sim: Any = type(run)(calibration_scenario(run.scenario, clients), recorder)  # the run's engine, not imported
        sim.share_prepared(run, clients)
        sim.samples = samples
        sim.begin(config)
        try:
            sim.coordinator.start()
            while sim.heap and not _enough(samples, time.perf_counter() - started):
                sim.step()
        finally:
            sim.end_processes()
    return samples


def _enough(samples: CostSamples, elapsed_s: float) -> bool:
    applied = samples.count("apply")
    if applied >= SERVER_CALIBRATION_UPDATES or elapsed_s >= SERVER_CALIBRATION_LIMIT_S:
        return True
    return elapsed_s >= SERVER_CALIBRATION_TARGET_S and applied >= SERVER_CALIBRATION_MIN_UPDATES
