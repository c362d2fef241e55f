"""Live link emulation over real sockets: each end paces what it sends, released while it waits."""
from __future__ import annotations

import time

import pytest
import torch
import zmq

from edgesync.emulation.links import Link
from edgesync.transport.protocol import Message
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket


@pytest.fixture
def pair():
    ctx = zmq.Context()
    coord = CoordinatorSocket("tcp://127.0.0.1:*", ctx)
    client = ClientSocket(coord.address, ctx)
    client.send(Message("HELLO"))
    peer, _ = coord.recv(5)
    yield coord, client, peer
    client.close()
    coord.close()
    ctx.term()


def transfer(send, recv, pump, message) -> tuple[float, Message]:
    t0 = time.perf_counter()
    send(message)
    while (got := recv(0.001)) is None:
        pump(0.001)
    return time.perf_counter() - t0, got


@pytest.mark.parametrize("direction", ["down", "up"])
def test_a_megabyte_at_40_mbits_takes_its_wire_time(pair, direction):
    coord, client, peer = pair
    link = Link(rate_mbps=40, latency_s=0.02)
    coord.set_link(peer, link)
    client.set_link(link)
    data = torch.arange(250_000, dtype=torch.float32)  # 1 MB
    if direction == "down":
        took, got = transfer(lambda m: coord.send(peer, m), client.recv, coord.recv, Message("TRAIN", {}, {"x": data}))
    else:
        took, got = transfer(client.send, lambda t: coord.recv(t), client.recv, Message("UPDATE", {}, {"x": data}))
        got = got[1]
    expected = link.transfer_s(Message("TRAIN", {}, {"x": data}).wire_size())  # ≈ 0.22 s
    assert took == pytest.approx(expected, rel=0.1)
    assert torch.equal(got.tensors["x"], data)


def test_pacing_copies_what_it_holds(pair):
    coord, client, peer = pair
    coord.set_link(peer, Link(latency_s=0.05))
    data = torch.zeros(100_000)
    coord.send(peer, Message("TRAIN", {}, {"x": data}))
    data.fill_(7.0)  # the algorithm changes its tensor after sending: the wire must not see it
    _, got = transfer(lambda m: None, client.recv, coord.recv, None)
    assert float(got.tensors["x"].abs().sum()) == 0.0


def test_messages_keep_their_order_and_bytes_are_counted_once(pair):
    coord, client, peer = pair
    coord.set_link(peer, Link(rate_mbps=50, latency_s=0.01, jitter_s=0.005), seed=3)
    sizes = [coord.send(peer, Message("TRAIN", {"i": i}, {"x": torch.zeros(1000 * (i + 1))})) for i in range(5)]
    seen = []
    deadline = time.monotonic() + 5
    while len(seen) < 5 and time.monotonic() < deadline:
        if (m := client.recv(0.001)) is not None:
            seen.append(m.meta["i"])
        coord.recv(0.001)
    assert seen == [0, 1, 2, 3, 4]
    assert coord.bytes_out[peer] == sum(sizes) and client.bytes_in == sum(sizes)


def test_close_delivers_what_is_still_held(pair):
    coord, client, peer = pair
    coord.set_link(peer, Link(latency_s=10.0))
    coord.send(peer, Message("SHUTDOWN"))
    coord.close()
    got = client.recv(2.0)
    assert got is not None and got.type == "SHUTDOWN"
