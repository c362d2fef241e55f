"""Updates in flight that wait on disk (`sim.spill_mb`): the simulator's memory stays bounded at scale.

A simulated client computes its update when its instruction starts and the update travels until its
virtual arrival; with thousands of asynchronous clients that is one model-sized tensor per client held at
once (10,000 ASGD clients of the small CNN: 7.4 GB). Past `limit_mb` of updates held in memory, further
ones are written to a temporary folder and read back when they reach the coordinator, bit for bit: a
run's results do not depend on the limit.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from edgesync.algorithms.machinery.base import Update


@dataclass
class Spilled:
    """An update on disk: its meta here, its tensors in `path`."""

    path: Path
    meta: dict


def tensor_bytes(update: Update) -> int:
    return sum(t.numel() * t.element_size() for t in update.tensors.values())


class Spill:
    def __init__(self, limit_mb: float | None):
        self.limit = None if limit_mb is None else limit_mb * 2**20
        self.held = 0       # bytes of the updates in flight kept in memory
        self.spilled = 0    # updates written to disk, this algorithm
        self.folder: Path | None = None
        self._names = 0

    def keep(self, update: Update) -> Update | Spilled:
        """The update, or where it waits on disk if memory already holds `limit_mb` of updates."""
        size = tensor_bytes(update)
        if self.limit is None or self.held + size <= self.limit:
            self.held += size
            return update
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="edgesync-spill-"))
        self._names += 1
        path = self.folder / f"{self._names}.pt"
        torch.save(update.tensors, path)
        self.spilled += 1
        return Spilled(path, update.meta)

    def take(self, held: Update | Spilled) -> Update:
        """The update again (it arrived or was lost): read back, or no longer counted as held."""
        if isinstance(held, Spilled):
            tensors = torch.load(held.path, weights_only=True)
            held.path.unlink()
            return Update(tensors, held.meta)
        self.held -= tensor_bytes(held)
        return held

    def clear(self) -> None:
        """Forget what is still in flight (an algorithm ended) and remove the folder."""
        self.held = self.spilled = 0
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
