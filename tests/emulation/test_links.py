"""The link model: serialization, latency, FIFO order, jitter bounds and loss as seeded delay."""
from __future__ import annotations

import pytest

from edgesync.emulation.links import PACKET_BYTES, Link, LinkChannel
from edgesync.config import load_scenario


def test_idle_link_takes_wire_time_plus_latency():
    ch = LinkChannel(Link(rate_mbps=8, latency_s=0.05))  # 8 Mbit/s = 1 MB/s
    assert ch.arrival(10.0, 1_000_000) == pytest.approx(10.0 + 1.0 + 0.05)


def test_messages_queue_behind_each_other_and_never_overtake():
    ch = LinkChannel(Link(rate_mbps=8, latency_s=0.01))
    first = ch.arrival(0.0, 1_000_000)      # on the wire 0..1 s
    second = ch.arrival(0.5, 1_000)         # waits for the first: wire 1.0..1.001
    assert first == pytest.approx(1.01)
    assert second == pytest.approx(1.001 + 0.01)
    idle = ch.arrival(5.0, 1_000)           # the link is idle again
    assert idle == pytest.approx(5.0 + 0.001 + 0.01)


def test_unlimited_link_is_instant():
    assert LinkChannel(Link()).arrival(3.0, 10**9) == 3.0


def test_jitter_stays_within_bounds_and_keeps_order_and_replays():
    link = Link(latency_s=0.05, jitter_s=0.02)
    a, b = LinkChannel(link, seed=4), LinkChannel(link, seed=4)
    times = [a.arrival(t * 0.001, 100) for t in range(200)]
    assert times == [b.arrival(t * 0.001, 100) for t in range(200)]  # same seed, same delays
    assert times == sorted(times)
    delays = [t - s * 0.001 for s, t in enumerate(times)]
    assert min(delays) >= 0.03 - 1e-12 and max(delays) <= 0.07 + 0.02  # FIFO may hold one back
    assert len({round(d, 6) for d in delays}) > 50  # it does vary


def test_loss_costs_one_round_trip_per_lost_packet():
    link = Link(rate_mbps=100, latency_s=0.02, loss=0.05)
    ch = LinkChannel(link, seed=1)
    nbytes = 1000 * PACKET_BYTES
    arrival = ch.arrival(0.0, nbytes)
    expected = link.transfer_s(nbytes) + ch.lost_packets * (0.04 + link.wire_s(PACKET_BYTES))
    assert arrival == pytest.approx(expected)
    assert 20 < ch.lost_packets < 90  # ~50 of 1000 packets


def test_scenario_links_resolve_per_client_and_direction():
    sc = load_scenario({
        "name": "links", "algorithms": [{"name": "asgd"}],
        "links": {"rate_mbps": 10, "latency_ms": 50, "down": {"rate_mbps": 100}},
        "clients": [{}, {"link": {"rate_mbps": 1, "up": {"latency_ms": 5}}}],
    })
    assert sc.client_links(0) == (Link(10, 0.05), Link(100, 0.05))
    # the client's own plain rate beats the scenario's direction override: it is about this client
    assert sc.client_links(1) == (Link(1, 0.005), Link(1, 0.05))


def test_bad_link_values_are_named():
    with pytest.raises(Exception, match=r"links.*loss"):
        load_scenario({"name": "x", "algorithms": [{"name": "asgd"}], "clients": 1, "links": {"loss": 1.5}})
    with pytest.raises(Exception, match=r"rate_mbps"):
        load_scenario({"name": "x", "algorithms": [{"name": "asgd"}], "clients": [{"link": {"rate_mbps": 0}}]})
