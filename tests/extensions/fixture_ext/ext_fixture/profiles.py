"""Device-profile kinds of the stand-in lab package (edgesync.api only), and the broken ones the loader refuses."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from edgesync.api import API_VERSION, DeviceProfile


class BurstProfile(DeviceProfile):
    """A device that stalls now and then: every `every`-th step takes `high` times as long, the others ×1."""

    api_version: ClassVar[str] = API_VERSION
    kind: Literal["burst"] = "burst"
    high: float = Field(4.0, ge=1.0, description="the slowdown of every `every`-th step")
    every: int = Field(3, ge=1, description="one step in this many is slow")

    @property
    def label(self) -> str:
        return f"burst(x{self.high:g}/{self.every})"

    def machine(self, seed: int, rng: np.random.Generator) -> list[int]:
        return [0]  # the steps this client has taken: its sampler's own counter

    def step_factor(self, t: float, rng: np.random.Generator, machine: list[int]) -> float:
        machine[0] += 1
        return self.high if machine[0] % self.every == 0 else 1.0

    def mean_factor(self, machine: Any) -> float:
        return (self.high + self.every - 1) / self.every


class Unversioned(BurstProfile):
    api_version: ClassVar[str | None] = None


class Future(BurstProfile):
    api_version: ClassVar[str] = "2.0"


class NotAProfile:
    """A class, but no DeviceProfile."""
