"""Admission when a client has given up on a socket before the coordinator read its HELLO.

A coordinator that is still starting (a resume loading its checkpoint on a busy host) reads a reconnecting
client's HELLO after the client stopped waiting for WELCOME and closed that socket; the client says HELLO
again on a new one. The rank must go to the live socket, not stay held by the closed one (that lost both
clients of tests/runtime/test_faults.py's resumed coordinator once in CI, and could lose a lab's clients).
"""
from __future__ import annotations

import time

import zmq

from loopback_run import small_scenario
from edgesync.runtime.bookkeeping.membership import Membership
from edgesync.config import load_scenario
from edgesync.transport import protocol
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.protocol import COORDINATOR_TYPES, Message, MessageType as T
from edgesync.transport.sockets import CoordinatorSocket


def _dealer(address: str) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 1000)  # the HELLO leaves before the socket goes
    sock.connect(address)
    return sock


def _hello(sock: zmq.Socket, rank: int) -> None:
    sock.send_multipart(Message(T.HELLO, {"rank": rank, "info": {"host": "test"}, **COORDINATOR.offer()}).to_frames())


def _next(coordinator: CoordinatorSocket, members: Membership, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (item := members.recv(0.2)) is not None:
            return item
    raise AssertionError("the coordinator received nothing")


def test_a_hello_from_a_socket_closed_before_its_welcome_leaves_the_rank_to_the_next_one():
    scenario = load_scenario(small_scenario(clients=["x1"]))
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*")
    members = Membership(scenario, coordinator)
    try:
        gave_up = _dealer(coordinator.address)
        _hello(gave_up, 0)
        gave_up.close()  # it stopped waiting for WELCOME before the coordinator got to its HELLO
        time.sleep(0.5)  # the coordinator's socket has seen that connection close
        identity, hello = _next(coordinator, members)
        members.admit(identity, hello)
        assert members.peers == {} and members.ranks == {}, "a closed connection holds the rank"

        retry = _dealer(coordinator.address)  # the same client, on its new socket
        _hello(retry, 0)
        identity, hello = _next(coordinator, members)
        members.admit(identity, hello)
        assert members.ranks == {identity: 0}
        assert retry.poll(5000), "no WELCOME on the new socket"
        welcome = Message.from_frames(retry.recv_multipart(), COORDINATOR_TYPES)
        assert welcome.type == T.WELCOME and welcome.meta["rank"] == 0
        retry.close()
    finally:
        coordinator.close()


def test_a_client_refused_for_now_asks_again_at_once_not_after_its_wait(monkeypatch):
    """`_await_welcome` answers a non-fatal refusal (between algorithms) with a new HELLO on the same socket."""
    from edgesync.runtime.live import client as client_module

    sent = []

    class Sock:
        replies = [protocol.error("between algorithms; say HELLO again in a moment"),
                   protocol.welcome(0, 1, "run", {}, 0, 10.0)]

        def recv(self, timeout_s):
            return self.replies.pop(0) if self.replies else None

        def send(self, message):
            sent.append(message.type)

    monkeypatch.setattr(client_module, "RECONNECT_FIRST_S", 0.01)
    edge = client_module.EdgeClient.__new__(client_module.EdgeClient)
    edge.hello = lambda: Message(T.HELLO, {"rank": 0})
    started = time.monotonic()
    welcome = edge._await_welcome(Sock(), 5.0)
    assert welcome is not None and welcome.type == T.WELCOME
    assert sent == [T.HELLO]
    assert time.monotonic() - started < 1.0
