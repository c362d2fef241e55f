"""ASGD server half: every expected number below is worked out by hand.

θ0 = [1, 2], η = 0.1, clients [0, 1]. The script used by several tests:
  1. client 0, computed on version 0, g = [1, 0]: τ = 0 − 0 = 0, θ = [0.9, 2.0],  reply v1 to 0
  2. client 1, computed on version 0, g = [0, 1]: τ = 1 − 0 = 1, θ = [0.9, 1.9],  reply v2 to 1
  3. client 0, computed on version 1, g = [2, 2]: τ = 2 − 1 = 1, θ = [0.7, 1.7],  reply v3 to 0
"""
import torch

from edgesync.algorithms.asgd import ASGDConfig, ASGDServer

THETA0 = [1.0, 2.0]


def _server(model_state, buffers=()):
    return ASGDServer(ASGDConfig(lr=0.1), model_state(THETA0, buffers), [0, 1])


def test_start_sends_theta0_to_every_client_with_version_0(model_state):
    # Prepare
    server = _server(model_state)
    # Execute
    sends = server.start()
    # Assert
    assert sorted(s.client for s in sends) == [0, 1]
    for s in sends:
        assert s.instruction.meta["version"] == 0
        assert torch.equal(s.instruction.tensors["params"], torch.tensor([1.0, 2.0]))


def test_each_update_is_applied_at_once_and_answered_to_its_sender_only(model_state, make_update):
    # Prepare
    server = _server(model_state)
    server.start()
    # Execute
    sends = server.on_update(0, make_update([1.0, 0.0], version=0))
    # Assert: θ = [1, 2] − 0.1·[1, 0] = [0.9, 2.0]
    assert [s.client for s in sends] == [0]
    assert sends[0].instruction.meta["version"] == 1
    assert torch.allclose(sends[0].instruction.tensors["params"], torch.tensor([0.9, 2.0]))
    assert server.updates == 1


def test_three_updates_from_two_clients(model_state, make_update):
    # Prepare
    server = _server(model_state)
    server.start()
    # Execute
    r1 = server.on_update(0, make_update([1.0, 0.0], version=0))
    r2 = server.on_update(1, make_update([0.0, 1.0], version=0))
    r3 = server.on_update(0, make_update([2.0, 2.0], version=1))
    # Assert
    expected = [(0, 1, [0.9, 2.0]), (1, 2, [0.9, 1.9]), (0, 3, [0.7, 1.7])]
    for reply, (client, version, theta) in zip((r1, r2, r3), expected):
        assert len(reply) == 1
        assert reply[0].client == client
        assert reply[0].instruction.meta["version"] == version
        assert torch.allclose(reply[0].instruction.tensors["params"], torch.tensor(theta))
    assert torch.allclose(server.global_params(), torch.tensor([0.7, 1.7]))
    assert server.updates == 3
    assert server.lag_sum == 2  # τ = 0 + 1 + 1


def test_lag_counts_updates_applied_by_others(model_state, make_update):
    # Prepare: client 1 keeps its version-0 model while client 0 pushes three updates
    server = _server(model_state)
    server.start()
    for version in range(3):
        server.on_update(0, make_update([0.0, 0.0], version=version))  # τ = 0 each time
    # Execute
    server.on_update(1, make_update([0.0, 0.0], version=0))
    # Assert: three updates by client 0 happened between client 1's model and its update
    assert server.lag_sum == 3
    assert server.updates == 4


def test_buffers_are_the_latest_received(model_state, make_update):
    # Prepare
    server = _server(model_state, buffers=[0.0, 0.0])
    server.start()
    first = make_update([0.0, 0.0], buffers=[1.0, 1.0], version=0)
    # Execute
    server.on_update(0, first)
    server.on_update(1, make_update([0.0, 0.0], buffers=[5.0, 3.0], version=0))
    reply = server.on_update(0, make_update([0.0, 0.0], version=1))  # no buffers: keep the latest
    first.tensors["buffers"].fill_(-1.0)  # the sender's tensor is not kept by reference
    # Assert
    assert torch.equal(server.global_buffers(), torch.tensor([5.0, 3.0]))
    assert torch.equal(reply[0].instruction.tensors["buffers"], torch.tensor([5.0, 3.0]))


def test_updates_from_lost_or_unknown_clients_are_ignored(model_state, make_update):
    # Prepare
    server = _server(model_state)
    server.start()
    # Execute
    lost = server.on_client_lost(1)
    from_lost = server.on_update(1, make_update([1.0, 1.0], version=0))
    from_unknown = server.on_update(9, make_update([1.0, 1.0], version=0))
    # Assert
    assert lost == [] and from_lost == [] and from_unknown == []
    assert torch.equal(server.global_params(), torch.tensor([1.0, 2.0]))
    assert server.updates == 0


def test_sent_tensors_are_never_mutated(model_state, make_update):
    # Prepare
    server = _server(model_state, buffers=[0.0, 0.0])
    start = server.start()
    to_client1 = start[1].instruction.tensors
    grad = make_update([1.0, 0.0], buffers=[4.0, 4.0], version=0)
    # Execute
    reply = server.on_update(0, grad)
    after_first = reply[0].instruction.tensors["params"]
    server.on_update(0, make_update([1.0, 1.0], buffers=[9.0, 9.0], version=1))
    # Assert
    assert torch.equal(to_client1["params"], torch.tensor([1.0, 2.0]))
    assert torch.equal(to_client1["buffers"], torch.tensor([0.0, 0.0]))
    assert torch.allclose(after_first, torch.tensor([0.9, 2.0]))
    assert torch.equal(grad.tensors["grad"], torch.tensor([1.0, 0.0]))
