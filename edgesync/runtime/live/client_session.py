"""One algorithm's worth of a live client's state (`Session`), built from a SETUP (`build_session`, shared
with the Flower ClientApp), and the step hook that keeps a busy client heard and stops a step when its
device goes offline (`Beating`)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from edgesync import algorithms
from edgesync.algorithms.machinery.base import ClientAlgorithm
from edgesync.emulation.profiles import FactorSampler, parse_profile
from edgesync.emulation.throttle import Throttle
from edgesync.models import model_id
from edgesync.runtime.bookkeeping.accounting import ClientClock
from edgesync.runtime.bookkeeping.workload import dataset, make_trainer, resolve_device, trainer_seed
from edgesync.trainer import DeviceOffline, NoHook, Trainer


@dataclass
class Session:
    """One algorithm's worth of client state."""

    label: str
    algorithm: ClientAlgorithm
    trainer: Trainer
    sampler: FactorSampler
    throttle: Throttle | None = None
    clock: ClientClock = field(default_factory=ClientClock)


def build_session(meta: dict, indices: np.ndarray, rank: int, device: str | None = None,
                  data_root: str | None = None, make=make_trainer) -> Session:
    """One algorithm's trainer, client half and step-factor sampler, from a SETUP's metadata and data
    indices. `device` and `data_root` are this machine's overrides; `make` builds the trainer (a slot of
    `edgesync client --slots` shares its process's model, runtime/live/slots.py). Shared with the Flower ClientApp."""
    spec = algorithms.get(meta["algorithm"]["name"])
    config = spec.config.model_validate(meta["algorithm"])
    ds = meta["dataset"]
    data = dataset(model_id(ds["name"], ds.get("args")), data_root or ds.get("root"), ds.get("train_size"))
    dev = resolve_device(device or meta.get("device", "cpu"))
    sampler = FactorSampler(parse_profile(meta["profile"]), seed=int(meta["seed"]), rank=rank)
    trainer = make(data, meta["model"], indices, config.batch_size,
                   seed=trainer_seed(int(meta["seed"]), rank), device=dev, hook=NoHook())
    half = spec.client(config, trainer)
    return Session(meta["label"], half, trainer, sampler)


class Beating:
    """The trainer's step hook with heartbeats: after every step, and during a throttle's long sleep,
    the client says it is alive if it has been silent for a second. A step that ends after the device
    should have gone offline (`offline_at`, a perf_counter reading) is not finished: DeviceOffline."""

    def __init__(self, inner, beat, offline_at=lambda: math.inf):
        self.inner, self.beat, self.offline_at = inner, beat, offline_at

    def after_step(self, started: float, interrupt=None) -> float:
        try:
            elapsed = self.inner.after_step(started, interrupt)
        finally:
            self.beat()
        if time.perf_counter() > self.offline_at():
            raise DeviceOffline(elapsed)
        return elapsed
