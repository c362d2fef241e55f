"""Many devices per process: `edgesync client --slots K` hosts K logical clients in one OS process.

A lab machine emulating hundreds of sampled devices cannot start hundreds of client processes: each
holds its own interpreter and torch runtime (docs/benchmarks.md measures what one costs and what a
slot costs). So a process hosts **slots**. Each slot is an ordinary `EdgeClient` running in a thread
of its own, with its own ZeroMQ DEALER socket and identity, rank, data split, profile, throttle and
algorithm state: the coordinator needs no change and sees K clients. `--rank R --slots K` asks for
ranks R … R+K−1; without `--rank` the coordinator assigns them.

What the slots share, and why it is safe:

- **The compute turn** (emulation/compute_turn.py): the process runs one torch thread, and a slot
  computes a training step only while it holds the turn — from loading its parameters into the
  model to reading the gradient. Its throttle's sleep, its waits for messages and its sends happen
  without it, so one slot's emulated slowness is another's compute. The turn is granted earliest
  deadline first. A slot waiting for it keeps heart-beating on its own socket.
- **The step's start.** A slot's step starts when it asks for the turn: the wait is part of the
  emulated device's step, as a process's wait for a shared core is (the base step leaves room for it,
  emulation/device_model.py, and HELLO tells the coordinator which clients share a turn).
- **One model object per (model, device)** (`SlotTrainer`): each slot keeps its parameters and
  BatchNorm statistics as flat vectors and loads them into the shared module inside the turn; the
  gradient and the statistics the forward pass left are read before the turn is given up. Client
  halves already load their parameters before every step (the simulator shares one model the same
  way); what a slot saves is the module's gradients and bookkeeping.
- **The data**: `workload.dataset()` loads a dataset once per process; each slot keeps only its
  split as a tensor. Set-up runs one slot at a time, so the first loads it and the others reuse it.
- **The undisturbed step** is measured once per process and (model, batch size, device), holding the
  turn across the measured steps: the slots report the same step, measured without each other.
- **Isolation** applies to the process as a whole (a thread cannot be pinned alone): the plan gives
  every slot of a process the same core or CPU quota, the process applies it once (pinning every one
  of its threads), and each slot's `isolation` detail says so. Hosted in a thread of a larger process
  (tests) nothing is applied.

A slot that fails (ClientFailed: refused, its rank taken, the coordinator gone) is logged with its
rank and does not stop the others; `SlotHost.run` returns the failures once every slot has ended, and
`edgesync client` then exits 1.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import torch

from edgesync import params as flat
from edgesync.constants import CONNECT_TIMEOUT_S
from edgesync.data.datasets import ArrayDataset, to_tensor
from edgesync.emulation import isolation
from edgesync.emulation.compute_turn import ComputeTurn
from edgesync.emulation.throttle import IDLE_EVERY_S
from edgesync.models import build_model
from edgesync.transport.allocator import glibc
from edgesync.runtime.live.client import EdgeClient
from edgesync.runtime.live.context import ClientFailed
from edgesync.trainer import Interrupt, StepHook, Trainer
from edgesync.transport.protocol import Message
from edgesync.transport.security import ClientKeys

log = logging.getLogger("edgesync.slots")

# glibc gives every thread that allocates an arena of its own (up to 8 per core) and keeps what a thread
# frees in its arena: K slot threads each held on to their last step's activations and messages. Slots
# compute one at a time, so they lose nothing by sharing two (docs/benchmarks.md, "Many devices per
# process", measured the peak with and without). MALLOC_ARENA_MAX in the environment wins.
SLOT_MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt(3)'s parameter number, from glibc's malloc.h


@dataclass
class SlotTrainer(Trainer):
    """A slot's trainer: its own data, mini-batch order, parameters and buffers; the model object is its
    process's, used only while this slot holds the compute turn."""

    turn: ComputeTurn = field(default_factory=ComputeTurn)
    idle: Callable[[], None] | None = None  # the slot's heartbeat, while it waits for the turn
    lead: Callable[[], float] = lambda: 0.0  # seconds from asking to its step's deadline (the turn's priority)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._theta = flat.get_params(self.model)
        self._buffers = flat.get_buffers(self.model)
        self._holding = False  # this slot holds the turn for the step in progress
        self._asked = 0.0

    def get_params(self) -> torch.Tensor:
        return self._theta.clone()

    def set_params(self, theta: torch.Tensor) -> None:
        self._theta.copy_(_checked(theta, self._theta, "parameters"))

    def get_buffers(self) -> torch.Tensor:
        return self._buffers.clone()

    def set_buffers(self, buffers: torch.Tensor) -> None:
        self._buffers.copy_(_checked(buffers, self._buffers, "buffers"))

    def gradient(self, weight_decay: float = 0.0, interrupt: Interrupt | None = None) -> tuple[torch.Tensor, float]:
        self._asked = time.perf_counter()
        self.turn.acquire(self._asked + self.lead(), self.idle)
        self._holding = True
        try:
            flat.set_params(self.model, self._theta)
            flat.set_buffers(self.model, self._buffers)
            return super().gradient(weight_decay, interrupt)  # its _account gives the turn up
        finally:
            if self._holding:  # the step failed before it was accounted
                self._holding = False
                self.turn.release()

    def _account(self, started: float, samples: int, interrupt: Interrupt | None = None) -> None:
        """Right after the computation (the gradient read): keep what the forward pass left in the
        model's buffers, give the turn up, then let the hook pace the step from when the slot asked."""
        if self._holding:
            self._buffers = flat.get_buffers(self.model)
            self._holding = False
            self.turn.release()
            started = self._asked
        super()._account(started, samples, interrupt)


def _checked(value: torch.Tensor, like: torch.Tensor, what: str) -> torch.Tensor:
    if value.numel() != like.numel():
        raise ValueError(f"{what}: flat vector has {value.numel()} values, the model expects {like.numel()}")
    return value.reshape(-1)


class SlotClient(EdgeClient):
    """One slot: an EdgeClient whose trainer, undisturbed step and isolation are its process's."""

    def __init__(self, host: "SlotHost", index: int, connect: str, **kwargs):
        super().__init__(connect, **kwargs)
        self.host, self.index = host, index
        self._calibrated = host.calibrated  # measured once per process and (model, batch size, device)
        self._warm = host.warm
        self._make_trainer = host.make_trainer

    def hello(self, offline: bool = False) -> Message:
        msg = super().hello(offline)
        # the coordinator's device model counts the clients that share this compute turn
        msg.meta["info"].update(slots=self.host.count, turn=self.host.token, slot=self.index)
        return msg

    def _setup(self, msg: Message) -> None:
        with self.host.setting_up(self.ctx.heartbeat):
            super()._setup(msg)
        session = self.session
        if session is None:
            return
        trainer = session.trainer
        trainer.idle = self.ctx.heartbeat

        def lead() -> float:  # its step must end f × base after it asks (0 until paced: first come first served)
            return session.sampler.mean_factor * session.throttle.reference_s if session.throttle else 0.0
        trainer.lead = lead

    def _calibrate(self, meta: dict) -> Message:
        with self.host.turn.holding(idle=self.ctx.heartbeat):  # its measured steps back to back, alone
            return super()._calibrate(meta)

    def _isolate(self, core: int | None, cpu_share: float | None, prefer: str) -> None:
        applied = self.host.isolate(core, cpu_share, prefer)
        # a record for this slot's rows; releasing it does nothing (the host releases the process's)
        detail = applied.detail
        if self.host.owns_process:  # what the process got, each slot's share of it
            detail += (f" [the whole process {os.getpid()}, whose {self.host.count} slots take turns on its one "
                       "torch thread]")
        self._isolation = isolation.Isolation("process", detail)


@dataclass
class SlotFailure:
    index: int
    rank: int | None
    reason: str


class SlotHost:
    """K slots in this process: `run()` starts one thread per slot and returns their failures when all
    have ended. `first_rank`: slot i asks for rank first_rank + i (None: the coordinator assigns)."""

    def __init__(self, connect: str, count: int, first_rank: int | None = None, profile: str | None = None,
                 device: str | None = None, data_root: str | None = None, keys: ClientKeys | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S):
        if count < 1:
            raise ValueError(f"slots must be at least 1, not {count}")
        self.count = count
        self.turn = ComputeTurn()
        self.token = uuid.uuid4().hex  # names this process's turn in every slot's HELLO
        self.calibrated: dict[tuple, float] = {}
        self.warm: set[tuple] = set()
        self.models: dict[tuple, torch.nn.Module] = {}  # (model, classes, input shape, device) → the shared module
        self.owns_process = False  # set by run(): only a host run by the main thread isolates the process
        self._setup_lock = threading.Lock()
        self._isolation: isolation.Isolation | None = None
        self._isolation_wish: tuple | None = None
        self._isolation_lock = threading.Lock()
        self.clients = [SlotClient(self, i, connect, rank=None if first_rank is None else first_rank + i,
                                   profile=profile, device=device, data_root=data_root, keys=keys,
                                   connect_timeout_s=connect_timeout_s) for i in range(count)]
        self.failures: list[SlotFailure] = []

    # -- running -----------------------------------------------------------------------------------
    def run(self) -> list[SlotFailure]:
        torch.set_num_threads(1)
        self.owns_process = threading.current_thread() is threading.main_thread()
        if self.owns_process and "MALLOC_ARENA_MAX" not in os.environ and (libc := glibc()) is not None:
            libc.mallopt(_M_ARENA_MAX, SLOT_MALLOC_ARENAS)  # before the slot threads allocate
        threads = [threading.Thread(target=self._serve, args=(c,), daemon=True,
                                    name=f"client-{c.wish_rank}" if c.wish_rank is not None else f"slot-{c.index}")
                   for c in self.clients]
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.5)  # in slices: Ctrl-C still reaches the main thread
        finally:
            with self._isolation_lock:
                self._release_isolation()
        return list(self.failures)

    def _serve(self, client: SlotClient) -> None:
        try:
            client.run()
        except ClientFailed as exc:
            self._failed(client, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug in one slot must not pass unnoticed, nor stop the others
            log.exception("slot %d failed", client.index)
            self._failed(client, f"{type(exc).__name__}: {exc}")

    def _failed(self, client: SlotClient, reason: str) -> None:
        rank = client.rank if client.rank is not None else client.wish_rank
        log.error("slot %d (client %s) failed: %s", client.index, "?" if rank is None else rank, reason)
        self.failures.append(SlotFailure(client.index, rank, reason))

    # -- what the slots share ----------------------------------------------------------------------
    @contextmanager
    def setting_up(self, idle: Callable[[], None]) -> Iterator[None]:
        """One slot sets up at a time (the first loads the dataset, the others reuse it); a slot waiting
        here still heart-beats."""
        while not self._setup_lock.acquire(timeout=IDLE_EVERY_S):
            idle()
        try:
            yield
        finally:
            self._setup_lock.release()

    def make_trainer(self, data: ArrayDataset, model_name: str, indices: np.ndarray, batch_size: int, seed: int,
                     device: torch.device, hook: StepHook) -> SlotTrainer:
        """workload.make_trainer's counterpart: this slot's split, the process's model (built once)."""
        key = (model_name, data.num_classes, tuple(data.input_shape), str(device))
        if key not in self.models:
            self.models[key] = build_model(model_name, num_classes=data.num_classes, in_channels=data.input_shape[0])
        x = to_tensor(data.train_x[indices], data.mean, data.std).to(device)
        y = torch.as_tensor(data.train_y[indices], dtype=torch.int64).to(device)
        return SlotTrainer(model=self.models[key], x=x, y=y, batch_size=batch_size, seed=seed, device=device,
                           hook=hook, turn=self.turn)

    def isolate(self, core: int | None, cpu_share: float | None, prefer: str) -> isolation.Isolation:
        """Pin or cap this process as the coordinator planned for its slots (the same for all of them);
        a new request replaces the last."""
        wish = (core, cpu_share, prefer)
        with self._isolation_lock:
            if self._isolation is not None and self._isolation_wish == wish:
                return self._isolation
            self._release_isolation()
            if not self.owns_process:
                applied = isolation.Isolation("none", "none: these slots run in threads of a larger process")
            elif prefer != "none" and core is None and cpu_share is None:
                applied = isolation.Isolation("none", "none: the coordinator's plan gives this process no core or CPU "
                                              "quota (a GPU, or too few cores to pin); steps are paced by sleeping only")
            else:
                applied = isolation.isolate(cpu_share=cpu_share, core=core, prefer="none" if prefer == "none" else "auto")
                if applied.mechanism == "affinity":  # sched_setaffinity pinned the main thread only
                    _pin_threads(os.sched_getaffinity(os.getpid()))
            self._isolation, self._isolation_wish = applied, wish
            log.info("isolation of this process (%d slots): %s", self.count, applied.detail)
            return applied

    def _release_isolation(self) -> None:
        if self._isolation is None:
            return
        isolation.release(self._isolation)
        if self._isolation.mechanism == "affinity":
            _pin_threads(set(os.sched_getaffinity(os.getpid())))  # the main thread's restored set, to every thread
        self._isolation = self._isolation_wish = None


def _pin_threads(cpus) -> None:
    """Give every thread of this process the CPU set `cpus` (Linux pins threads one by one)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return
    for tid in tasks:
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (OSError, ValueError):
            pass  # a thread that has just ended
