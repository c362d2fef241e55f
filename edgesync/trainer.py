"""The local trainer: one model, one client's data, mini-batch gradients and SGD steps on flat vectors.

Algorithms call it; they never see data loading, devices or throttling. A `StepHook` (the device
profile's throttle in the live runtime, a virtual clock in the simulator) is told about every step,
which is how heterogeneity is emulated *around* the algorithm.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from edgesync import params as flat


# An interruptible step's way to wait: `interrupt(seconds)` waits up to that long on the runtime's clock
# and returns the seconds it waited if something cut the wait short, None if it ran out.
Interrupt = Callable[[float], Optional[float]]


class StepAborted(Exception):
    """An interruptible step was cut short (ESync's non-blocking READY, §4.2); its gradient is dropped."""

    def __init__(self, elapsed: float):
        super().__init__(f"step aborted after {elapsed:.6f} s")
        self.elapsed = elapsed


class DeviceOffline(Exception):
    """The emulated device went offline (its availability) during a step: the step never finished and the
    instruction's work is lost, as on a real device. Not a StepAborted, which algorithms catch."""

    def __init__(self, elapsed: float):
        super().__init__(f"device offline after {elapsed:.6f} s of its step")
        self.elapsed = elapsed


class StepHook(Protocol):
    def after_step(self, started: float, interrupt: Interrupt | None = None) -> float:
        """Called right after a step's computation, with the perf_counter time the step began.

        Returns how long the step took on the emulated device, in the runtime's clock: real seconds
        live (after any throttling sleep), virtual seconds in the simulator. With `interrupt`, the
        part of the step that is emulated (a throttle's sleep, a virtual step) waits through it and
        raises StepAborted when it is cut short; computation already done cannot be preempted.
        """


class NoHook:
    def after_step(self, started: float, interrupt: Interrupt | None = None) -> float:
        return time.perf_counter() - started  # nothing emulated: the computed step is complete


class StepSample:
    """A uniform sample of a run's step times, every `stride`-th step with at most LIMIT kept (the stride
    doubles when full): its median is the device's typical step however long the run, in bounded memory."""

    LIMIT = 2048

    def __init__(self, values: list[float] | None = None, stride: int = 1, seen: int = 0):
        self.values, self.stride, self.seen = list(values or []), stride, seen

    def add(self, seconds: float) -> None:
        if self.seen % self.stride == 0:
            self.values.append(seconds)
            if len(self.values) >= self.LIMIT:
                del self.values[1::2]
                self.stride *= 2
        self.seen += 1

    def median(self) -> float | None:
        return float(np.median(self.values)) if self.values else None

    def state_dict(self) -> dict:
        return {"values": list(self.values), "stride": self.stride, "seen": self.seen}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StepSample) and self.state_dict() == other.state_dict()


@dataclass
class TrainerStats:
    steps: int = 0
    samples: int = 0
    compute_s: float = 0.0  # computation plus injected throttling delay: the emulated device's time
    last_step_s: float = 0.0
    aborted_steps: int = 0  # interruptible steps cut short (their gradients were dropped)
    step_times: StepSample = field(default_factory=StepSample)  # each finished step's time, sampled


class StepTimeline:
    """(time on the algorithm's clock, step seconds) of a device whose factor follows a trace, sampled as
    StepSample samples (every `stride`-th step, at most LIMIT kept): how its steps followed the trace."""

    LIMIT = 2048

    def __init__(self, points: list | None = None, stride: int = 1, seen: int = 0):
        self.points, self.stride, self.seen = [list(p) for p in points or []], stride, seen

    def add(self, at_s: float, seconds: float) -> None:
        if self.seen % self.stride == 0:
            self.points.append([round(at_s, 6), round(seconds, 6)])
            if len(self.points) >= self.LIMIT:
                del self.points[1::2]
                self.stride *= 2
        self.seen += 1


def use_channels_last(model: nn.Module, x: torch.Tensor) -> bool:
    """Put a convolutional `model` in the channels-last layout when it runs on CPU tensors like `x`: convolutions
    run faster so (the small CNN's step ≈ 1.3–1.6× on one thread). The flat parameter vectors stay in logical
    order (params.py), so nothing else sees it. Whether its inputs should be made channels-last too: only float
    images (N, C, H, W) are; token indices (N, L), int64, never are."""
    fits = (x.dim() == 4 and x.is_floating_point() and x.device.type == "cpu"
            and any(isinstance(m, nn.Conv2d) for m in model.modules()))
    if fits:
        model.to(memory_format=torch.channels_last)
    return fits


@dataclass
class Trainer:
    model: nn.Module
    x: torch.Tensor  # training data on `device`: (N, C, H, W) float32 images, or (N, L) int64 token indices
    y: torch.Tensor  # (N,) int64
    batch_size: int
    seed: int
    subset: np.ndarray | None = None  # this client's rows of x/y; None = all (lets clients share x/y)
    device: torch.device = torch.device("cpu")
    hook: StepHook = field(default_factory=NoHook)
    stats: TrainerStats = field(default_factory=TrainerStats)

    def __post_init__(self) -> None:
        self.num_samples = len(self.x) if self.subset is None else len(self.subset)
        if self.num_samples == 0:
            raise ValueError("trainer: this client has no training samples")
        self.model.to(self.device).train()
        self._channels_last = use_channels_last(self.model, self.x)
        self._params = list(self.model.parameters())
        self._rng = np.random.default_rng(self.seed)
        self._order = np.empty(0, dtype=np.int64)
        self._cursor = 0

    @property
    def batch_samples(self) -> int:
        """Samples in one mini-batch (a client with fewer samples than the batch size uses all)."""
        return min(self.batch_size, self.num_samples)

    # -- model state as flat vectors -------------------------------------------------------------
    @property
    def num_params(self) -> int:
        return sum(p.numel() for p in self._params)

    def get_params(self) -> torch.Tensor:
        return flat.get_params(self.model)

    def set_params(self, theta: torch.Tensor) -> None:
        flat.set_params(self.model, theta)

    def get_buffers(self) -> torch.Tensor:
        return flat.get_buffers(self.model)

    def set_buffers(self, buffers: torch.Tensor) -> None:
        flat.set_buffers(self.model, buffers)

    # -- data ------------------------------------------------------------------------------------
    def _next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Sampling without replacement, reshuffled every epoch of this client's data."""
        n = self.num_samples
        b = min(self.batch_size, n)
        if self._cursor + b > len(self._order):
            self._order = self._rng.permutation(n)
            if self.subset is not None:
                self._order = self.subset[self._order]
            self._cursor = 0
        idx = torch.from_numpy(self._order[self._cursor:self._cursor + b])
        self._cursor += b
        xb = self.x[idx]
        return (xb.contiguous(memory_format=torch.channels_last) if self._channels_last else xb), self.y[idx]

    def sampler_state(self) -> dict:
        """Where mini-batch sampling stands (this epoch's order, the cursor, the RNG), so a runtime that
        rebuilds the trainer for every instruction (Flower) goes on through the epoch instead of restarting it."""
        return {"rng": self._rng.bit_generator.state, "order": self._order.copy(), "cursor": self._cursor}

    def load_sampler_state(self, state: dict) -> None:
        self._rng.bit_generator.state = state["rng"]
        self._order = np.asarray(state["order"], dtype=np.int64)
        self._cursor = int(state["cursor"])

    # -- computation -----------------------------------------------------------------------------
    def gradient(self, weight_decay: float = 0.0, interrupt: Interrupt | None = None) -> tuple[torch.Tensor, float]:
        """One mini-batch gradient of the mean loss at the current parameters: (g flat, loss).

        Weight decay is added here, on the side that computes the gradient (docs/algorithms.md, "Conventions"). With
        `interrupt` the step may raise StepAborted; its time still counts as the device's.
        """
        started = time.perf_counter()
        xb, yb = self._next_batch()
        self.model.zero_grad(set_to_none=False)
        loss = F.cross_entropy(self.model(xb), yb)
        loss.backward()
        g = flat.get_grads(self.model)
        if weight_decay:
            g.add_(self.get_params(), alpha=weight_decay)
        if self.device.type == "cuda":
            # a GPU runs the step asynchronously: without waiting, its time would be only the kernel launches
            torch.cuda.synchronize(self.device)
        self._account(started, len(yb), interrupt)
        return g, loss.item()

    def sgd_steps(self, steps: int, lr: float, momentum: float = 0.0,
                  weight_decay: float = 0.0, velocity: torch.Tensor | None = None) -> tuple[float, torch.Tensor | None]:
        """`steps` local SGD steps in place (heavy-ball momentum if > 0): returns (mean loss, velocity)."""
        theta = self.get_params()
        losses = []
        for _ in range(steps):
            self.set_params(theta)
            g, loss = self.gradient(weight_decay)
            losses.append(loss)
            if momentum:
                velocity = g if velocity is None else velocity.mul_(momentum).add_(g)
                theta.sub_(velocity, alpha=lr)
            else:
                theta.sub_(g, alpha=lr)
        self.set_params(theta)
        return float(np.mean(losses)) if losses else 0.0, velocity

    def _account(self, started: float, samples: int, interrupt: Interrupt | None = None) -> None:
        try:
            elapsed = self.hook.after_step(started, interrupt) if interrupt else self.hook.after_step(started)
        except StepAborted as aborted:
            self.stats.compute_s += aborted.elapsed
            self.stats.aborted_steps += 1
            raise
        except DeviceOffline as offline:
            self.stats.compute_s += offline.elapsed  # the device worked until it went dark; no step counted
            raise
        self.stats.steps += 1
        self.stats.samples += samples
        self.stats.compute_s += elapsed
        self.stats.last_step_s = elapsed
        self.stats.step_times.add(elapsed)
