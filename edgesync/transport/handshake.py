"""A client's view of its ZeroMQ handshake with the coordinator, so a refusal is an error, not a hang.

ZeroMQ hides failed handshakes: a DEALER whose CURVE key the coordinator refuses, or whose idea of
the coordinator's key (or of CURVE itself) is wrong, just never gets a message. `HandshakeWatch`
reads the socket's monitor events until the first handshake succeeds and turns failures into a
`HandshakeFailed` that says what to fix. Then it closes the monitor: nothing is left on the hot path.

What ZeroMQ (libzmq 4.3) reports, measured on loopback:

- a plain client of a CURVE coordinator: the coordinator reads the client's greeting (mechanism NULL),
  sees that it is not CURVE and hangs up, usually before the client has finished its own side, so
  the client sees HANDSHAKE_FAILED_NO_DETAIL (errno EPIPE) on zero to several reconnects before one
  HANDSHAKE_FAILED_PROTOCOL "mechanism mismatch". Both mean "this coordinator requires CURVE": an
  edgesync coordinator without CURVE never hangs up on a plain client's handshake.
- a CURVE client of a plain coordinator: HANDSHAKE_FAILED_PROTOCOL "mechanism mismatch" at once.
- a CURVE client with the wrong --server-key: HANDSHAKE_FAILED_NO_DETAIL on every reconnect.
- a CURVE client whose key is not in the allow-list: HANDSHAKE_FAILED_AUTH (ZAP status 400).
"""
from __future__ import annotations

import itertools
import os

import zmq
from zmq.utils.monitor import recv_monitor_message

# A handshake that fails without a refusal (a wrong server key) is retried by ZeroMQ and fails the
# same way every time; a network hiccup does not repeat this often in a row.
PROTOCOL_FAILURES_BEFORE_GIVING_UP = 3

_EVENTS = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH
           | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
_ids = itertools.count()


class HandshakeFailed(ConnectionError):
    """The coordinator refused this client, or the two sides cannot agree on security."""


class HandshakeWatch:
    def __init__(self, sock: zmq.Socket, address: str, curve: bool, public_key: bytes | None = None):
        """Call before `sock.connect(address)`; `curve` says whether this client uses CURVE keys."""
        self.sock = sock
        self.address = address
        self.curve = curve
        self.public_key = public_key
        self.failures = 0
        # A unique inproc name: pyzmq's default reuses file descriptors, which a closed socket frees.
        self.monitor = sock.get_monitor_socket(_EVENTS, addr=f"inproc://edgesync-handshake-{os.getpid()}-{next(_ids)}")

    def done(self) -> bool:
        """True once a handshake has succeeded (the watch is then closed); raises HandshakeFailed."""
        while self.monitor is not None and self.monitor.poll(0):
            event = recv_monitor_message(self.monitor)
            kind, value = event["event"], event["value"]
            if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self.close()
                return True
            if kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                self.close()
                raise HandshakeFailed(self._refused(value))
            self.failures += 1
            if kind == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
                self.close()  # CURVE on one side only: ZeroMQ gives up at once, and so do we
                raise HandshakeFailed(self._mechanism_mismatch())
            if self.failures >= PROTOCOL_FAILURES_BEFORE_GIVING_UP:
                self.close()
                raise HandshakeFailed(self._mismatch(kind, value))
        return self.monitor is None

    def _refused(self, status: int) -> str:
        key = self.public_key.decode("ascii") if self.public_key else "?"
        return (f"the coordinator at {self.address} refused this client's CURVE key {key} (ZAP status {status}): "
                "copy this client's public NAME.key file into the coordinator's --allow folder")

    def _mismatch(self, kind: int, value: int) -> str:
        what = "no detail" if kind == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL else f"protocol error {value:#x}"
        if not self.curve and kind == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
            # the coordinator hung up on this plain client's handshake each time: what a CURVE one does
            return (self._mechanism_mismatch()
                    + f" (it closed the connection during {self.failures} handshakes in a row)")
        if self.curve:
            hint = ("check that --server-key is the coordinator's public key (its NAME.key) and that the "
                    "coordinator runs with CURVE (--curve-secret and --allow)")
        else:
            hint = "is it an edgesync coordinator, and does it require CURVE keys?"
        return f"the handshake with the coordinator at {self.address} failed {self.failures} times ({what}): {hint}"

    def _mechanism_mismatch(self) -> str:
        if self.curve:
            return (f"the coordinator at {self.address} does not use CURVE (plain TCP): start it with "
                    "--curve-secret and --allow, or this client without --curve-secret and --server-key")
        return (f"the coordinator at {self.address} requires CURVE: start this client with --curve-secret "
                "(its NAME.key_secret) and --server-key (the coordinator's NAME.key), made by `edgesync keys`")

    def close(self) -> None:
        if self.monitor is not None:
            self.sock.disable_monitor()
            self.monitor.close(linger=0)
            self.monitor = None
