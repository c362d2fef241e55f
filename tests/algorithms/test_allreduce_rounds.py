"""The round server with `aggregation: allreduce` (rounds.py) and the ring's cost model (allreduce/host.py).

Every expected number is worked out by hand: θ0 = [1, 2], η = 0.1, SSGD with momentum 0.5 unless said.
"""
import pytest
import torch

from edgesync.algorithms.machinery.base import Update
from edgesync.algorithms.ssgd import SSGDConfig, SSGDServer
from edgesync.emulation.links import Link
from edgesync.runtime.allreduce.host import ring_bytes, ring_seconds
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused

THETA0 = [1.0, 2.0]


def _server(model_state, clients=(0, 1, 2), momentum=0.5, aggregation="allreduce"):
    config = SSGDConfig(lr=0.1, momentum=momentum, aggregation=aggregation)
    return SSGDServer(config, model_state(THETA0), list(clients))


def _report(version):
    return Update(tensors={}, meta={"version": version, "samples": 32, "steps": 1, "ring": {"weight": 1.0}})


def _mean(of, values):
    return Update(tensors={"mean": torch.tensor(values)}, meta={"ring": {"mean_of": of}})


def _by_client(sends):
    return {s.client: s.instruction for s in sends}


def _round(server, version, mean, lead=0):
    """Every participant's report, then the lead's mean; what the server sent meanwhile."""
    sends = []
    for c in server.clients:
        sends += server.on_update(c, _report(version))
    return sends + server.on_update(lead, _mean(version, mean))


def test_instructions_name_the_group_and_say_who_holds_the_model(model_state):
    server = _server(model_state)
    first = _by_client(server.start())
    for ins in first.values():
        assert ins.meta["ring"] == {"group": 1, "members": [0, 1, 2], "current": False, "lr": 0.1}
        assert torch.equal(ins.tensors["params"], torch.tensor(THETA0))
    assert server.on_update(1, _report(0)) == [] and server.on_update(2, _report(0)) == []
    # every report is in: the next round starts at once (every replica holds θ1), the mean on its way
    second = _by_client(server.on_update(0, _report(0)))
    assert sorted(second) == [0, 1, 2] and server.updates == 0 and server.round == 1
    for ins in second.values():
        assert ins.meta["ring"]["current"] is True and ins.meta["ring"]["group"] == 1  # same members: same group
        assert ins.meta["version"] == 1
    # the lead's mean g = [1, 2]: v = g; θ1 = θ0 − 0.1·v = [0.9, 1.8]
    assert server.on_update(0, _mean(0, [1.0, 2.0])) == []
    assert torch.allclose(server.params, torch.tensor([0.9, 1.8])) and server.updates == 1


def test_the_server_applies_the_leads_mean_as_the_replicas_do(model_state):
    server = _server(model_state)
    server.start()
    _round(server, 0, [1.0, 2.0])
    _round(server, 1, [2.0, 0.0])
    # v1 = [1, 2]; v2 = 0.5·v1 + [2, 0] = [2.5, 1]; θ2 = [0.9, 1.8] − 0.1·[2.5, 1] = [0.65, 1.7]
    assert torch.allclose(server.params, torch.tensor([0.65, 1.7]))
    assert server.updates == 2 and server.round == 2


def test_a_mean_before_the_last_report_and_a_round_before_the_last_mean_wait(model_state):
    server = _server(model_state)
    server.start()
    server.on_update(0, _report(0))
    assert server.on_update(0, _mean(0, [1.0, 2.0])) == []  # the lead is quicker than clients 1 and 2
    server.on_update(1, _report(0))
    assert len(server.on_update(2, _report(0))) == 3 and server.updates == 1  # closed, mean applied at once
    for c in (0, 1, 2):  # round 1 closes; its mean is late
        server.on_update(c, _report(1))
    assert server.round == 2 and server.updates == 1
    for c in (0, 1, 2):
        server.on_update(c, _report(2))
    assert server.round == 2  # round 2 cannot close before round 1's mean
    sends = server.on_update(0, _mean(1, [2.0, 0.0]))
    assert server.updates == 2 and server.round == 3 and len(sends) == 3
    assert torch.allclose(server.params, torch.tensor([0.65, 1.7]))


def test_a_client_without_a_replica_waits_for_the_mean(model_state):
    server = _server(model_state, clients=(0, 1))
    server.start()
    _round(server, 0, [1.0, 2.0])
    server.on_client_lost(1)  # after round 0: it comes back with no replica
    assert server.on_client_joined(1) == []
    assert server.on_update(0, _report(1)) == []  # round 1, client 0 alone: round 2 needs θ2 for client 1
    sends = _by_client(server.on_update(0, _mean(1, [0.0, 0.0])))
    # round 2 draws 0 and 1; client 1 gets θ2 (and the velocity) with the mean: v2 = 0.5·[1, 2]
    assert sorted(sends) == [0, 1] and sends[1].meta["ring"]["current"] is False
    assert torch.allclose(sends[1].tensors["params"], torch.tensor([0.85, 1.7]))
    assert torch.allclose(sends[1].tensors["velocity"], torch.tensor([0.5, 1.0]))


def test_a_lead_lost_before_its_mean_arrived_restarts_the_round(model_state):
    server = _server(model_state)
    server.start()
    for c in (0, 1, 2):
        server.on_update(c, _report(0))
    again = _by_client(server.on_client_lost(0))
    assert server.round == 0 and server.updates == 0 and sorted(again) == [1, 2]
    for ins in again.values():  # the replicas are ahead of the server: θ0 to everyone, a new group
        assert ins.meta["ring"]["current"] is False and ins.meta["version"] == 0 and ins.meta["ring"]["group"] == 2
        assert torch.equal(ins.tensors["params"], torch.tensor(THETA0))
    assert server.on_update(0, _mean(0, [1.0, 2.0])) == [] and server.updates == 0  # too late: ignored


def test_a_full_update_is_summed_as_in_the_parameter_server_form(model_state, make_update):
    """The simulator sends whole updates: the same arithmetic as aggregation ps, and replicas are current."""
    ring, ps = _server(model_state), _server(model_state, aggregation="ps")
    sends = {}
    for server in (ring, ps):
        server.start()
        server.on_update(0, make_update([1.0, 0.0], version=0))
        server.on_update(1, make_update([2.0, 4.0], version=0))
        sends[server] = _by_client(server.on_update(2, make_update([0.0, 2.0], version=0)))
    assert torch.equal(ring.params, ps.params)  # mean [1, 2]: θ1 = [0.9, 1.8]
    assert torch.allclose(ring.params, torch.tensor([0.9, 1.8]))
    assert all(ins.meta["ring"]["current"] for ins in sends[ring].values())
    assert not any("ring" in ins.meta for ins in sends[ps].values())


def test_a_participant_lost_before_it_reported_restarts_the_round_with_the_model(model_state):
    server = _server(model_state)
    server.start()
    _round(server, 0, [1.0, 2.0])
    server.on_update(1, _report(1))  # round 1: client 1 reported, then client 2 is lost before reporting
    again = _by_client(server.on_client_lost(2))
    assert sorted(again) == [0, 1] and server.round == 1
    for ins in again.values():  # a new group of the two; everyone's θ (and the velocity) from the server
        assert ins.meta["ring"] == {"group": 2, "members": [0, 1], "current": False, "lr": 0.1}
        assert torch.allclose(ins.tensors["params"], torch.tensor([0.9, 1.8]))
        assert torch.allclose(ins.tensors["velocity"], torch.tensor([1.0, 2.0]))
    assert server.drain_update_log()[-1]["ring_restarted"] is True
    _round(server, 1, [0.0, 0.0])  # the old group's reports are gone; the new group's round closes
    assert server.round == 2  # v2 = 0.5·[1, 2]; θ2 = [0.9, 1.8] − 0.1·[0.5, 1] = [0.85, 1.7]
    assert torch.allclose(server.params, torch.tensor([0.85, 1.7]))


def test_a_participant_lost_after_it_reported_counts(model_state):
    server = _server(model_state)
    server.start()
    server.on_update(1, _report(0))
    assert server.on_client_lost(1) == []  # its sum is in the others' ring: the round goes on
    server.on_update(2, _report(0))
    sends = _by_client(server.on_update(0, _report(0)))
    assert sorted(sends) == [0, 2] and server.ring_group == 2  # the next round: a group without client 1
    assert all(ins.meta["ring"]["current"] for ins in sends.values())


def test_a_resumed_server_sends_the_model_to_everyone(model_state):
    server = _server(model_state)
    server.start()
    _round(server, 0, [1.0, 2.0])
    for c in (0, 1, 2):
        server.on_update(c, _report(1))  # saved while round 1's mean is on its way: resumed, round 1 again
    resumed = _server(model_state)
    resumed.load_state_dict(server.state_dict())  # the new client processes hold no replica
    sends = _by_client(resumed.broadcast())
    assert resumed.round == 1 and resumed.updates == 1
    assert not any(ins.meta["ring"]["current"] for ins in sends.values())


def test_reports_are_checked_like_updates(model_state):
    check = UpdateCheck.for_server(_server(model_state), model_state(THETA0))
    check.check({}, ring=True)
    check.check({"mean": torch.zeros(2)}, ring=True)
    with pytest.raises(UpdateRefused, match="'grad' is not part of a ssgd all-reduce report"):
        check.check({"grad": torch.zeros(2)}, ring=True)
    with pytest.raises(UpdateRefused, match="shape"):
        check.check({"mean": torch.zeros(3)}, ring=True)
    ps = UpdateCheck.for_server(_server(model_state, aggregation="ps"), model_state(THETA0))
    with pytest.raises(UpdateRefused):  # a report to a parameter server carries no gradient
        ps.check({"mean": torch.zeros(2)}, ring=True)


def test_ring_time_and_bytes_by_hand():
    # 4 participants, 1 MB at 10 Mbit/s: 6 steps of a 250 kB chunk, 0.2 s each
    links = [(Link(rate_mbps=10), Link(rate_mbps=10))] * 4
    assert ring_seconds(links, 1_000_000) == pytest.approx(1.2)
    # latency 5 ms on every link: each hop crosses an uplink and a downlink, +10 ms a step
    slow = [(Link(rate_mbps=10, latency_s=0.005), Link(rate_mbps=10, latency_s=0.005))] * 4
    assert ring_seconds(slow, 1_000_000) == pytest.approx(6 * 0.21)
    # one 1 Mbit/s downlink sets every step's pace: 2 s per chunk
    mixed = links[:3] + [(Link(rate_mbps=10), Link(rate_mbps=1))]
    assert ring_seconds(mixed, 1_000_000) == pytest.approx(12.0)
    assert ring_seconds(links[:1], 1_000_000) == 0.0 and ring_seconds([(Link(), Link())] * 4, 10**9) == 0.0
    assert ring_bytes(1_000_000, 4) == 1_500_000 and ring_bytes(40, 1) == 0  # 2(N−1)/N of 1 MB


def _scenario(aggregation="allreduce", **extra):
    return {"name": "ring", "runtime": "live", "clients": 4,
            "algorithms": [{"name": "local_sgd", "aggregation": aggregation}], **extra}


def test_what_all_reduce_cannot_run_with_is_refused_by_name():
    from edgesync.config import ScenarioError, load_scenario
    load_scenario(_scenario())
    with pytest.raises(ScenarioError, match=r"algorithms\[0\] \(local_sgd\): aggregation: allreduce .* choose one"):
        load_scenario(_scenario(sharding="memory"))
    with pytest.raises(ScenarioError, match="network namespaces"):
        load_scenario(_scenario(links={"backend": "netns"}))
    with pytest.raises(ScenarioError, match="slots"):
        load_scenario(_scenario(live={"processes": 2}))
    with pytest.raises(ScenarioError, match="aggregation"):  # an asynchronous algorithm has no rounds to reduce
        load_scenario({**_scenario(), "algorithms": [{"name": "asgd", "aggregation": "allreduce"}]})
    with pytest.raises(ScenarioError, match="aggregation"):
        load_scenario({**_scenario(), "algorithms": [{"name": "ssgd", "aggregation": "ring"}]})


def test_the_rings_backend():
    from edgesync.runtime.allreduce.host import ring_backend
    assert ring_backend("auto", ["cpu", "cpu"]) == "gloo"
    assert ring_backend("auto", ["cuda:0", "cuda:1"]) == "nccl"
    assert ring_backend("auto", ["cuda:0", "cuda:0"]) == "gloo"  # NCCL refuses two ranks on one GPU
    assert ring_backend("auto", ["cuda:0", "cpu"]) == "gloo"
    assert ring_backend("nccl", ["cuda:0", "cuda:0"]) == "nccl"  # a lab: one client per machine, each its cuda:0
