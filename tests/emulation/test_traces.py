"""Piecewise-constant traces, availability schedules and partial participation, against hand-computed cases."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgesync.algorithms.machinery.base import ModelState, Population, Update
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDConfig
from edgesync.algorithms.machinery.participation import choose, round_size
from edgesync.emulation.availability import ExponentialAvailability, Schedule, parse_availability
from edgesync.emulation.links import Link, LinkChannel
from edgesync.emulation.profiles import FactorSampler, parse_profile
from edgesync.emulation.traces import TraceError, check_rows, read_rows
from edgesync.config import ScenarioError, load_scenario


# -- trace rows ---------------------------------------------------------------------------------------

def test_rows_must_increase_and_start_at_zero_or_later():
    assert check_rows([[0, 1], [30, 10]], ("t", "factor"), "x") == [(0.0, 1.0), (30.0, 10.0)]
    with pytest.raises(TraceError, match="row 2: times must increase, 3 s follows 5 s"):
        check_rows([[5, 1], [3, 2]], ("t", "factor"), "x")
    with pytest.raises(TraceError, match="before the start"):
        check_rows([[-1, 1]], ("t", "factor"), "x")
    with pytest.raises(TraceError, match=r"expected \[t, factor\]"):
        check_rows([[0, 1, 2]], ("t", "factor"), "x")
    with pytest.raises(TraceError, match="'fast' is not a number"):
        check_rows([[0, "fast"]], ("t", "factor"), "x")


def test_csv_with_header_and_comments_and_json_files_read_the_same(tmp_path):
    (tmp_path / "t.csv").write_text("# a phone\nt,factor\n0, 1\n60, 4\n")
    (tmp_path / "t.json").write_text('{"rows": [[0, 1], [60, 4]]}')
    assert read_rows("t.csv", tmp_path, "x") == read_rows("t.json", tmp_path, "x") == [[0.0, 1.0], [60.0, 4.0]]
    with pytest.raises(TraceError, match="cannot read"):
        read_rows("missing.csv", tmp_path, "profile trace file missing.csv")


# -- device profile traces ------------------------------------------------------------------------------

def test_a_trace_profile_gives_the_factor_in_force_when_the_step_starts():
    profile = parse_profile({"kind": "trace", "steps": [[10, 2], [30, 10]]})
    sampler = FactorSampler(profile, seed=0, rank=0)
    assert [sampler.next(t) for t in (0, 9.99, 10, 29.9, 30, 1e6)] == [1, 1, 2, 2, 10, 10]
    assert sampler.mean_factor == 1.0  # ×1 before the first row: the most demanding moment
    assert profile.label == "trace(x1→x2→x10)"
    with pytest.raises(ValueError, match="factor 0.5 at 30 s must be greater than or equal to 1"):
        parse_profile({"kind": "trace", "steps": [[0, 1], [30, 0.5]]})


# -- link traces ------------------------------------------------------------------------------------------

def test_a_message_spanning_a_rate_change_is_sent_at_each_rate_in_turn():
    link = Link(rate_mbps=8, latency_s=0.01, trace=((10.0, 1.0, 0.1),))
    channel = LinkChannel(link)
    assert channel.arrival(0.0, 1_000_000) == pytest.approx(1.0 + 0.01)  # 8 Mbit at 8 Mbit/s
    # from 9.5 s: 0.5 s at 8 Mbit/s carries 0.5 MB, the other 0.5 MB takes 4 s at 1 Mbit/s; latency then 0.1 s
    assert channel.arrival(9.5, 1_000_000) == pytest.approx(14.0 + 0.1)


def test_a_live_channels_origin_shifts_the_trace_to_its_clock():
    link = Link(rate_mbps=8, trace=((10.0, 1.0, 0.0),))
    channel = LinkChannel(link, origin=1000.0)  # the algorithm started at clock reading 1000
    assert channel.arrival(1011.0, 125_000) == pytest.approx(1012.0)  # 1 Mbit at 1 Mbit/s, after the change


def test_scenario_link_trace_from_a_file_relative_to_the_scenario(tmp_path):
    (tmp_path / "bw.csv").write_text("t,rate_mbps,latency_ms\n0,10,20\n30,1,100\n")
    (tmp_path / "s.yaml").write_text("name: s\nruntime: sim\nclients: [{link: {trace_file: bw.csv}}, x1]\n"
                                     "algorithms: [{name: asgd}]\n")
    sc = load_scenario(tmp_path / "s.yaml")
    up, down = sc.client_links(0)
    assert up.trace == down.trace == ((0.0, 10.0, 0.02), (30.0, 1.0, 0.1))
    assert sc.resolved()["clients"][0]["link"]["trace"] == [[0.0, 10.0, 20.0], [30.0, 1.0, 100.0]]  # kept inline
    (tmp_path / "bad.yaml").write_text("name: s\nclients: [{link: {trace: [[0, 0, 5]]}}]\nalgorithms: [{name: asgd}]\n")
    with pytest.raises(ScenarioError, match="the rate must be > 0 Mbit/s"):
        load_scenario(tmp_path / "bad.yaml")


# -- availability -----------------------------------------------------------------------------------------

def test_a_trace_schedule_is_online_inside_its_intervals_only():
    s = Schedule(parse_availability({"kind": "trace", "online": [[0, 10], [20, 30]]}))
    assert [s.online(t) for t in (0, 9.99, 10, 15, 20, 29.99, 30, 100)] == [1, 1, 0, 0, 1, 1, 0, 0]
    assert (s.next_change(0), s.next_change(12), s.next_change(25), s.next_change(31)) == (10, 20, 30, math.inf)
    with pytest.raises(ValueError, match="inside the interval before it"):
        parse_availability({"kind": "trace", "online": [[0, 10], [5, 30]]})
    with pytest.raises(ValueError, match="ends .* before it starts"):
        parse_availability({"kind": "trace", "online": [[10, 5]]})


def test_the_exponential_model_is_seeded_per_client_and_has_its_means():
    spec = ExponentialAvailability(mean_on_s=60, mean_off_s=30)
    a, b, other = Schedule(spec, 0, 3), Schedule(spec, 0, 3), Schedule(spec, 0, 4)
    assert a.intervals_until(1e4) == b.intervals_until(1e4) != other.intervals_until(1e4)
    horizon = 2e6
    on = Schedule(spec, 1, 0).intervals_until(horizon)
    lengths = [e - s for s, e in on[:-1]]
    gaps = [s2 - e1 for (_, e1), (s2, _) in zip(on, on[1:])]
    assert np.mean(lengths) == pytest.approx(60, rel=0.05)
    assert np.mean(gaps) == pytest.approx(30, rel=0.05)
    assert sum(lengths) / horizon == pytest.approx(2 / 3, abs=0.02)  # the stationary share online
    started_online = [Schedule(ExponentialAvailability(mean_on_s=60, mean_off_s=30, start="online"), 0, r).online(0)
                      for r in range(20)]
    assert all(started_online)


# -- partial participation ----------------------------------------------------------------------------------

def _config(**keys) -> LocalSGDConfig:
    return LocalSGDConfig(**keys)


def test_round_sizes():
    assert round_size(_config(clients_per_round=20), 200) == 20
    assert round_size(_config(clients_per_round=20), 7) == 7  # fewer online: all of them
    assert round_size(_config(client_fraction=0.1), 55) == 6
    assert round_size(_config(client_fraction=0.01), 20) == 1  # at least one
    assert round_size(_config(), 13) == 13
    with pytest.raises(ValueError, match="not both"):
        _config(clients_per_round=2, client_fraction=0.5)


def test_draws_are_seeded_among_the_online_and_weighted_by_data_size():
    pop = Population(seed=5, data_sizes={c: (1000 if c == 3 else 1) for c in range(10)})
    online = [0, 2, 3, 5, 7, 9]
    first = choose(_config(clients_per_round=3), pop, online, round_no=4)
    assert first == choose(_config(clients_per_round=3), pop, online, round_no=4)  # a replay draws the same
    assert set(first) <= set(online) and len(first) == 3
    assert choose(_config(clients_per_round=3), pop, online, round_no=5) != first or \
        choose(_config(clients_per_round=3), pop, online, round_no=6) != first
    weighted = [choose(_config(clients_per_round=1, client_sampling="data_size"), pop, online, r) for r in range(50)]
    assert sum(w == [3] for w in weighted) >= 45  # 1000 of the 1005 samples are client 3's


def _delta(value: float) -> Update:
    return Update(tensors={"delta": torch.full((2,), value)}, meta={"version": 0, "steps": 1, "samples": 1})


def test_a_round_waits_for_its_participants_only_and_redraws_when_they_all_leave():
    initial = ModelState(torch.zeros(2), torch.zeros(0))
    server = DeltaServer(_config(clients_per_round=2), initial, list(range(6)))
    server.population = Population(seed=0, data_sizes={c: 1 for c in range(6)})
    sends = server.start()
    chosen = [s.client for s in sends]
    assert len(chosen) == 2 and server.clients == chosen
    outsider = next(c for c in range(6) if c not in chosen)
    assert server.on_update(outsider, _delta(100.0)) == []  # not drawn: ignored
    assert server.on_update(chosen[0], _delta(1.0)) == []
    nxt = server.on_update(chosen[1], _delta(3.0))
    assert torch.equal(server.params, torch.full((2,), 2.0)) and len(nxt) == 2 and server.round == 1
    assert server.participation == {chosen[0]: 1, chosen[1]: 1}
    # every participant of round 1 goes offline before reporting: the round is drawn again among the rest
    first, second = server.clients
    assert server.on_client_lost(first) == []
    redrawn = server.on_client_lost(second)
    assert len(redrawn) == 2 and not {s.client for s in redrawn} & {first, second}
    assert server.round == 1 and server.attempt == 1
    rows = [r for r in server.drain_update_log() if "participants" in r]
    assert [r["round"] for r in rows] == [0, 1, 1] and rows[-1]["online"] == 4


def test_link_traces_are_refused_with_the_kernel_backend(tmp_path):
    (tmp_path / "s.yaml").write_text("name: s\nclients: [x1, x1]\nalgorithms: [{name: asgd}]\n"
                                     "links: {backend: netns, trace: [[5, 1, 100]]}\n")
    with pytest.raises(ScenarioError, match="use links.backend: transport with traces"):
        load_scenario(tmp_path / "s.yaml")
