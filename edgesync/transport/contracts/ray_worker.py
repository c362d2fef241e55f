"""The simulator's Ray driver ↔ worker channel (runtime/sim/channel.py): its id and version, checked at the
channel's set-up (the worker's READY, by the driver; the driver's tag, passed to the worker's serve call,
by the worker), and its message kinds.

The channel carries EdgeSync's frame (transport/protocol.py) with kinds of its own: it is not the
coordinator protocol, and its kinds mean what they say here, not what the coordinator's SETUP or END do.
"""
from __future__ import annotations

from enum import StrEnum

from edgesync.transport.contracts.version import Contract

RAY_WORKER = Contract("ray_worker", 1, server="driver", client="Ray worker")


class RayKind(StrEnum):
    """What travels between the driver and a worker's serve call."""

    READY = "READY"              # worker → driver: it listens (and the contract it speaks)
    REFUSED = "REFUSED"          # either way: the other side speaks another contract (the one line); both end
    TRAIN = "TRAIN"              # driver → worker: an instruction (tensors the worker holds go by name)
    DEVICE_BACK = "DEVICE_BACK"  # driver → worker: a client's device came back: a fresh client half
    UPDATE = "UPDATE"            # worker → driver: the result, its virtual duration, the next step's floor
    ERROR = "ERROR"              # worker → driver: the worker failed (its traceback)
    SERVE_END = "SERVE_END"      # driver → worker: the algorithm is over, the serve call returns
