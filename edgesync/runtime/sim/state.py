"""What the simulator keeps per client and per event (simulator.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from edgesync.algorithms.machinery.base import AlgorithmConfig, ClientAlgorithm
from edgesync.emulation.availability import Schedule
from edgesync.emulation.links import UNLIMITED as UNLIMITED_LINK, LinkChannel
from edgesync.emulation.profiles import FactorSampler, Profile
from edgesync.runtime.bookkeeping.accounting import ClientClock
from edgesync.runtime.sim.process import EagerContext
from edgesync.runtime.sim.virtual_step import VirtualStep
from edgesync.runtime.bookkeeping.workload import trainer_seed
from edgesync.trainer import Trainer

# Events after which the global model may have changed (a stop rule is checked): an update arrives, the
# coordinator takes a queued one, or a device leaves or returns (a round may close without it).
UPDATING = frozenset({"to_server", "server_free", "availability", "presence", "due"})


@dataclass
class SimClient:
    rank: int
    profile: Profile
    trainer: Trainer | None          # None where a Ray worker hosts it (ray_backend.py)
    half: ClientAlgorithm | None
    clock: VirtualStep
    up: LinkChannel = field(default_factory=lambda: LinkChannel(UNLIMITED_LINK))
    down: LinkChannel = field(default_factory=lambda: LinkChannel(UNLIMITED_LINK))
    free_at: float = 0.0           # when it finishes what it is computing
    times: ClientClock = field(default_factory=ClientClock)
    bytes_up: int = 0
    bytes_down: int = 0
    schedule: Schedule = field(default_factory=lambda: Schedule(None))  # its availability
    online: bool = True
    epoch: int = 0                 # times it went offline: what was sent to or from an earlier one is lost
    offline_s: float = 0.0         # time spent offline, this algorithm
    offline_since: float | None = None
    rejoined: int = 0


def step_clock(profile: Profile, seed: int, rank: int, base_step_s: float) -> VirtualStep:
    """A client's virtual step clock, its factors drawn as every runtime draws them for (seed, rank)."""
    return VirtualStep(FactorSampler(profile, seed=seed, rank=rank), base_step_s)


def client_trainer(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, config: AlgorithmConfig, seed: int,
                   rank: int, indices: np.ndarray, clock: VirtualStep) -> Trainer:
    """A client's trainer on the shared model and data: its rows, its batch order, the clock's steps."""
    return Trainer(model=model, x=x, y=y, batch_size=config.batch_size, seed=trainer_seed(seed, rank),
                   subset=indices, hook=clock)


def fresh_half(holder, spec, config: AlgorithmConfig) -> None:
    """Give `holder` (a SimClient, or a Ray worker's hosted client: `trainer`, `clock`, `half`) a new
    client half, as at the start or when its device comes back; its clock reads the half's time."""
    holder.half = spec.client(config, holder.trainer)
    holder.half.ctx = EagerContext(lambda: holder.clock.elapsed)
    holder.clock.now = lambda: holder.half.ctx.now()  # a trace's factor and availability go by virtual time


@dataclass(order=True)
class Event:
    time: float
    seq: int
    kind: str = field(compare=False)        # to_client | to_server | query | reply | resume | server_free
    client: int = field(compare=False)      # -1: none (server_free)
    message: Any = field(compare=False)     # Instruction, Update, or a query's / reply's metadata
    size: int = field(compare=False, default=0)
    epoch: int = field(compare=False, default=0)  # the client's epoch when it was sent (availability)
