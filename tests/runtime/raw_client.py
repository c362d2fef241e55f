"""Test clients: one that speaks the protocol by hand (to send what a real client never would), and
a real client held at its first instruction until a test lets it go."""
from __future__ import annotations

import threading
import time

import zmq

from edgesync.runtime.live.client import EdgeClient
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.protocol import COORDINATOR_TYPES, Message


class RawClient:
    """A DEALER that joins like a client, then sends whatever frames a test gives it."""

    def __init__(self, address: str):
        self.sock = zmq.Context.instance().socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(address)
        self._closing = threading.Event()
        self._serving: threading.Thread | None = None

    def send(self, message: Message | list[bytes]) -> None:
        frames = message.to_frames() if isinstance(message, Message) else message
        self.sock.send_multipart([bytes(f) for f in frames])

    def recv(self, timeout_s: float = 30.0) -> Message:
        """The coordinator's next message, heartbeats skipped (it sends one to a client silent for a second)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            assert left > 0 and self.sock.poll(int(left * 1000)), f"no message from the coordinator in {timeout_s} s"
            msg = Message.from_frames(self.sock.recv_multipart(), COORDINATOR_TYPES)
            if msg.type != "HEARTBEAT":
                return msg

    def expect(self, kind: str, timeout_s: float = 60.0) -> Message:
        msg = self.recv(timeout_s)
        assert msg.type == kind, f"expected {kind}, got {msg.type} {msg.meta}"
        return msg

    def join(self, rank: int) -> Message:
        """HELLO → WELCOME → SETUP → READY; returns the first TRAIN (the algorithm's start)."""
        self.send(Message("HELLO", {"rank": rank, "info": {"host": "raw"}, **COORDINATOR.offer()}))
        self.expect("WELCOME")
        return self.ready(self.expect("SETUP"))

    def ready(self, setup: Message, step_s: float = 0.01) -> Message:
        """Answer `setup` with READY, and each CALIBRATE (measure, then pace) with a `step_s` step;
        returns the TRAIN that follows."""
        self.send(Message("READY", {"label": setup.meta["label"]}))
        while (msg := self.recv(60.0)).type == "CALIBRATE":
            self.send(Message("CALIBRATED", {"reference_s": step_s}))
        assert msg.type == "TRAIN", f"expected TRAIN, got {msg.type} {msg.meta}"
        return msg

    def finish_in_background(self) -> threading.Thread:
        """Answer END with empty statistics and stop at SHUTDOWN (or at `close`), so the run ends on time."""
        def serve():
            deadline = time.monotonic() + 240
            while not self._closing.is_set() and time.monotonic() < deadline:
                if not self.sock.poll(100):  # short waits: `close` must not pull the socket from under a recv
                    continue
                msg = Message.from_frames(self.sock.recv_multipart(), COORDINATOR_TYPES)
                if msg.type == "END":
                    self.send(Message("STATS", {}))
                elif msg.type == "SHUTDOWN":
                    return
        self._serving = threading.Thread(target=serve, daemon=True)
        self._serving.start()
        return self._serving

    def close(self) -> None:
        self._closing.set()
        if self._serving is not None:
            self._serving.join(5)
        self.sock.close()


class GatedClient(EdgeClient):
    """A real client that waits at its first TRAIN until `gate` is set."""

    def __init__(self, *args, gate: threading.Event, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = gate

    def _train(self, sock, msg):
        assert self.gate.wait(240), "the test never opened the gate"
        super()._train(sock, msg)
