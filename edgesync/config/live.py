"""The scenario's `live` section: how a live run hosts its clients on this machine."""
from __future__ import annotations

from pydantic import Field

from edgesync.config.strict import Strict


class LiveSpec(Strict):
    """How `edgesync run` hosts a live scenario's clients on this machine (runtime/live/launcher.py)."""

    processes: int | None = Field(None, ge=1, description="client processes to start, the clients spread over "
                                  "them as slots taking turns on each process's one torch thread (`edgesync client "
                                  "--slots`); null = one process per client while there are at most "
                                  "LOCAL_PROCESSES_PER_CORE per core, else one per core")
