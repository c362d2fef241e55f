"""Each wire contract has an id and a version checked at connect time (edgesync/transport/contracts/): a peer
that speaks another version is refused with one line naming both. Here: the line itself, the kinds as enums,
and the client ↔ coordinator contract over real sockets, both ways (the coordinator refusing a client's
HELLO, a client refusing a coordinator's WELCOME). The shard, Ray-worker and ring contracts are tested
beside their runtimes (tests/runtime/test_contracts_runtime.py, test_sim_channel.py)."""
from __future__ import annotations

import threading
import time

import pytest
import zmq

from edgesync.config import load_scenario
from edgesync.runtime.bookkeeping.membership import Membership
from edgesync.runtime.live.client import ClientFailed, EdgeClient
from edgesync.transport import protocol
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.contracts.ray_worker import RayKind
from edgesync.transport.contracts.ring import RING, RingKind, ring_kind
from edgesync.transport.contracts.shard import SHARD, ShardOp, shard_op
from edgesync.transport.contracts.version import Contract, ContractMismatch
from edgesync.transport.protocol import COORDINATOR_TYPES, Message, MessageType as T
from edgesync.transport.sockets import CoordinatorSocket

NEWER = Contract("coordinator", 2, server="coordinator", client="client")
ADVICE = "use the same EdgeSync version on both"


def SCENARIO():
    return load_scenario({"name": "s", "runtime": "sim", "clients": 1, "algorithms": [{"name": "asgd"}]})


def test_each_contract_has_its_own_id_and_a_version():
    tags = [c.tag for c in (COORDINATOR, SHARD, RING)] + ["edgesync.ray_worker/1"]
    assert tags == ["edgesync.coordinator/1", "edgesync.shard/1", "edgesync.ring/1", "edgesync.ray_worker/1"]


def test_the_refusal_is_one_line_naming_both_sides():
    assert COORDINATOR.refusal(NEWER.offer(), here="server") == (
        f"coordinator speaks edgesync.coordinator/1, this client edgesync.coordinator/2: {ADVICE}")
    assert COORDINATOR.refusal(NEWER.offer(), here="client") == (
        f"coordinator speaks edgesync.coordinator/2, this client edgesync.coordinator/1: {ADVICE}")
    assert COORDINATOR.refusal(COORDINATOR.offer(), here="server") is None
    unnamed = COORDINATOR.refusal({"rank": 0}, here="server")
    assert "this client no versioned protocol (an EdgeSync from before versioned contracts)" in unnamed
    odd = COORDINATOR.refusal({"protocol": ["x\ny"] * 40}, here="server")
    assert "\n" not in odd and len(odd) < 300
    with pytest.raises(ContractMismatch, match="coordinator speaks edgesync.coordinator/2"):
        COORDINATOR.check(NEWER.offer(), here="client")


def test_kinds_are_enums_and_their_values_are_what_travels():
    assert shard_op({"op": "snapshot"}) is ShardOp.SNAPSHOT
    with pytest.raises(ValueError, match="SHARD op 'snap' is not one of hello, setup"):
        shard_op({"op": "snap"})
    assert ring_kind({"group": 1, "members": [0, 1], "current": False}) is RingKind.INSTRUCTION
    assert ring_kind({"weight": 1.0, "bytes": 8}) is RingKind.REPORT
    assert ring_kind({"mean_of": 3}) is RingKind.MEAN
    assert ring_kind({"port": 1, "prefix": "p", **RING.offer()}) is RingKind.SETUP
    frames = Message(RayKind.SERVE_END).to_frames()
    assert Message.from_frames(frames, kinds=RayKind).type is RayKind.SERVE_END
    with pytest.raises(protocol.ProtocolError, match="unexpected message type 'SERVE_END'"):
        Message.from_frames(frames)  # not a coordinator message


def test_the_connect_time_messages_carry_the_contract_and_no_other_message_does():
    assert protocol.hello(0).meta["protocol"] == "edgesync.coordinator/1"
    assert protocol.welcome(0, 1, "run", {}, 0, 10.0).meta["protocol"] == "edgesync.coordinator/1"
    for message in (protocol.train({"version": 0}, {}), protocol.update({}, {}), protocol.query({}),
                    protocol.reply({}), protocol.heartbeat()):
        assert "protocol" not in message.meta  # the simulator counts these bytes: unchanged


def _dealer(address: str) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    return sock


def test_a_coordinator_refuses_a_client_of_another_version_with_the_one_line():
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*")
    members = Membership(SCENARIO(), coordinator)
    client = _dealer(coordinator.address)
    try:
        client.send_multipart(Message(T.HELLO, {"rank": 0, "info": {}, **NEWER.offer()}).to_frames())
        deadline = time.monotonic() + 10
        while not client.poll(10) and time.monotonic() < deadline:
            assert members.recv(0.1) is None  # refused where it is received: nothing for the caller
        answer = Message.from_frames(client.recv_multipart(), COORDINATOR_TYPES)
        assert answer.type == T.ERROR and answer.meta["fatal"] is True
        assert answer.meta["reason"] == f"coordinator speaks edgesync.coordinator/1, this client edgesync.coordinator/2: {ADVICE}"
        assert members.peers == {}
    finally:
        client.close()
        coordinator.close()


def test_a_client_of_another_version_stops_with_the_coordinators_line(monkeypatch):
    """The client's side of the same refusal: EdgeClient.run ends with ClientFailed, its socket closed."""
    coordinator = CoordinatorSocket("tcp://127.0.0.1:*")
    members = Membership(SCENARIO(), coordinator)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            members.recv(0.05)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setattr(protocol, "COORDINATOR", NEWER)  # this client's HELLO names version 2
    try:
        with pytest.raises(ClientFailed) as failed:
            EdgeClient(coordinator.address, rank=0, connect_timeout_s=20).run()
        assert str(failed.value) == ("coordinator refused this client: coordinator speaks edgesync.coordinator/1, "
                                     f"this client edgesync.coordinator/2: {ADVICE}")
    finally:
        stop.set()
        thread.join(5)
        coordinator.close()


def test_a_client_refuses_a_coordinator_of_another_version(monkeypatch):
    """A coordinator whose WELCOME names version 2: the client stops with the one line, from its side."""
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    stop = threading.Event()

    def answer():
        while not stop.is_set():
            if router.poll(50):
                identity, *frames = router.recv_multipart()
                if Message.from_frames(frames).type == T.HELLO:
                    welcome = Message(T.WELCOME, {"rank": 0, "clients": 1, "run": "r", "uplink": {}, "link_seed": 0,
                                                  "timeout_s": 10.0, **NEWER.offer()})
                    router.send_multipart([identity, *welcome.to_frames()])

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        with pytest.raises(ClientFailed) as failed:
            EdgeClient(f"tcp://127.0.0.1:{port}", rank=0, connect_timeout_s=20).run()
        assert str(failed.value) == (f"coordinator speaks edgesync.coordinator/2, this client edgesync.coordinator/1: "
                                     f"{ADVICE}")
    finally:
        stop.set()
        thread.join(5)
        router.close()
