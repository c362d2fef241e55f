"""The live client's ClientContext: an algorithm's queries travel as QUERY/REPLY on the client's socket."""
from __future__ import annotations

import math
import time
from typing import Callable

from edgesync.constants import CLIENT_IDLE_TIMEOUT_S, HEARTBEAT_INTERVAL_S
from edgesync.emulation.throttle import sleep_until
from edgesync.trainer import DeviceOffline
from edgesync.transport import protocol
from edgesync.transport.protocol import Message, MessageType as T
from edgesync.transport.sockets import ClientSocket


class ClientFailed(RuntimeError):
    """The client cannot go on (the message says why and what to fix)."""


class InstructionAborted(Exception):
    """The coordinator ended the algorithm (END) while an instruction was still running."""


class LiveContext:
    """The ClientContext of the live runtime: queries are QUERY/REPLY messages on the client's socket.

    Messages other than REPLY that arrive meanwhile are kept for the main loop; END or SHUTDOWN
    abort the instruction (the coordinator no longer wants its update).
    """

    def __init__(self, sock: ClientSocket):
        self.sock = sock
        self.pending: list[Message] = []
        # When the device goes offline (perf_counter; its availability): a query or a wait ends there, with
        # DeviceOffline, since the coordinator no longer answers it.
        self.offline_at: Callable[[], float] = lambda: math.inf

    def heartbeat(self) -> None:
        """Say we are alive if we have said nothing for a while (called between and inside steps)."""
        if time.monotonic() - self.sock.last_send >= HEARTBEAT_INTERVAL_S:
            self.sock.send(protocol.heartbeat())

    def now(self) -> float:
        return time.perf_counter()

    def query(self, meta: dict) -> dict:
        self.sock.send(protocol.query(meta))
        deadline = time.perf_counter() + CLIENT_IDLE_TIMEOUT_S
        while True:
            now, offline = time.perf_counter(), self.offline_at()
            if now >= offline:
                raise DeviceOffline(0.0)
            msg = self.sock.recv(max(0.0, min(deadline, offline) - now))
            if msg is None and time.perf_counter() >= deadline:
                raise ClientFailed(f"no reply to a query for {CLIENT_IDLE_TIMEOUT_S:.0f} s")
            if msg is None:
                continue
            if msg.type == T.REPLY:
                return msg.meta
            self._keep(msg)

    def send_query(self, meta: dict) -> None:
        self.sock.send(protocol.query(meta))

    def replies(self) -> list[dict]:
        out = []
        while (msg := self.sock.recv(0)) is not None:
            if msg.type == T.REPLY:
                out.append(msg.meta)
            else:
                self._keep(msg)
        return out

    def wait_replies(self, timeout_s: float) -> tuple[list[dict], float]:
        started = time.perf_counter()
        deadline = started + timeout_s
        while (left := deadline - time.perf_counter()) > 0.001:
            if time.perf_counter() >= self.offline_at():
                raise DeviceOffline(time.perf_counter() - started)
            msg = self.sock.recv(min(left - 0.001, HEARTBEAT_INTERVAL_S))  # zmq polls whole ms: spin the last
            self.heartbeat()
            if msg is None:
                continue
            if msg.type == T.REPLY:
                return [msg.meta] + self.replies(), time.perf_counter() - started
            self._keep(msg)
        sleep_until(deadline)
        return [], timeout_s

    def _keep(self, msg: Message) -> None:
        if msg.type == T.HEARTBEAT:
            return  # the coordinator is alive; sock.last_recv already says so
        self.pending.append(msg)
        if msg.type in (T.END, T.SHUTDOWN):
            raise InstructionAborted(msg.type)
