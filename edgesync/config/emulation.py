"""The scenario's `emulation` section: how emulated devices keep their speed on shared cores."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from edgesync.config.strict import Strict


class EmulationSpec(Strict):
    """How emulated devices keep their speed when clients share a machine (emulation/device_model.py)."""

    mode: Literal["shared", "fixed", "undisturbed"] | None = Field(
        None, description="shared: one base step for every ×1 client, slow enough that the clients of each "
        "host fit in its compute; fixed: base_step_ms; undisturbed: each client's own undisturbed step "
        "(a core per client); null = fixed if base_step_ms is set, else shared")
    base_step_ms: float | None = Field(None, gt=0, description="the ×1 device's step time in ms (mode fixed); "
                                       "the simulator uses it too")
    headroom: float = Field(0.7, gt=0, le=1, description="shared mode: the fraction of a host's cores "
                            "the clients' compute may fill")
    isolation: Literal["auto", "affinity", "cgroup", "none"] = Field(
        "auto", description="auto: pin a client per core where a host has enough, else a cgroup CPU quota "
        "(root), else pacing alone; affinity / cgroup / none ask for one")
    tolerance: float = Field(0.05, gt=0, description="warn when a client's achieved factor is off its "
                             "target by more than this fraction")

    @model_validator(mode="after")
    def _consistent(self) -> "EmulationSpec":
        if self.mode == "fixed" and self.base_step_ms is None:
            raise ValueError("emulation.mode fixed needs emulation.base_step_ms (the ×1 device's step in ms)")
        if self.mode in ("shared", "undisturbed") and self.base_step_ms is not None:
            raise ValueError(f"emulation.base_step_ms fixes the device speed, but emulation.mode is {self.mode}: "
                             "drop base_step_ms, or set mode: fixed")
        return self

    @property
    def resolved_mode(self) -> str:
        return self.mode or ("fixed" if self.base_step_ms is not None else "shared")
