"""The all-reduce ring's set-up (runtime/allreduce/): its id and version, checked when a client sets its ring
up (SETUP's `ring` section, by the client), and the kinds of `ring` sections the ring's messages carry.

The coordinator tells each participant where the ring meets (the TCPStore's port and key prefix, the
backend, the timeout) in SETUP; a client of another contract fails its set-up with the one line, and the
coordinator ends the run with it. The sections ride in the coordinator protocol's messages (SETUP, TRAIN,
UPDATE), as they always have: no field is added to a message the simulator counts.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Any

from edgesync.transport.contracts.version import Contract

RING = Contract("ring", 1, server="coordinator", client="ring member")


class RingKind(StrEnum):
    """What a message's `ring` section is, told by the keys it has (`ring_kind`)."""

    SETUP = "setup"              # SETUP: port, prefix, backend, timeout_s (and the contract)
    INSTRUCTION = "instruction"  # TRAIN: group, members, current (θ held), lr, ring_s
    REPORT = "report"            # UPDATE from each participant: its weight and the bytes it sent its peers
    MEAN = "mean"                # UPDATE from the round's lead: the mean of round `mean_of`


def ring_kind(section: Any) -> RingKind | None:
    """The kind of a `ring` section, or None for what is none of them."""
    if not isinstance(section, dict):
        return None
    if "mean_of" in section:
        return RingKind.MEAN
    if "members" in section:
        return RingKind.INSTRUCTION
    if "port" in section:
        return RingKind.SETUP
    if "bytes" in section or "weight" in section:
        return RingKind.REPORT
    return None
