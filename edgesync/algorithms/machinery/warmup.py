"""Learning-rate warm-up with momentum correction (DANA App. B.4, after Goyal et al. 2017 §2.2).

Schedule: start at η/N (N = the number of clients the algorithm starts with) and ramp linearly to η
over E epochs of the *whole* training data, progress measured by the master as the samples of the
updates it has applied:

    η(p) = η/N + (η − η/N) · min(1, p / E),   p = Σ samples applied / Σ_i data_size_i   (epochs)

Each update is applied with η at the progress *before* it. The master learns each client's
`data_size` (its number of training samples) from the clients' update meta; until every client has
reported, the total is estimated as N times the mean of the sizes known so far.

Momentum correction. A velocity kept in parameter units, u ← γ·u + η·g and θ ← θ − u (Goyal's Eq. 10),
is rescaled u ← (η_new/η_old)·u whenever η changes; that makes it equal to the learning-rate-free form
v ← γ·v + g, θ ← θ − η·v (PyTorch's, Goyal's Eq. 9) under any schedule. Without it, a velocity built
under the small early η would be too small once η grows (the error spikes the correction prevents).
`correct_momentum` is that rescaling; `momentum_asgd.Velocities` applies it lazily.

With `warmup_epochs = 0` (the default) the schedule is the constant η, bit for bit.

Who decides η. The master does, for every instruction: the schedule needs its view of progress. The
client halves read it with `instruction_lr` and nowhere else. Most masters write it into every
instruction (`lr`); a round master (local SGD, ESync) writes it only under warm-up, because without
warm-up its η is the constant `lr` of the algorithm config it sent in SETUP, and an `lr` key would add
bytes to every instruction on the wire (the simulator counts them).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from edgesync.algorithms.machinery.base import AlgorithmConfig


# Every algorithm has `warmup_epochs` (on AlgorithmConfig); the name stays for the configs built on it.
WarmupConfig = AlgorithmConfig


def warmup_lr(lr: float, n_clients: int, epochs_done: float, warmup_epochs: float) -> float:
    """η at progress `epochs_done`: η/N ramping linearly to η over `warmup_epochs` epochs."""
    if warmup_epochs <= 0 or epochs_done >= warmup_epochs:
        return lr
    start = lr / max(1, n_clients)
    return start + (lr - start) * (epochs_done / warmup_epochs)


def instruction_lr(meta: Mapping[str, Any], config_lr: float | None = None, warmup_epochs: float = 0.0) -> float:
    """η of the instruction with `meta`: the master's `lr`. `config_lr` only for a client of a master that
    leaves `lr` out while its schedule is the constant config `lr` (no warm-up): η is then that."""
    if "lr" in meta:
        return float(meta["lr"])
    if config_lr is not None and not warmup_epochs:
        return float(config_lr)
    under = f" under warm-up ({warmup_epochs:g} epochs)" if warmup_epochs else ""
    raise ValueError(f"an instruction{under} carries no lr: the master decides every instruction's learning rate")


def correct_momentum(velocity: torch.Tensor, lr_old: float, lr_new: float) -> torch.Tensor:
    """Goyal's momentum correction of a velocity in parameter units: u · η_new/η_old (out of place)."""
    if lr_new == lr_old:
        return velocity
    return velocity * (lr_new / lr_old)


class Warmup:
    """The master's view of training progress and the learning rate it implies."""

    def __init__(self, lr: float, warmup_epochs: float, clients: list[int]):
        self.base_lr = lr
        self.epochs = warmup_epochs
        self.n = len(clients)
        self.samples = 0  # samples of the updates applied so far, all clients
        self.data_size: dict[int, int] = {}  # client → training samples it holds (from update meta)

    def epochs_done(self) -> float:
        if not self.data_size:
            return 0.0
        known = sum(self.data_size.values())
        total = known * max(self.n, len(self.data_size)) / len(self.data_size)
        return self.samples / total

    def lr(self) -> float:
        return warmup_lr(self.base_lr, self.n, self.epochs_done(), self.epochs)

    def observe(self, client: int, meta: dict[str, Any]) -> float:
        """Account one arriving update; returns the η to apply it with (the progress before it)."""
        size = meta.get("data_size")
        if isinstance(size, (int, float)) and size > 0:
            self.data_size[client] = int(size)
        lr = self.lr()
        self.samples += int(meta.get("samples", 0))
        return lr
