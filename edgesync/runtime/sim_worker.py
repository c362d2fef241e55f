"""A worker of the simulator's Ray backend (sim_ray.py): it runs some clients' instructions.

It holds the training data (once: read from Ray's object store, not copied per task), one model, and for
each client it is given what the serial simulator keeps for it: the trainer (its batch order), the client
half (its state) and the virtual step clock (its factor sampler). An instruction comes with its virtual
start time and the device's next offline time; the worker returns the update (or that the device went
offline) and the instruction's virtual duration: the numbers the serial simulator computes, since a
client's work depends only on the instruction, its data and its own state, and the model is loaded from
the instruction as in the serial run (client halves' contract, algorithms/base.py).
"""
from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from edgesync import algorithms
from edgesync.algorithms.base import AlgorithmConfig, ClientAlgorithm, Instruction, Update
from edgesync.emulation.profiles import FactorSampler, GammaProfile, Profile
from edgesync.models import build_model
from edgesync.runtime.allocator import tune_allocator
from edgesync.runtime.sim_state import client_trainer, fresh_half, step_clock
from edgesync.runtime.virtual_step import VirtualStep
from edgesync.trainer import DeviceOffline, StepSample, StepTimeline, Trainer, TrainerStats


def factor_floor(sampler: FactorSampler) -> float:
    """The least factor the client's next step can have: a gamma profile's next draw (read from a copy of
    its generator), a constant profile's factor, a trace's smallest."""
    if isinstance(sampler.profile, GammaProfile):
        return copy.deepcopy(sampler).next()
    return sampler.mean_factor


@dataclass
class ClientSpec:
    """What a worker needs to host one client (sent once per algorithm)."""

    rank: int
    profile: Profile
    indices: np.ndarray  # its rows of the training data
    seed: int            # the scenario's


@dataclass
class Finished:
    """One instruction's outcome: its update (None: the device went offline during it), its virtual
    duration, and the least factor of the client's next step (the engine's look-ahead, sim_ray.py)."""

    update: Update | None
    elapsed: float
    next_factor: float


@dataclass
class ClientTotals:
    """What the run folder's clients.jsonl row needs from the worker at an algorithm's end."""

    stats: TrainerStats
    factors: StepSample
    timeline: StepTimeline | None


class _Hosted:
    def __init__(self, clock: VirtualStep, trainer: Trainer, half: ClientAlgorithm):
        self.clock, self.trainer, self.half = clock, trainer, half


class SimWorker:
    """Made a Ray actor by sim_ray.py (`ray.remote(SimWorker)`); plain Python, so tests can run it inline."""

    def __init__(self, x: np.ndarray, y: np.ndarray, model: str, num_classes: int, in_channels: int):
        torch.set_num_threads(1)  # as the serial simulator: one thread, the same arithmetic
        tune_allocator()  # and its allocator settings: a step's activations reuse memory (allocator.py)
        with warnings.catch_warnings():  # the object store's arrays are read-only; training only reads them
            warnings.simplefilter("ignore", UserWarning)
            self.x, self.y = torch.from_numpy(x), torch.from_numpy(y)
        self.model = build_model(model, num_classes=num_classes, in_channels=in_channels)
        self.clients: dict[int, _Hosted] = {}

    def begin(self, config: AlgorithmConfig, base_step_s: float, clients: list[ClientSpec]) -> None:
        """Host `clients` for one algorithm entry (what a previous entry left is dropped)."""
        self.config, self.spec = config, algorithms.get(config.name)
        self.clients = {}
        for c in clients:
            clock = step_clock(c.profile, c.seed, c.rank, base_step_s)
            trainer = client_trainer(self.model, self.x, self.y, config, c.seed, c.rank, c.indices, clock)
            self.clients[c.rank] = hosted = _Hosted(clock, trainer, None)
            fresh_half(hosted, self.spec, config)

    def rejoin(self, rank: int) -> None:
        """The device came back online: its half starts afresh (its trainer and clock go on), as serially."""
        fresh_half(self.clients[rank], self.spec, self.config)

    def run(self, rank: int, meta: dict, start: float, offline_at: float, keys: tuple[str, ...], *arrays) -> Finished:
        """An instruction (`meta` and its tensors `keys` as `arrays`, given as objects in the store where
        sim_ray.py put them: Ray fetches those before the call, while the previous one runs)."""
        instruction = Instruction(from_arrays(dict(zip(keys, arrays))), meta)
        hosted = self.clients[rank]
        clock, half = hosted.clock, hosted.half
        clock.elapsed, clock.offline_at = 0.0, offline_at
        half.ctx.start = start
        try:
            update = half.on_instruction(instruction)
        except DeviceOffline:
            update = None
        if update is not None:
            update = Update(to_arrays(update.tensors), update.meta)
        return Finished(update, clock.elapsed, factor_floor(clock.sampler))

    def totals(self) -> dict[int, ClientTotals]:
        return {rank: ClientTotals(h.trainer.stats, h.clock.factors, h.clock.timeline)
                for rank, h in self.clients.items()}


def as_array(tensor: torch.Tensor):
    """A numpy view, which Ray's serialiser stores out of band (a memory copy, no pickling of the data: a
    torch tensor costs the driver ≈ 2 ms to put or get, its array a fraction of that); a dtype numpy lacks
    (bfloat16) stays a tensor."""
    return tensor if tensor.dtype == torch.bfloat16 else tensor.detach().numpy()


def to_arrays(tensors: dict) -> dict:
    return {k: as_array(t) for k, t in tensors.items()}


def from_arrays(arrays: dict) -> dict:
    """Tensors again, bit for bit, each its own writable memory (an object store's arrays are read-only
    and shared)."""
    return {k: a if isinstance(a, torch.Tensor) else torch.from_numpy(np.array(a)) for k, a in arrays.items()}


def initial_floor(profile: Profile, seed: int, rank: int) -> float:
    """A client's first step's least factor, as its worker's fresh sampler will draw it."""
    return factor_floor(FactorSampler(profile, seed=seed, rank=rank))
