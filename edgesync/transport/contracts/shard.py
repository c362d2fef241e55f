"""The lead ↔ follower shard contract (runtime/sharding/): its id and version, checked at the lead's first
contact (its SHARD `hello`, by the follower; the follower's answer, by the lead), and its commands.

The lead sends SHARD messages whose meta `op` is a `ShardOp`; the follower answers SHARD_STATE with the
same `op` (MessageType, transport/protocol.py). A client of a sharded coordinator speaks the coordinator
contract (coordinator.py) to each follower too.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Any

from edgesync.transport.contracts.version import Contract

SHARD = Contract("shard", 1, server="shard", client="lead")


class ShardOp(StrEnum):
    """What the lead tells a follower (SHARD meta `op`), and what the follower's SHARD_STATE answers."""

    HELLO = "hello"        # first contact: the follower's index, its link, the seed (and the contract)
    SETUP = "setup"        # an algorithm on this follower's slice of θ₀
    START = "start"        # send the server half's first instructions
    APPLY = "apply"        # apply a client's update part, in the lead's order
    LOST = "lost"          # a client left
    JOINED = "joined"      # a client came back
    SNAPSHOT = "snapshot"  # answer the slice of the global model and the bytes counted so far
    END = "end"            # the same, then drop the server half
    SAVE = "save"          # save the server half's state with the lead's checkpoint
    LOAD = "load"          # restore it on a resume
    SHUTDOWN = "shutdown"  # the run is over: exit


# Carried out in the lead's order, after what it ordered before (runtime/sharding/server.py).
ORDERED = frozenset({ShardOp.APPLY, ShardOp.START, ShardOp.LOST, ShardOp.JOINED, ShardOp.END, ShardOp.SAVE,
                     ShardOp.LOAD})


def shard_op(meta: dict[str, Any]) -> ShardOp:
    """The command a SHARD message carries; ValueError naming it if it is none of `ShardOp`."""
    op = meta.get("op")
    try:
        return ShardOp(op)
    except ValueError:
        raise ValueError(f"SHARD op {op!r} is not one of {', '.join(o.value for o in ShardOp)}") from None
