"""A live client away from its run, asking on new sockets to be taken back: one that lost its coordinator
(`reconnect`), and a device offline by its availability (`sit_out`), which sleeps until its return, asking every
OFFLINE_PROBE_S whether it may come back sooner.

A client that hears nothing from its coordinator for the timeout WELCOME gave says HELLO for its rank on a new
socket, with exponential backoff, until a coordinator (the same one, or a resumed one) welcomes it.

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

from edgesync.constants import OFFLINE_PROBE_S, RECONNECT_FIRST_S, RECONNECT_GIVE_UP_S, RECONNECT_MAX_S
from edgesync.emulation.throttle import sleep_until
from edgesync.runtime.live.context import ClientFailed
from edgesync.transport.protocol import Message, MessageType as T, ProtocolError
from edgesync.transport.sockets import ClientSocket

log = logging.getLogger("edgesync.client")

ANSWER_WAIT_S = 2.0  # a coordinator that answers at all answers a HELLO within milliseconds; busy, within this


def reconnect(client, why: str) -> None:
    """A new socket and HELLO for `client`'s rank (the EdgeClient), with exponential backoff, until WELCOME."""
    log.warning("%s: reconnecting to %s as client %d", why, client.connect, client.rank)
    client.ctx.sock.close(linger_ms=0)  # what it still holds was for the coordinator that is gone
    client.ctx.pending.clear()
    client.session = None  # the coordinator sets this client up again
    delay, deadline, tries = RECONNECT_FIRST_S, time.monotonic() + RECONNECT_GIVE_UP_S, 0
    while True:
        tries += 1
        sock = client.new_socket()
        sock.send(client.hello())
        welcome = client._await_welcome(sock, max(2 * delay, 2.0))
        if welcome is not None:
            client.ctx.sock = sock
            client._handle(sock, welcome)
            log.info("reconnected after %d tries", tries)
            return
        sock.close(linger_ms=0)
        if time.monotonic() > deadline:
            raise ClientFailed(f"--connect {client.connect}: gave up as client {client.rank}: the coordinator "
                               f"did not come back within {RECONNECT_GIVE_UP_S:.0f} s ({tries} tries)")
        time.sleep(delay)
        delay = min(2 * delay, RECONNECT_MAX_S)


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
        if reply is not None and client.described(reply):  # the run's outside code: ask again at once, describing it
            answered, due = time.monotonic(), time.perf_counter()
            continue
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
