"""SSGD server half: every expected number below is worked out by hand.

θ0 = [1, 2], η = 0.1, clients [0, 1] unless a test says otherwise.
"""
import pytest
import torch

from edgesync.algorithms.ssgd import SSGDConfig, SSGDServer

THETA0 = [1.0, 2.0]


def _server(model_state, momentum=0.0, buffers=(), clients=(0, 1)):
    return SSGDServer(SSGDConfig(lr=0.1, momentum=momentum), model_state(THETA0, buffers), list(clients))


def _by_client(sends):
    return {s.client: s.instruction for s in sends}


def test_start_sends_theta0_to_every_client_with_version_0(model_state):
    # Prepare
    server = _server(model_state)
    # Execute
    sends = server.start()
    # Assert
    got = _by_client(sends)
    assert sorted(got) == [0, 1]
    for ins in got.values():
        assert ins.meta["version"] == 0
        assert torch.equal(ins.tensors["params"], torch.tensor([1.0, 2.0]))
        assert "buffers" not in ins.tensors  # the model has none


def test_barrier_then_mean_gradient_step(model_state, make_update):
    # Prepare
    server = _server(model_state)
    server.start()
    # Execute
    first = server.on_update(0, make_update([1.0, 0.0], version=0))
    second = server.on_update(1, make_update([0.0, 1.0], version=0))
    # Assert
    assert first == []  # client 1 has not reported: the barrier holds
    # mean g = [0.5, 0.5]; θ = [1, 2] − 0.1·[0.5, 0.5] = [0.95, 1.95]
    got = _by_client(second)
    assert sorted(got) == [0, 1]
    for ins in got.values():
        assert ins.meta["version"] == 1
        assert torch.allclose(ins.tensors["params"], torch.tensor([0.95, 1.95]))
    assert torch.allclose(server.global_params(), torch.tensor([0.95, 1.95]))
    assert server.updates == 1


def test_master_momentum_over_two_rounds(model_state, make_update):
    # Prepare
    server = _server(model_state, momentum=0.5)
    server.start()
    # Execute
    server.on_update(0, make_update([1.0, 0.0], version=0))
    round1 = server.on_update(1, make_update([0.0, 1.0], version=0))
    server.on_update(0, make_update([2.0, 0.0], version=1))
    round2 = server.on_update(1, make_update([0.0, 4.0], version=1))
    # Assert
    # round 1: g = [0.5, 0.5], v = g = [0.5, 0.5], θ = [0.95, 1.95]
    assert torch.allclose(_by_client(round1)[0].tensors["params"], torch.tensor([0.95, 1.95]))
    # round 2: g = [1, 2], v = 0.5·[0.5, 0.5] + [1, 2] = [1.25, 2.25], θ = [0.95 − 0.125, 1.95 − 0.225]
    expected = torch.tensor([0.825, 1.725])
    for ins in _by_client(round2).values():
        assert ins.meta["version"] == 2
        assert torch.allclose(ins.tensors["params"], expected)
    assert server.updates == 2


def test_buffers_are_averaged_and_broadcast(model_state, make_update):
    # Prepare
    server = _server(model_state, buffers=[0.0, 0.0])
    start = server.start()
    # Execute
    server.on_update(0, make_update([1.0, 0.0], buffers=[1.0, 3.0], version=0))
    sends = server.on_update(1, make_update([0.0, 1.0], buffers=[3.0, 7.0], version=0))
    # Assert
    assert torch.equal(start[0].instruction.tensors["buffers"], torch.tensor([0.0, 0.0]))
    for ins in _by_client(sends).values():
        assert torch.allclose(ins.tensors["buffers"], torch.tensor([2.0, 5.0]))  # ([1,3] + [3,7]) / 2
    assert torch.allclose(server.global_buffers(), torch.tensor([2.0, 5.0]))


def test_stale_update_is_ignored(model_state, make_update):
    # Prepare: finish round 0 so the server is in round 1
    server = _server(model_state)
    server.start()
    server.on_update(0, make_update([1.0, 0.0], version=0))
    server.on_update(1, make_update([0.0, 1.0], version=0))  # θ = [0.95, 1.95]
    # Execute
    stale = server.on_update(0, make_update([100.0, 100.0], version=0))
    server.on_update(0, make_update([1.0, 1.0], version=1))
    sends = server.on_update(1, make_update([3.0, 1.0], version=1))
    # Assert
    assert stale == []
    # only the round-1 gradients count: g = [2, 1], θ = [0.95 − 0.2, 1.95 − 0.1] = [0.75, 1.85]
    for ins in _by_client(sends).values():
        assert ins.meta["version"] == 2
        assert torch.allclose(ins.tensors["params"], torch.tensor([0.75, 1.85]))


def test_update_from_unknown_client_is_ignored(model_state, make_update):
    # Prepare
    server = _server(model_state)
    server.start()
    # Execute
    sends = server.on_update(7, make_update([1.0, 1.0], version=0))
    # Assert
    assert sends == []
    assert torch.equal(server.global_params(), torch.tensor([1.0, 2.0]))


def test_losing_the_missing_client_completes_the_round(model_state, make_update):
    # Prepare
    server = _server(model_state)
    server.start()
    server.on_update(0, make_update([1.0, 0.0], version=0))
    # Execute
    sends = server.on_client_lost(1)
    # Assert: the round closes with client 0's gradient alone, θ = [1 − 0.1, 2] = [0.9, 2]
    got = _by_client(sends)
    assert list(got) == [0]
    assert got[0].meta["version"] == 1
    assert torch.allclose(got[0].tensors["params"], torch.tensor([0.9, 2.0]))


def test_losing_a_client_that_already_reported_keeps_its_gradient(model_state, make_update):
    # Prepare: three clients, client 2 reports then is lost
    server = _server(model_state, clients=(0, 1, 2))
    server.start()
    server.on_update(2, make_update([50.0, 50.0], version=0))
    # Execute
    lost = server.on_client_lost(2)
    server.on_update(0, make_update([1.0, 0.0], version=0))
    sends = server.on_update(1, make_update([0.0, 1.0], version=0))
    # Assert: the round waits for 0 and 1; client 2's gradient was computed on this round's θ, so it
    # counts: mean = ([50, 50] + [1, 0] + [0, 1]) / 3 = [17, 17], θ = [1, 2] − 0.1·[17, 17] = [−0.7, 0.3]
    assert lost == []
    assert sorted(_by_client(sends)) == [0, 1]
    assert torch.allclose(sends[0].instruction.tensors["params"], torch.tensor([-0.7, 0.3]))


@pytest.mark.parametrize("momentum", [0.0, 0.5])
def test_sent_tensors_are_never_mutated(model_state, make_update, momentum):
    # Prepare
    server = _server(model_state, momentum=momentum, buffers=[0.0, 0.0])
    start = server.start()
    sent_params = start[0].instruction.tensors["params"]
    sent_buffers = start[0].instruction.tensors["buffers"]
    g0, g1 = make_update([1.0, 0.0], buffers=[1.0, 1.0]), make_update([0.0, 1.0], buffers=[3.0, 3.0])
    # Execute: round 0 completes (its broadcast carries round-1 tensors), then round 1 completes
    server.on_update(0, g0)
    round1 = server.on_update(1, g1)
    round1_params = round1[0].instruction.tensors["params"]
    server.on_update(0, make_update([1.0, 1.0], buffers=[5.0, 5.0], version=1))
    server.on_update(1, make_update([1.0, 1.0], buffers=[7.0, 7.0], version=1))
    # Assert
    assert torch.equal(sent_params, torch.tensor([1.0, 2.0]))
    assert torch.equal(sent_buffers, torch.tensor([0.0, 0.0]))
    assert torch.allclose(round1_params, torch.tensor([0.95, 1.95]))
    # the clients' tensors (possibly read-only network views) are not written to either
    assert torch.equal(g0.tensors["grad"], torch.tensor([1.0, 0.0]))
    assert torch.equal(g1.tensors["buffers"], torch.tensor([3.0, 3.0]))


def test_initial_model_state_is_not_mutated(model_state, make_update):
    # Prepare
    initial = model_state(THETA0)
    server = SSGDServer(SSGDConfig(lr=0.1), initial, [0])
    server.start()
    # Execute
    server.on_update(0, make_update([1.0, 1.0], version=0))
    # Assert
    assert torch.equal(initial.params, torch.tensor([1.0, 2.0]))
    assert torch.allclose(server.global_params(), torch.tensor([0.9, 1.9]))
