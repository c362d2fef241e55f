"""The scenario's `sim` section: the virtual-clock simulator's settings and the costs a run measured."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from edgesync.config.strict import Strict


class ServerCostSpec(Strict):
    """The coordinator's cost per event of one algorithm entry, in seconds (runtime/sim/server_cost.py)."""

    decode_update: float = Field(ge=0, description="decoding one UPDATE's frames and checking its tensors")
    collect: float = Field(ge=0, description="the server half's on_update for an update that leaves the "
                           "global model as it is (a barrier collecting)")
    apply: float = Field(ge=0, description="on_update for an update that changes the global model (an "
                         "asynchronous step, a round's aggregation)")
    encode_send: float = Field(ge=0, description="encoding one message the coordinator sends (TRAIN)")
    query: float = Field(ge=0, description="one QUERY: decoding it, on_query, encoding the REPLY")


class SimSpec(Strict):
    """Settings of the virtual-clock simulator (`runtime: sim`)."""

    base_step_s: float | None = Field(None, gt=0, description="undisturbed step time in seconds; "
                                      "null = measured once on this machine per model and batch size")
    server_time: Literal["model", "zero", "measured"] = Field(
        "model", description="coordinator processing time: model (its costs per event, measured once per "
        "machine and cached, recorded in measured_server_s; deterministic), zero (idealised: the coordinator "
        "takes no time) or measured (its wall time at every event; not deterministic)")
    backend: Literal["serial", "ray"] = Field(
        "serial", description="serial: every client's work in this process, one after another; ray: clients' "
        "instructions run at once on Ray workers (this machine's, or the cluster `--ray ADDRESS` or RAY_ADDRESS "
        "names) and are applied in virtual-time order: the same metrics (runtime/sim/ray_backend.py)")
    workers: int | None = Field(None, ge=1, description="ray: worker processes, each hosting a share of the "
                                "clients; null = one per CPU of the Ray cluster")
    spill_mb: float | None = Field(2048, gt=0, description="updates in flight held in memory, in MB; further "
                                   "ones wait on disk until they arrive (runtime/sim/spill.py; results do not "
                                   "change); null = no limit")
    measured_step_s: dict[int, float] = Field(default_factory=dict, description="filled in by a run: the "
                                              "measured step time per batch size, reused on replay")
    calibration: dict[int, dict[str, Any]] = Field(
        default_factory=dict, description="filled in by a run: how each measured_step_s figure was measured "
        "(rounds, load average, cores, busy, when; runtime/bookkeeping/calibration.py)")
    measured_server_s: dict[str, ServerCostSpec] = Field(
        default_factory=dict, description="filled in by a run with server_time model: the coordinator's "
        "costs per algorithm entry (label), reused on replay")
