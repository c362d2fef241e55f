"""A live client's side of a sharded coordinator: a socket to each follower shard beside the lead's.

SETUP's `shards` (sharding/lead.py) names the followers and the bounds of every shard's slice. The client
says HELLO (its rank) to each follower, then for every instruction joins the lead's TRAIN with one TRAIN
part from each follower (shard_slices.join) before its client half runs, and splits its update so each
shard gets its slice (shard_slices.split): the followers' parts first, then the lead's through the main
socket. The client half sees whole models and whole updates, as unsharded.

Waiting for the followers' parts it keeps listening to the lead (END aborts the instruction, as it does a
query: context.py) and says it is alive. Its uplink is one link whichever shard a part goes to: the
follower sockets share the lead socket's pacing channel, and the parts leave before the client goes back
to waiting (a held part would otherwise wait for the socket's next receive).
"""
from __future__ import annotations

import time

from edgesync.constants import CLIENT_IDLE_TIMEOUT_S
from edgesync.runtime.live.context import ClientFailed, LiveContext
from edgesync.runtime.sharding.slices import join, split
from edgesync.transport import protocol
from edgesync.transport.protocol import Message, MessageType as T
from edgesync.transport.security import ClientKeys
from edgesync.transport.sockets import ClientSocket

SLICE_S = 0.05  # how long one wait on a follower lasts before the lead is listened to again


class ClientShards:
    def __init__(self, meta: dict, rank: int, lead: ClientSocket, keys: ClientKeys | None = None):
        self.bounds = tuple(tuple(b) for b in meta["bounds"])
        self.addresses = list(meta["addresses"])
        self.socks = [ClientSocket(a, keys=keys) for a in self.addresses]
        self.sent = 0  # updates split so far: each part carries its number
        uplink = lead.pacer.channels.get(None)
        for sock in self.socks:
            if uplink is not None:
                sock.pacer.channels[None] = uplink  # one uplink: the parts queue behind each other
            sock.send(protocol.hello(rank=rank))

    def join(self, lead: Message, ctx: LiveContext) -> Message:
        """The whole instruction: the lead's TRAIN and a part from every follower."""
        parts = [lead.tensors]
        for address, sock in zip(self.addresses, self.socks):
            deadline = time.monotonic() + CLIENT_IDLE_TIMEOUT_S
            while (msg := sock.recv(SLICE_S)) is None or msg.type != T.TRAIN:
                if msg is not None and msg.type == T.ERROR:
                    raise ClientFailed(f"shard at {address}: {msg.meta.get('reason')}")
                ctx.replies()  # keeps what the lead says meanwhile; END raises InstructionAborted
                ctx.heartbeat()
                if time.monotonic() > deadline:
                    raise ClientFailed(f"no part of the instruction from the shard at {address} for "
                                       f"{CLIENT_IDLE_TIMEOUT_S:.0f} s")
            parts.append(msg.tensors)
        return Message(T.TRAIN, lead.meta, join(parts, self.bounds))

    def split(self, meta: dict, tensors: dict) -> tuple[dict, dict]:
        """Send each follower its part of an update; returns the lead's part (meta, tensors). Every part
        carries the update's number, by which the followers apply it when the lead says so."""
        meta = {**meta, "part": self.sent}
        self.sent += 1
        parts = split(tensors, self.bounds)
        for sock, part in zip(self.socks, parts[1:]):
            sock.send(protocol.update(meta, part))
        for sock in self.socks:
            sock.flush()  # paced parts leave when due, not at the socket's next receive
        return meta, parts[0]

    def close(self) -> None:
        for sock in self.socks:
            sock.close()
