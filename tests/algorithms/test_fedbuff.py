"""FedBuff: buffered asynchronous aggregation, worked out by hand (docs/algorithms.md's known answers).

The server half is fed fake contributions (a difference Δ and the version it was pulled at) or the real
client half on f(θ) = ½θ² (g = θ, fake_quadratic); every expected number is computed here.
"""
import math
from collections import deque

import pytest
import torch

from edgesync.algorithms.asgd import ASGDConfig, ASGDServer
from edgesync.algorithms.machinery.base import Update
from edgesync.algorithms.fedbuff import FedBuffClient, FedBuffConfig, FedBuffServer
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused
from fake_quadratic import QuadraticTrainer


def _contribution(delta, version: int, buffers=None) -> Update:
    tensors = {"delta": torch.tensor(delta)}
    if buffers is not None:
        tensors["buffers"] = torch.tensor(buffers)
    return Update(tensors=tensors, meta={"version": version, "steps": 1, "samples": 4, "loss": 0.0})


def _exchange(server, clients, pending: deque) -> tuple:
    """Deliver the oldest instruction; returns (the send delivered, the global model after its update)."""
    send = pending.popleft()
    pending.extend(server.on_update(send.client, clients[send.client].on_instruction(send.instruction)))
    return send, server.global_params().clone()


def test_one_contribution_per_flush_one_step_no_weighting_is_asgd_exactly(model_state):
    # Prepare: three clients first in, first out, so every update after the first three is 2 versions stale;
    # η = 0.5 keeps every number dyadic (exact in float32), so "the same" means bit for bit
    x0 = [1.0, -2.0, 0.75]
    fedbuff_cfg = FedBuffConfig(lr=0.5, buffer_size=1, server_lr=1.0, staleness_weighting=False, local_steps=1)
    fedbuff = FedBuffServer(fedbuff_cfg, model_state(x0), [0, 1, 2])
    fedbuff_clients = {c: FedBuffClient(fedbuff_cfg, QuadraticTrainer()) for c in (0, 1, 2)}
    asgd_cfg = ASGDConfig(lr=0.5)
    asgd = ASGDServer(asgd_cfg, model_state(x0), [0, 1, 2])
    asgd_clients = {c: GradientClient(asgd_cfg, QuadraticTrainer()) for c in (0, 1, 2)}
    ours, theirs = deque(fedbuff.start()), deque(asgd.start())
    # Execute / Assert: the same instruction delivered, the same model after every update
    for _ in range(10):
        (send_f, x_f), (send_a, x_a) = _exchange(fedbuff, fedbuff_clients, ours), _exchange(asgd, asgd_clients, theirs)
        assert send_f.client == send_a.client
        assert send_f.instruction.meta["version"] == send_a.instruction.meta["version"]
        assert torch.equal(send_f.instruction.tensors["params"], send_a.instruction.tensors["params"])
        assert torch.equal(x_f, x_a)
    assert fedbuff.updates == asgd.updates == 10
    assert [r["lag"] for r in fedbuff.update_log] == [r["lag"] for r in asgd.update_log] == [0, 1, 2] + [2] * 7
    assert [r["gap"] for r in fedbuff.update_log] == [r["gap"] for r in asgd.update_log]
    assert [r["gap_normalized"] for r in fedbuff.update_log] == [r["gap_normalized"] for r in asgd.update_log]


def test_contributions_are_applied_once_by_the_flush_that_empties_the_buffer(model_state):
    # Prepare: B = 2, η_g = 1, no weighting, x₀ = [1, 2]
    config = FedBuffConfig(buffer_size=2, staleness_weighting=False)
    server = FedBuffServer(config, model_state([1.0, 2.0]), [0, 1])
    server.start()
    # Execute / Assert: the first contribution waits in the buffer, the second flushes both: x += [1, 1]/2
    server.on_update(0, _contribution([1.0, 0.0], version=0))
    assert server.updates == 0 and torch.equal(server.global_params(), torch.tensor([1.0, 2.0]))
    server.on_update(1, _contribution([0.0, 1.0], version=0))
    assert server.updates == 1 and torch.equal(server.global_params(), torch.tensor([1.5, 2.5]))
    assert server.buffer is None and server.contributions == 0
    # the next buffer holds only what arrives after the flush: x += ([2, 0] + [0, 4])/2
    server.on_update(0, _contribution([2.0, 0.0], version=1))
    assert torch.equal(server.global_params(), torch.tensor([1.5, 2.5]))
    server.on_update(1, _contribution([0.0, 4.0], version=0))
    assert server.updates == 2 and torch.equal(server.global_params(), torch.tensor([2.5, 4.5]))
    assert [r["flushed"] for r in server.update_log] == [False, True, False, True]


def test_three_contributions_weighted_by_staleness_by_hand(model_state):
    # Prepare: B = 3, η_g = 0.5, weighting 1/√(1 + lag); x₀ = [1, 2], statistics [0].
    # Three flushes of zero differences bring the version to 3 and leave x where it was.
    config = FedBuffConfig(buffer_size=3, server_lr=0.5, staleness_weighting=True)
    server = FedBuffServer(config, model_state([1.0, 2.0], buffers=[0.0]), [0, 1, 2, 3])
    server.start()
    for _ in range(9):
        server.on_update(server.updates % 3, _contribution([0.0, 0.0], version=server.updates, buffers=[0.0]))
    assert server.updates == 3 and torch.equal(server.global_params(), torch.tensor([1.0, 2.0]))
    # Execute: lag 3 (w = 1/2), lag 0 (w = 1), lag 1 (w = 1/√2)
    server.on_update(3, _contribution([4.0, 0.0], version=0, buffers=[1.0]))
    server.on_update(0, _contribution([0.0, 3.0], version=3, buffers=[3.0]))
    assert torch.equal(server.global_buffers(), torch.tensor([0.0]))  # statistics change at the flush only
    server.on_update(1, _contribution([2.0, -2.0], version=2, buffers=[2.0]))
    # Assert: buffer = ½·[4, 0] + [0, 3] + (1/√2)·[2, −2] = [2 + √2, 3 − √2]; x = x₀ + 0.5·buffer/3
    r2 = math.sqrt(2.0)
    assert server.updates == 4
    assert server.global_params().tolist() == pytest.approx([1 + 0.5 * (2 + r2) / 3, 2 + 0.5 * (3 - r2) / 3])
    rows = server.update_log[-3:]
    assert [r["lag"] for r in rows] == [3, 0, 1] and [r["update"] for r in rows] == [3, 3, 3]
    assert [r["weight"] for r in rows] == pytest.approx([0.5, 1.0, 1 / r2])
    assert [r["buffered"] for r in rows] == [1, 2, 3] and [r["flushed"] for r in rows] == [False, False, True]
    # the statistics: their mean weighted the same way, (½·1 + 1·3 + (1/√2)·2)/(½ + 1 + 1/√2)
    assert server.global_buffers().item() == pytest.approx((0.5 + 3 + r2) / (1.5 + 1 / r2))


def test_a_contributor_gets_the_model_at_once_and_versions_count_flushes(model_state):
    # Prepare: B = 2, two clients
    server = FedBuffServer(FedBuffConfig(buffer_size=2), model_state([1.0]), [0, 1])
    assert [(s.client, s.instruction.meta["version"]) for s in server.start()] == [(0, 0), (1, 0)]
    # Execute / Assert: no wait for the flush; the reply is the current model and version
    (send,) = server.on_update(0, _contribution([1.0], version=0))
    assert send.client == 0 and send.instruction.meta["version"] == 0 and send.instruction.tensors["params"].item() == 1.0
    (send,) = server.on_update(0, _contribution([3.0], version=0))  # flush: x = 1 + (1 + 3)/2
    assert send.instruction.meta["version"] == 1 and send.instruction.tensors["params"].item() == 3.0
    server.on_update(1, _contribution([0.0], version=0))  # pulled before the flush: lag 1
    server.on_update(0, _contribution([0.0], version=1))
    assert [(r["client"], r["update"], r["lag"]) for r in server.update_log] == [(0, 0, 0), (0, 0, 0), (1, 1, 1),
                                                                                   (0, 1, 0)]
    assert server.updates == 2 and server.lag_sum == 1


def test_a_lost_clients_buffered_contributions_stay_and_a_returning_one_gets_the_model_at_once(model_state):
    # Prepare: B = 2, no weighting
    server = FedBuffServer(FedBuffConfig(buffer_size=2, staleness_weighting=False), model_state([0.0]), [0, 1])
    server.start()
    server.on_update(1, _contribution([4.0], version=0))
    # Execute: client 1 is lost; its late contribution is dropped, the one in the buffer stays
    server.on_client_lost(1)
    assert server.on_update(1, _contribution([100.0], version=0)) == [] and server.contributions == 1
    server.on_update(0, _contribution([2.0], version=0))  # flush: x = 0 + (4 + 2)/2
    (send,) = server.on_client_joined(1)
    # Assert
    assert server.global_params().item() == 3.0
    assert send.client == 1 and send.instruction.meta["version"] == 1 and send.instruction.tensors["params"].item() == 3.0
    assert server.clients == [0, 1]


def test_the_client_sends_its_difference_after_k_local_steps(model_state):
    # θ = 1, η = 0.1, K = 2: 1 → 0.9 → 0.81, Δ = −0.19; the mean RMS of its raw gradients (1 + 0.9)/2
    config = FedBuffConfig(lr=0.1, local_steps=2)
    server = FedBuffServer(config, model_state([1.0]), [0])
    update = FedBuffClient(config, QuadraticTrainer()).on_instruction(server.start()[0].instruction)
    assert set(update.tensors) == {"delta"}
    assert update.tensors["delta"].item() == pytest.approx(-0.19)
    assert update.meta["grad_rms"] == pytest.approx(0.95) and update.meta["steps"] == 2
    # the coordinator's check of every UPDATE, from the half's declared format: a dense difference
    check = UpdateCheck.for_server(server, model_state([1.0]))
    check.check(update.tensors)
    with pytest.raises(UpdateRefused, match="'params' is not part of a fedbuff update"):
        check.check({"params": torch.ones(1)})


def test_a_restored_server_goes_on_with_its_half_full_buffer(model_state):
    # Prepare: B = 3, two contributions in the buffer when the state is taken
    config = FedBuffConfig(buffer_size=3, staleness_weighting=False)
    server = FedBuffServer(config, model_state([0.0]), [0, 1])
    server.start()
    server.on_update(0, _contribution([3.0], version=0))
    server.on_update(1, _contribution([6.0], version=0))
    restored = FedBuffServer(config, model_state([0.0]), [0, 1])
    restored.load_state_dict(server.state_dict())
    # Execute: the third contribution flushes the buffer, which the restart kept
    restored.on_update(0, _contribution([0.0], version=0))
    # Assert: x = (3 + 6 + 0)/3
    assert restored.updates == 1 and restored.global_params().item() == 3.0


def test_concurrency_keeps_c_clients_training_and_draws_the_next_among_the_rest(model_state):
    # Prepare: C = 2 of 5 clients, B = 2
    server = FedBuffServer(FedBuffConfig(buffer_size=2, concurrency=2), model_state([0.0]), [0, 1, 2, 3, 4])
    started = [s.client for s in server.start()]
    assert len(started) == 2 and sorted(server.training) == sorted(started)
    seen = set(started)
    for _ in range(30):
        # Execute: the first trainer contributes; one trainer is drawn among the three idle and itself
        contributor = server.training[0]
        (send,) = server.on_update(contributor, _contribution([1.0], version=server.updates))
        # Assert: always C trainers, each at most once
        assert len(server.training) == 2 and len(set(server.training)) == 2 and send.client in server.training
        seen.add(send.client)
    assert seen == {0, 1, 2, 3, 4}  # the draw reaches every client
    assert server.updates == 15  # 30 contributions, B = 2


def test_concurrency_draws_are_a_function_of_the_seed_and_refill_a_lost_trainers_slot(model_state):
    def run():
        server = FedBuffServer(FedBuffConfig(concurrency=3), model_state([0.0]), list(range(10)))
        order = [s.client for s in server.start()]
        for _ in range(10):
            order += [s.client for s in server.on_update(server.training[0], _contribution([0.0], version=0))]
        return server, order

    first, order = run()
    assert run()[1] == order  # the same seed draws the same trainers
    lost = first.training[1]
    (replacement,) = first.on_client_lost(lost)
    assert lost not in first.training and replacement.client in first.training and len(first.training) == 3
    assert first.on_client_joined(lost) == []  # back, but every slot is taken: it waits to be drawn
    assert lost in first.clients


def test_without_concurrency_every_client_trains_at_once(model_state):
    server = FedBuffServer(FedBuffConfig(), model_state([0.0]), [0, 1, 2])
    assert [s.client for s in server.start()] == [0, 1, 2] and server.training == []
