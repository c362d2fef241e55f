"""Sockets behind a small API: the coordinator's ROUTER and a client's DEALER, counting bytes.

Bytes are counted where frames are sent and received: the sum of frame lengths (header + tensor
data) of every message, per peer and direction. ZeroMQ's own framing (2–9 bytes a frame) and
TCP/IP headers are not included.

With a link set (`set_link`), messages to that peer are held by a `Pacer` and released at their
emulated arrival time while `recv` waits (pacing.py).

While an algorithm runs, both ends stamp what they send with its clock at the message's emulated arrival
(`clock`): the coordinator its own (`start_clock`), a client its estimate of it (a `RunClock`, once known).
The coordinator notes when it took each message off its socket (`taken_at`): its queueing delay is the
difference (metrics/coordinator_load.py).

With keys (security.py) both sockets speak CURVE: encrypted, and the coordinator admits only the
client keys of its allow-list. The coordinator then has its own zmq.Context, which carries the ZAP
handler. A client watches its handshake until the first one succeeds (handshake.py), so a refused
key or mismatched security is an error rather than silence.
"""
from __future__ import annotations

import logging
import math
import time
from collections import defaultdict, deque

import zmq

from edgesync.constants import MAX_MESSAGE_BYTES
from edgesync.emulation.links import Link, LinkChannel
from edgesync.transport.bind_errors import bind_failed
from edgesync.transport.handshake import HandshakeWatch
from edgesync.transport.pacing import Pacer
from edgesync.transport.protocol import CLIENT_TYPES, COORDINATOR_TYPES, Message, ProtocolError
from edgesync.transport.security import (
    ClientKeys, ServerKeys, make_curve_client, make_curve_server, start_authenticator,
)

log = logging.getLogger(__name__)

# Below this, pyzmq copies faster than it can track a zero-copy buffer.
_ZERO_COPY_MIN_BYTES = 64 * 1024
# Plain ints: looking zmq's enum members up costs more than the calls that use them.
_RCVMORE, _SNDMORE = int(zmq.RCVMORE), int(zmq.SNDMORE)
# While a client waits for its first handshake, how often it looks at the handshake's events.
_HANDSHAKE_CHECK_S = 0.05


def _frames_size(frames) -> int:
    return sum(len(f) for f in frames)


def _send(sock: zmq.Socket, frames: list, flags: int = 0) -> int:
    """Send, each frame copied or zero-copy by its size; returns the frames' bytes. With zmq.NOBLOCK it
    raises zmq.Again at the first frame or sends them all (ZeroMQ queues a message whole)."""
    total, last = 0, len(frames) - 1
    for i, f in enumerate(frames):
        n = len(f)
        total += n
        sock.send(f, flags | (_SNDMORE if i < last else 0), copy=n < _ZERO_COPY_MIN_BYTES)
    return total


def _recv(sock: zmq.Socket, copied: int) -> tuple[list, int]:
    """One message's frames and their bytes: the first `copied` (routing id, header) as bytes, the
    tensors after them as zero-copy zmq.Frames."""
    frames, total, more = [], 0, True
    while more:
        f = sock.recv() if len(frames) < copied else sock.recv(copy=False)
        total += len(f)  # a Frame's len() is its size; its .buffer would build a memoryview to measure it
        frames.append(f)
        more = sock.getsockopt(_RCVMORE)
    return frames, total


def _poll_paced(poller: zmq.Poller, pacer: Pacer, release, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for input, releasing paced messages as their times come."""
    if not pacer:  # nothing held: no deadline to keep
        return bool(poller.poll(max(0, int(timeout_s * 1000))))
    deadline = time.perf_counter() + timeout_s
    while True:
        release()
        now = time.perf_counter()
        due = pacer.next_due()
        wait = deadline - now if due is None else min(deadline - now, due - now)
        if poller.poll(max(0, int(wait * 1000))):
            return True
        if time.perf_counter() >= deadline:
            release()
            return False


class _Inbox:
    """Receiving with a time limit. With nothing held by the pacer it is one blocking recv under
    RCVTIMEO: a poll before every recv costs ≈ 30 µs of a 0.4 MB round trip on 2 cores (benchmarks/
    transport.py). With messages held, it polls in slices so that they are released on time."""

    def __init__(self, sock: zmq.Socket, pacer: Pacer, release):
        self.sock, self.pacer, self.release = sock, pacer, release
        self.poller = zmq.Poller()
        self.poller.register(sock, zmq.POLLIN)
        self._timeout_ms = -1  # zmq's default: block for ever

    def recv(self, timeout_s: float, copied: int) -> tuple[list, int] | None:
        """One message's frames and bytes (see `_recv`), or None if none came within `timeout_s`."""
        if self.pacer:
            if not _poll_paced(self.poller, self.pacer, self.release, timeout_s):
                return None
        else:
            ms = max(0, int(timeout_s * 1000))
            if ms != self._timeout_ms:
                self.sock.setsockopt(zmq.RCVTIMEO, ms)
                self._timeout_ms = ms
        try:
            return _recv(self.sock, copied)
        except zmq.Again:  # only the first frame can time out: the rest of a message comes with it
            return None


class CoordinatorSocket:
    """ROUTER bound at `address`. Peers are identified by ZeroMQ routing ids (bytes).

    With `keys`, a CURVE server whose ZAP handler admits the allow-list's keys (on a context of its own).
    An address it cannot listen at is a `BindFailed` that says why.
    """

    def __init__(self, address: str, context: zmq.Context | None = None, keys: ServerKeys | None = None,
                 accepts: frozenset = CLIENT_TYPES, admit: tuple[bytes, ...] = ()):
        """`accepts`: the message types it takes (a follower shard's: its lead's too); `admit`: CURVE public
        keys it admits besides the allow-list's (a follower shard: its lead's)."""
        self.accepts = accepts
        self.auth = None
        self._own_context = keys is not None and context is None
        self.context = zmq.Context() if self._own_context else (context or zmq.Context.instance())
        self.sock = self.context.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 1000)
        # ZeroMQ drops (and disconnects) a peer whose message is larger: it is never received whole.
        self.sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # sending to a vanished peer raises, not drops
        try:
            if keys is not None:
                self.auth = start_authenticator(self.context, keys.allow_dir, admit)
                make_curve_server(self.sock, keys)
            try:
                self.sock.bind(address)
            except zmq.ZMQError as exc:
                raise bind_failed(address, exc) from None
        except BaseException:
            self._close_context()
            raise
        self.address = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.bytes_in: dict[bytes, int] = defaultdict(int)
        self.bytes_out: dict[bytes, int] = defaultdict(int)
        self.last_send: dict[bytes, float] = {}
        self.unreachable: set[bytes] = set()  # peers a send found disconnected: provably gone
        self.pacer = Pacer()
        self.run_clock = None  # coordinator: () → the algorithm's clock; client: a RunClock (run_clock.py)
        self._inbox = _Inbox(self.sock, self.pacer, self._release)
        self._inbound: LinkChannel | None = None  # the coordinator's own link, into it
        self._arrived: deque[tuple[float, tuple[list, int]]] = deque()  # received, held until in (a FIFO)
        self.taken_at = 0.0  # perf_counter when `recv` took its latest message, before decoding it

    def bind(self, address: str) -> None:
        """Listen on one more endpoint (the kernel link backend: one veth address per client)."""
        self.sock.bind(address)

    def set_link(self, peer: bytes, link: Link, seed: int = 0) -> None:
        """Emulate `link` on everything sent to `peer` from now on (the coordinator → client direction)."""
        self.pacer.set_link(peer, link, seed)

    def set_own_link(self, inbound: Link, outbound: Link, seed: int = 0) -> None:
        """Emulate the coordinator's own link (a scenario's `coordinator_link`), shared by every client:
        what it sends crosses `outbound` before the client's downlink; what it receives is held until it
        has crossed `inbound` (after the client's uplink, which the client paces)."""
        self.pacer.set_own_link(outbound, [seed, 1, 1])
        self._inbound = None if inbound.unlimited else LinkChannel(inbound, [seed, 1, 0])

    def beside_own_link(self, peer: bytes) -> None:
        """Messages to and from `peer` do not cross the coordinator's own link (a follower shard's lead: the
        servers talk among themselves on another network)."""
        self.pacer.exempt = {peer}

    def start_clock(self, started: float | None) -> None:
        """The algorithm started at perf_counter `started` (None: none runs): stamp messages with its clock
        and run link traces from then (run_clock.py)."""
        self.run_clock = None if started is None else (lambda: time.perf_counter() - started)
        self.pacer.set_origin(started)
        if self._inbound is not None:
            self._inbound.origin = math.inf if started is None else started

    def send(self, peer: bytes, message: Message) -> int:
        if self.run_clock is not None:  # while an algorithm runs, every message carries its clock
            message.clock = self.run_clock()
        frames = message.to_frames()
        self.last_send[peer] = time.monotonic()  # heartbeats go only to peers sent nothing lately
        if self.pacer.shapes(peer):
            size = _frames_size(frames)
            due = self.pacer.schedule(peer, size)
            if message.clock is not None:  # stamped with its arrival: the client's clock need not lag the link
                message.clock += max(0.0, due - time.perf_counter())
                frames = message.to_frames()
            self.pacer.hold(peer, frames, size, due)
            self.bytes_out[peer] += size
            return size
        try:
            size = _send(self.sock, [peer, *frames]) - len(peer)
        except zmq.ZMQError as exc:  # EHOSTUNREACH: the peer disconnected
            if peer not in self.unreachable:  # once per peer: the coordinator counts it lost at once
                log.warning("cannot send %s to %r: %s", message.type, peer, exc)
            self.unreachable.add(peer)
            return 0
        self.bytes_out[peer] += size
        return size

    def _release(self, items=None, closing: bool = False) -> None:
        for peer, frames in self.pacer.release() if items is None else items:
            try:
                _send(self.sock, [peer, *frames])
            except zmq.ZMQError as exc:
                if peer not in self.unreachable:  # on closing, a peer told to stop has often left already
                    (log.debug if closing else log.warning)("cannot deliver a paced message to %r: %s", peer, exc)
                self.unreachable.add(peer)

    def recv(self, timeout_s: float) -> tuple[bytes, Message | ProtocolError] | None:
        """The next message, a ProtocolError for a bad one (with its sender), or None on timeout."""
        got = self._inbox.recv(timeout_s, copied=2) if self._inbound is None else self._through_inbound(timeout_s)
        if got is None:
            return None
        self.taken_at = time.perf_counter()
        frames, size = got
        peer = frames[0]
        self.bytes_in[peer] += size - len(peer)
        try:
            return peer, Message.from_frames(frames[1:], self.accepts)
        except ProtocolError as exc:
            return peer, exc

    def _through_inbound(self, timeout_s: float) -> tuple[list, int] | None:
        """The next message once it has crossed the coordinator's inbound link, in arrival order (a FIFO)."""
        deadline = time.perf_counter() + timeout_s
        while True:
            now = time.perf_counter()
            if self._arrived and self._arrived[0][0] <= now:
                return self._arrived.popleft()[1]
            wait = deadline - now if not self._arrived else min(deadline - now, self._arrived[0][0] - now)
            if wait < 0:
                return None
            got = self._inbox.recv(wait, copied=2)
            if got is not None and bytes(got[0][0]) in self.pacer.exempt:
                return got  # not over the emulated link (a follower shard's lead)
            if got is not None:  # the link's arrivals never overtake each other
                self._arrived.append((self._inbound.arrival(time.perf_counter(), got[1]), got))

    def close(self) -> None:
        self._release(self.pacer.drain(), closing=True)
        self._close_context()

    def _close_context(self) -> None:
        self.sock.close(linger=200)
        if self.auth is not None:
            self.auth.stop()
            self.auth = None
        if self._own_context:
            self._own_context = False  # close() may come twice
            self.context.term()


class ClientSocket:
    """DEALER connected to the coordinator. ZeroMQ reconnects by itself if the link drops.

    With `keys`, a CURVE client. `recv` raises `HandshakeFailed` if the coordinator refuses it.
    """

    def __init__(self, address: str, context: zmq.Context | None = None, keys: ClientKeys | None = None,
                 accepts: frozenset = COORDINATOR_TYPES):
        self.accepts = accepts  # the message types it takes (a lead's socket to a follower shard: its answers)
        self.context = context or zmq.Context.instance()
        self.sock = self.context.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 2000)
        self.sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        if keys is not None:
            make_curve_client(self.sock, keys)
        self._handshake: HandshakeWatch | None = HandshakeWatch(
            self.sock, address, curve=keys is not None, public_key=keys.public if keys else None)
        self.sock.connect(address)
        self.bytes_in = 0
        self.bytes_out = 0
        self.last_send = self.last_recv = time.monotonic()  # liveness, both ways
        self.pacer = Pacer()
        self.run_clock = None  # coordinator: () → the algorithm's clock; client: a RunClock (run_clock.py)
        self._inbox = _Inbox(self.sock, self.pacer, self._release)

    @property
    def reached(self) -> bool:
        """Whether a ZeroMQ handshake with the other end has succeeded: something that speaks ZeroMQ
        listens there (known once `recv` has been called). Before, nothing may be listening at all."""
        return self._handshake is None

    def set_link(self, link: Link, seed: int = 0) -> None:
        """Emulate `link` on everything this client sends from now on (its uplink)."""
        self.pacer.set_link(None, link, seed)

    def send(self, message: Message) -> int:
        stamped = self.run_clock is not None and self.run_clock.known
        if stamped:  # the algorithm's clock as this client hears it: the coordinator's queueing delay runs from it
            message.clock = self.run_clock.now()
        frames = message.to_frames()
        self.last_send = time.monotonic()
        if self.pacer.shapes(None):
            size = _frames_size(frames)
            due = self.pacer.schedule(None, size)
            if stamped:  # stamped with its arrival, after its uplink, as the coordinator stamps what it sends
                message.clock = self.run_clock.now(due)
                frames = message.to_frames()
            self.pacer.hold(None, frames, size, due)
        else:
            size = self._send_now(frames)
        self.bytes_out += size
        return size

    def _send_now(self, frames: list) -> int:
        """Hand `frames` to ZeroMQ. Until the first handshake has succeeded, never by a blocking send: a
        connection that ZeroMQ tore down during its handshake leaves the DEALER nothing to queue on, and a
        blocking send would then wait forever, out of reach of the refusal that `recv` reports (a suite
        run hung so). It tries without blocking and reads the handshake's events between tries."""
        while self._handshake is not None:
            try:
                return _send(self.sock, frames, zmq.NOBLOCK)
            except zmq.Again:
                if self._handshake.done():  # raises HandshakeFailed on a refusal
                    self._handshake = None
                else:
                    self.sock.poll(int(_HANDSHAKE_CHECK_S * 1000), zmq.POLLOUT)
        return _send(self.sock, frames)

    def _release(self, items=None) -> None:
        for _, frames in self.pacer.release() if items is None else items:
            _send(self.sock, frames)

    def flush(self) -> None:
        """Hand ZeroMQ what the pacer holds as each one's time comes (it is otherwise released while the
        socket waits in `recv`)."""
        while (due := self.pacer.next_due()) is not None:
            time.sleep(max(0.0, due - time.perf_counter()))
            self._release()

    def recv(self, timeout_s: float) -> Message | None:
        """The next message or None on timeout. Raises ProtocolError for a malformed one, and
        HandshakeFailed if the coordinator refuses this client (until the first handshake succeeds)."""
        if self._handshake is not None:
            timeout_s = self._await_handshake(timeout_s)
            if timeout_s is None:
                return None
        got = self._inbox.recv(timeout_s, copied=1)
        if got is None:
            return None
        frames, size = got
        self.bytes_in += size
        self.last_recv = time.monotonic()
        msg = Message.from_frames(frames, self.accepts)
        if msg.clock is not None and self.run_clock is not None:
            self.run_clock.observe(msg.clock)
            self.pacer.set_origin(self.run_clock.local(0.0))  # the uplink's trace starts with the algorithm
        return msg

    def _await_handshake(self, timeout_s: float) -> float | None:
        """Wait in short slices, reading handshake events between them, until a message is there or
        the handshake succeeded; returns the time left, or None if it ran out."""
        deadline = time.perf_counter() + timeout_s
        while not self._handshake.done():
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            if _poll_paced(self._inbox.poller, self.pacer, self._release, min(left, _HANDSHAKE_CHECK_S)):
                self._handshake.close()  # a message came: the handshake has succeeded
                break
        self._handshake = None
        return max(0.0, deadline - time.perf_counter())

    def close(self, linger_ms: int = 2000) -> None:
        """`linger_ms`: how long unsent messages may still leave (0 when the coordinator is gone)."""
        if linger_ms:
            self._release(self.pacer.drain())
        if self._handshake is not None:
            self._handshake.close()
        self.sock.close(linger=linger_ms)

