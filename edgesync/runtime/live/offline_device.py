"""A live device offline by its availability: it sleeps until its return, asking every OFFLINE_PROBE_S
whether it may come back sooner.

A device's schedule belongs to the algorithm it was set up for. When that algorithm ends while the device
is offline, the next one (or a sweep's next variant, led by a coordinator of its own) restarts the clock
at zero on schedules of its own, in which the device may be online at once — and the device, with no
connection, cannot know. So it asks, as a device checking in would: a HELLO for its rank marked `offline`,
on a new socket. The coordinator refuses it quietly while the device is offline by the schedule of the
algorithm it runs (or between algorithms) and admits it when it is online; the device is then set up
afresh for whatever runs now, at most OFFLINE_PROBE_S late. From its own return time it keeps asking the
same way until admitted. A device that never returns in its algorithm (a trace ending offline) stops when
nobody answers any more, or when the coordinator's last word says the run is over (SHUTDOWN).
"""
from __future__ import annotations

import logging
import math
import time

from edgesync.constants import OFFLINE_PROBE_S, RECONNECT_GIVE_UP_S
from edgesync.emulation.throttle import sleep_until
from edgesync.runtime.live.context import ClientFailed
from edgesync.transport.protocol import Message, MessageType as T, ProtocolError
from edgesync.transport.sockets import ClientSocket

log = logging.getLogger("edgesync.client")

ANSWER_WAIT_S = 2.0  # a coordinator that answers at all answers a HELLO within milliseconds; busy, within this


def sit_out(client, back_local: float) -> tuple[ClientSocket, Message] | None:
    """Wait offline until the coordinator admits this device (`client`: the EdgeClient): the new socket and
    WELCOME; None if the run ended without it. `back_local`: the perf_counter reading of its return by its
    schedule (∞: none)."""
    answered, tries = time.monotonic(), 0
    due = min(back_local, time.perf_counter() + OFFLINE_PROBE_S)
    while True:
        sleep_until(due)
        tries += 1
        sock = client.new_socket()
        sock.send(client.hello(offline=True))
        reply = _answer(sock)
        if reply is not None and reply.type == T.WELCOME:
            log.info("back online after %d tries", tries)
            return sock, reply
        sock.close(linger_ms=0)
        if reply is not None and reply.type == T.SHUTDOWN:
            log.info("coordinator says: %s", reply.meta.get("reason") or "the run is over")
            return None
        if reply is not None and reply.type == T.ERROR and reply.meta.get("fatal"):
            raise ClientFailed(f"coordinator refused this client on returning: {reply.meta.get('reason')}")
        now = time.monotonic()
        if reply is not None:
            answered = now  # refused for now: offline there too, or between algorithms
        elif math.isinf(back_local) and now - answered > client.timeout_s:
            log.info("offline for good and the coordinator is silent: the run is over")
            return None
        elif now - answered > RECONNECT_GIVE_UP_S:
            raise ClientFailed(f"--connect {client.connect}: gave up as client {client.rank}: the coordinator "
                               f"did not answer within {RECONNECT_GIVE_UP_S:.0f} s ({tries} tries)")
        due = time.perf_counter() + OFFLINE_PROBE_S
        if back_local > time.perf_counter():
            due = min(due, back_local)


def _answer(sock: ClientSocket) -> Message | None:
    deadline = time.monotonic() + ANSWER_WAIT_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            msg = sock.recv(left)
        except ProtocolError:
            continue
        if msg is None or msg.type != T.HEARTBEAT:
            return msg
    return None
