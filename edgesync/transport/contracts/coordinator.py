"""The client ↔ coordinator contract: its id and version, checked in HELLO (by the coordinator, and by each
follower shard a client says HELLO to) and in WELCOME (by the client).

Its message kinds are `MessageType` (transport/protocol.py, beside the frame that carries them): what each
side may send is `CLIENT_TYPES` and `COORDINATOR_TYPES` there, and the constructors hello() and welcome()
put this contract's `offer()` into HELLO and WELCOME. Version 1: the protocol as docs/protocol.md describes it.
"""
from __future__ import annotations

from edgesync.transport.contracts.version import Contract

COORDINATOR = Contract("coordinator", 1, server="coordinator", client="client")
