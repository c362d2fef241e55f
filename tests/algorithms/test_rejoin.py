"""Clients lost and back: every server half drops a lost client and takes it back when it returns."""
import pytest
import torch

from edgesync import algorithms
from edgesync.algorithms.machinery.base import ModelState


def _server(name, model_state, clients=(0, 1, 2), **settings):
    spec = algorithms.get(name)
    return spec.server(spec.config(lr=0.1, **settings), model_state([1.0, 2.0]), list(clients))


def test_asgd_ignores_a_lost_client_and_replies_to_it_at_once_when_it_returns(model_state, make_update):
    server = _server("asgd", model_state)
    server.start()
    server.on_client_lost(1)
    assert server.on_update(1, make_update([1.0, 1.0])) == [] and server.updates == 0
    server.on_update(0, make_update([1.0, 0.0]))
    sends = server.on_client_joined(1)
    assert [s.client for s in sends] == [1] and server.clients == [0, 1, 2]
    assert sends[0].instruction.meta["version"] == 1
    assert torch.allclose(sends[0].instruction.tensors["params"], torch.tensor([0.9, 2.0]))
    server.on_update(1, make_update([0.0, 1.0], version=1))
    assert server.updates == 2 and torch.allclose(server.global_params(), torch.tensor([0.9, 1.9]))


def test_dgs_sends_a_returning_client_the_dense_model(model_state):
    server = _server("dgs", model_state, momentum=0.5, rate=0.5)
    server.start()
    server.on_client_lost(2)
    assert 2 not in server.v
    sends = server.on_client_joined(2)
    assert "params" in sends[0].instruction.tensors and torch.equal(server.v[2], server.M)


def test_a_round_closes_without_the_lost_client_and_takes_it_back_at_the_next(model_state, make_update):
    server = _server("ssgd", model_state)
    server.start()
    server.on_update(0, make_update([1.0, 0.0], version=0))
    assert server.on_client_lost(2) == []  # client 1 still owes this round
    assert server.on_client_joined(2) == []  # back mid-round: it waits for the next one
    sends = server.on_update(1, make_update([1.0, 0.0], version=0))
    assert server.updates == 1 and [s.client for s in sends] == [0, 1, 2]
    assert torch.allclose(server.global_params(), torch.tensor([0.9, 2.0]))  # the mean of the two who reported
    for c in (0, 1):
        server.on_update(c, make_update([0.0, 0.0], version=1))
    assert server.updates == 1  # round 1 waits for the returned client 2 as well
    server.on_update(2, make_update([0.0, 0.0], version=1))
    assert server.updates == 2


def test_the_last_lost_client_closes_the_round_and_a_return_to_an_empty_pool_starts_at_once(model_state, make_update):
    server = _server("local_sgd", model_state, clients=(0, 1))
    server.start()
    server.on_update(0, _delta(make_update, [0.5, 0.5]))
    sends = server.on_client_lost(1)  # the round had everyone else: it closes now
    assert server.updates == 1 and [s.client for s in sends] == [0]
    server.on_client_lost(0)
    sends = server.on_client_joined(1)
    assert [s.client for s in sends] == [1] and sends[0].instruction.meta["version"] == 1


def _delta(make_update, values):
    update = make_update([0.0, 0.0], version=0)
    update.tensors = {"delta": torch.tensor(values)}
    return update


def test_esync_state_server_stops_waiting_for_a_lost_slowest_client_and_records_a_returning_one(model_state,
                                                                                             make_update):
    server = _server("esync", model_state, clients=(0, 1))
    server.start()
    server.now = lambda: 10.0
    server.on_query(1, {"round": 0, "k": 0, "c": 5.0})  # client 1: slow (5 s a step)
    reply = server.on_query(0, {"round": 0, "k": 3, "c": 0.1})
    assert reply["ready"] is False  # it keeps client 0 busy while the slow one works
    server.on_client_lost(1)
    assert 1 not in server.records
    assert server.on_query(0, {"round": 0, "k": 4, "c": 0.1})["ready"] is True  # nobody slower to wait for
    server.on_client_joined(1)
    server.on_update(0, _delta(make_update, [0.0, 0.0]))  # closes round 0, which client 1 then joins
    assert 1 in server.records and server.clients == [0, 1]


def test_ssp_levels_a_returning_clients_clock_with_the_slowest(model_state, make_update):
    server = _server("ssp", model_state, staleness=1)
    server.start()
    for _ in range(3):
        server.on_update(0, make_update([0.0, 0.0]))
    server.on_update(1, make_update([0.0, 0.0]))
    server.on_client_lost(2)
    assert server.on_client_joined(2) and server.clock[2] == 1


ASYNC = [s.name for s in algorithms.specs() if s.family == "asynchronous"]
SETTINGS = {"fedbuff": {"buffer_size": 1}}  # every contribution a global update, so "applied" is visible


@pytest.mark.parametrize("name", ASYNC)
def test_every_asynchronous_half_takes_a_returning_client_and_applies_its_next_update(name, tiny_trainer):
    # Prepare: two clients through their real halves; client 1 is lost after one exchange each
    spec = algorithms.get(name)
    config = spec.config(lr=0.1, batch_size=4, **SETTINGS.get(name, {}))
    trainers = {rank: tiny_trainer(seed=rank) for rank in (0, 1)}
    initial = ModelState(trainers[0].get_params(), trainers[0].get_buffers())
    server = spec.server(config, initial, [0, 1])
    clients = {rank: spec.client(config, t) for rank, t in trainers.items()}
    pending = {s.client: s.instruction for s in server.start()}
    for rank in (0, 1):
        for send in server.on_update(rank, clients[rank].on_instruction(pending.pop(rank))):
            pending[send.client] = send.instruction
    server.on_client_lost(1)
    pending.pop(1, None)
    # Execute: it comes back as a new process (a fresh client half) and trains on what it is sent
    sends = server.on_client_joined(1)
    assert [s.client for s in sends] == [1]
    clients[1] = spec.client(config, trainers[1])
    before = server.updates
    server.on_update(1, clients[1].on_instruction(sends[0].instruction))
    # Assert: its update is applied like anyone's
    assert server.updates == before + 1 and server.clients == [0, 1]
    assert torch.isfinite(server.global_params()).all()


@pytest.mark.parametrize("name", ["shat", "shat_root", "ensemble"])
def test_shat_takes_a_returning_client_back_as_at_the_start(name, model_state, make_update):
    # Prepare: 3 clients, θ̃₀ = [1, 2], η = 0.1; client 2 is lost after update #0 and back after #1
    server = _server(name, model_state)
    server.start()
    server.on_update(0, make_update([1.0, 0.0]))              # #0: θ̃ = [0.9, 2]
    server.on_client_lost(2)
    server.on_update(1, make_update([0.0, 1.0]))              # #1: θ̃ = [0.9, 1.9]
    # Execute
    (send,) = server.on_client_joined(2)
    server.on_update(0, make_update([1.0, 1.0], version=1))   # #2 by another client since client 2's return
    replies = server.on_update(2, make_update([0.0, 0.0], version=2))  # #3: a zero gradient at θ̃ = [0.8, 1.8]
    # Assert: the first instruction again (θ̃ itself, α = 1, c_i = 0) and fresh per-client records:
    # c_i counts the one update by others since its return; the mirror of θ_i started at θ̃
    ins = send.instruction
    assert ins.meta["alpha"] == 1.0 and ins.meta["c_i"] == 0 and ins.meta["version"] == 2
    assert torch.allclose(ins.tensors["params"], torch.tensor([0.9, 1.9]))
    row = server.update_log[-1]
    assert row["client"] == 2 and row["c_i"] == 1 and row["lag"] == 1
    assert row["gap"] == pytest.approx(((0.1 ** 2 + 0.1 ** 2) / 2) ** 0.5)  # ‖[0.8, 1.8] − [0.9, 1.9]‖/√2
    assert [s.client for s in replies] == [2] and server.updates == 4
