"""The scenario's `faults` (when a silent peer is gone) and `checkpoint` (what a live run can resume from)."""
from __future__ import annotations

from pydantic import Field

from edgesync.config.strict import Strict


class FaultsSpec(Strict):
    client_timeout_s: float = Field(30.0, gt=0, description="live runs: a client (or, seen from a client, the "
                                    "coordinator) silent this long is gone; heartbeats go every second")
    quorum: int = Field(1, ge=1, description="synchronous algorithms go on while at least this many clients "
                        "are alive; below it they wait client_timeout_s for returns, then the run aborts")


class CheckpointSpec(Strict):
    every_updates: int = Field(200, ge=0, description="live runs: write RUN_DIR/checkpoint.pt every this many "
                               "global updates (besides each algorithm's start and end); 0 = not by updates")
    every_s: float = Field(30.0, ge=0, description="live runs: also write it every this many seconds of the "
                           "algorithm's clock; 0 = not by time (both 0: no checkpoint, no --resume)")
