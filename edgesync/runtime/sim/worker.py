"""A worker of the simulator's Ray backend (ray_backend.py): it runs some clients' instructions.

It holds the training data (once: read from Ray's object store, not copied per task), one model, and for
each client it is given what the serial simulator keeps for it: the trainer (its batch order), the client
half (its state) and the virtual step clock (its factor sampler). An instruction comes with its virtual
start time and the device's next offline time, over the driver's channel (channel.py); the worker
returns the update (or that the device went
offline) and the instruction's virtual duration: the numbers the serial simulator computes, since a
client's work depends only on the instruction, its data and its own state, and the model is loaded from
the instruction as in the serial run (client halves' contract, algorithms/machinery/base.py).
"""
from __future__ import annotations

import math
import traceback
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from edgesync import algorithms
from edgesync.algorithms.machinery.base import AlgorithmConfig, ClientAlgorithm, Instruction, Update
from edgesync.emulation.profiles import FactorSampler, Profile
from edgesync.models import build_model
from edgesync.transport.allocator import tune_allocator
from edgesync.runtime.sim.channel import SIM, WorkerChannel
from edgesync.runtime.sim.state import client_trainer, fresh_half, step_clock
from edgesync.runtime.sim.virtual_step import VirtualStep
from edgesync.trainer import DeviceOffline, StepSample, StepTimeline, Trainer, TrainerStats
from edgesync.transport.contracts.ray_worker import RAY_WORKER, RayKind
from edgesync.transport.contracts.version import PROTOCOL_KEY, ContractMismatch
from edgesync.transport.protocol import Message


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
    duration, and the least factor of the client's next step (the engine's look-ahead, ray_backend.py)."""

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
    """Made a Ray actor by ray_backend.py (`ray.remote(SimWorker)`); plain Python, so tests can run it inline."""

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

    def serve(self, index: int, address: str, server_key: bytes | None, driver: str | None = None) -> None:
        """Run the driver's instructions from its channel (channel.py) until SERVE_END; a failure is sent
        to the driver (its traceback) before it is raised here. `driver`: the contract the driver speaks
        (its tag); each side checks the other's: this worker refuses a driver of another contract (or one
        that names none), and the driver refuses a worker's READY of another."""
        channel = WorkerChannel(index, address, server_key)
        try:
            if (refused := RAY_WORKER.refusal({PROTOCOL_KEY: driver} if driver else {}, here="client")) is not None:
                channel.send(Message(RayKind.REFUSED, {"reason": refused}))
                raise ContractMismatch(refused)
            channel.ready()
            while (message := channel.receive()).type != RayKind.SERVE_END:
                sim = message.meta.pop(SIM)
                if message.type == RayKind.DEVICE_BACK:
                    self.rejoin(sim["rank"])
                    continue
                offline_at = math.inf if sim["offline_at"] is None else sim["offline_at"]
                done = self.run(sim["rank"], Instruction(message.tensors, message.meta), sim["start"], offline_at)
                update = done.update or Update()
                reply = {"rank": sim["rank"], "elapsed": done.elapsed, "next_factor": done.next_factor,
                         "offline": done.update is None}
                channel.send(Message(RayKind.UPDATE, {**update.meta, SIM: reply}, update.tensors))
        except ContractMismatch:
            raise  # the driver refused it and knows why
        except Exception:
            channel.send(Message(RayKind.ERROR, {"reason": traceback.format_exc()}))
            raise
        finally:
            channel.close()

    def run(self, rank: int, instruction: Instruction, start: float, offline_at: float) -> Finished:
        hosted = self.clients[rank]
        clock, half = hosted.clock, hosted.half
        clock.elapsed, clock.offline_at = 0.0, offline_at
        half.ctx.start = start
        try:
            update = half.on_instruction(instruction)
        except DeviceOffline:
            update = None
        return Finished(update, clock.elapsed, clock.sampler.least_next())

    def totals(self) -> dict[int, ClientTotals]:
        return {rank: ClientTotals(h.trainer.stats, h.clock.factors, h.clock.timeline)
                for rank, h in self.clients.items()}


def initial_floor(profile: Profile, seed: int, rank: int) -> float:
    """A client's first step's least factor, as its worker's fresh sampler will draw it."""
    return FactorSampler(profile, seed=seed, rank=rank).least_next()
