"""Live link emulation over real sockets: each end paces what it sends, released while it waits."""
from __future__ import annotations

import time

import pytest
import torch
import zmq

from edgesync.emulation.links import Link
from edgesync.runtime.live.run_clock import RunClock
from edgesync.transport.protocol import Message
from edgesync.transport.sockets import ClientSocket, CoordinatorSocket

pytestmark = pytest.mark.timing  # elapsed times: one at a time, at normal priority (scripts/test.sh)


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
    expected = link.transfer_s(Message("TRAIN", {}, {"x": data}).wire_size())  # ≈ 0.22 s
    took = []
    for _ in range(3):
        if direction == "down":
            t, got = transfer(lambda m: coord.send(peer, m), client.recv, coord.recv, Message("TRAIN", {}, {"x": data}))
        else:
            t, got = transfer(client.send, lambda t: coord.recv(t), client.recv, Message("UPDATE", {}, {"x": data}))
            got = got[1]
        took.append(t)
        assert torch.equal(got.tensors["x"], data)
    # Never faster than the wire; a busy host only ever adds delay after the pacer's release (a clean-clone run
    # read 0.249 s once, beside the parallel lane), so the least of three transfers is the pacer's own time.
    assert min(took) >= expected * 0.9
    assert min(took) == pytest.approx(expected, rel=0.1)


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


@pytest.fixture
def two_clients():
    ctx = zmq.Context()
    coord = CoordinatorSocket("tcp://127.0.0.1:*", ctx)
    clients = [ClientSocket(coord.address, ctx) for _ in range(2)]
    peers = []
    for c in clients:
        c.send(Message("HELLO"))
        peers.append(coord.recv(5)[0])
    yield coord, clients, peers
    for c in clients:
        c.close()
    coord.close()
    ctx.term()


def test_the_coordinators_own_link_is_shared_by_every_client(two_clients):
    """coordinator_link: a megabyte to each of two clients over one 40 Mbit/s link takes twice one's
    wire time; the same two sent up by both clients at once are received one wire time apart."""
    coord, clients, peers = two_clients
    link = Link(rate_mbps=40)
    coord.set_own_link(link, link)
    message = Message("TRAIN", {}, {"x": torch.zeros(250_000)})
    wire = link.wire_s(message.wire_size())  # ≈ 0.2 s
    t0 = time.perf_counter()
    for peer in peers:
        coord.send(peer, message)
    got = []
    while len(got) < 2:
        coord.recv(0.001)  # releases what is due
        for i, c in enumerate(clients):
            if i not in dict(got) and c.recv(0.001) is not None:
                got.append((i, time.perf_counter() - t0))
    assert [t for _, t in got] == [pytest.approx(wire, rel=0.15), pytest.approx(2 * wire, rel=0.15)]
    t0 = time.perf_counter()
    for c in clients:
        c.send(Message("UPDATE", {}, {"x": torch.zeros(250_000)}))
    times = []
    while len(times) < 2:
        if coord.recv(0.01) is not None:
            times.append(time.perf_counter() - t0)
    assert times == [pytest.approx(wire, rel=0.15), pytest.approx(2 * wire, rel=0.15)]


def test_a_client_on_a_slow_link_keeps_the_algorithms_clock_within_a_millisecond_or_two(pair):
    """The coordinator stamps a paced message with its arrival, so the client's view of the algorithm's
    clock (run_clock.py) does not lag by the link's 300 ms latency."""
    coord, client, peer = pair
    coord.set_link(peer, Link(rate_mbps=10, latency_s=0.3))
    client.run_clock = RunClock()
    started = time.perf_counter()
    coord.start_clock(started)
    for _ in range(3):
        transfer(lambda m: coord.send(peer, m), client.recv, coord.recv, Message("HEARTBEAT"))
    lag = (time.perf_counter() - started) - client.run_clock.now()
    assert abs(lag) < 0.005, lag
