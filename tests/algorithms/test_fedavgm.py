"""FedAvgM: server momentum over FedAvg's round, worked out by hand (docs/algorithms.md, `fedavgm`).

x₀ = [1, 2], β = 0.5, η_g = 0.5, two clients weighted 3 and 1 (their training samples):
  round 1: Δ₀ = [1, 0], Δ₁ = [0, −2]: Δ = ¾[1, 0] + ¼[0, −2] = [0.75, −0.5];  v = [0.75, −0.5];   x = [1.375, 1.75]
  round 2: Δ₀ = [0, 1], Δ₁ = [2, 0]:  Δ = [0.5, 0.75];   v = ½[0.75, −0.5] + Δ = [0.875, 0.5];  x = [1.8125, 2]
  round 3: Δ₀ = Δ₁ = [0, 0]:          Δ = [0, 0];        v = [0.4375, 0.25];                  x = [2.03125, 2.125]
(all dyadic: exact in float32).
"""
from __future__ import annotations

import copy

import pytest
import torch
from pydantic import ValidationError

from edgesync.algorithms.fedavgm import FedAvgMConfig, FedAvgMServer
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig
from edgesync.algorithms.machinery.base import ModelState, Update
from fake_quadratic import run_fifo

ROUNDS = [([1.0, 0.0], [0.0, -2.0]), ([0.0, 1.0], [2.0, 0.0]), ([0.0, 0.0], [0.0, 0.0])]
EXPECTED_X = [[1.375, 1.75], [1.8125, 2.0], [2.03125, 2.125]]
EXPECTED_V = [[0.75, -0.5], [0.875, 0.5], [0.4375, 0.25]]


def _delta(values, version: int, data_size: int) -> Update:
    return Update(tensors={"delta": torch.tensor(values)},
                  meta={"version": version, "data_size": data_size, "samples": 4, "steps": 1})


def _round(server, version: int, deltas) -> None:
    for client, (delta, size) in enumerate(zip(deltas, (3, 1))):
        server.on_update(client, _delta(delta, version, size))


def _server(model_state, **config) -> FedAvgMServer:
    server = FedAvgMServer(FedAvgMConfig(**{"server_momentum": 0.5, "global_lr": 0.5, **config}),
                           model_state([1.0, 2.0]), [0, 1])
    server.start()
    return server


def test_three_rounds_of_server_momentum_with_unequal_weights_by_hand(model_state):
    server = _server(model_state)
    for version, (deltas, x, v) in enumerate(zip(ROUNDS, EXPECTED_X, EXPECTED_V)):
        _round(server, version, deltas)
        assert server.global_params().tolist() == x, f"round {version + 1}"
        assert server.velocity.tolist() == v
    assert server.updates == 3


def test_the_momentum_survives_a_restart(model_state):
    # Prepare: the state after round 2, through a deep copy as the checkpoint writes it
    server = _server(model_state)
    for version in (0, 1):
        _round(server, version, ROUNDS[version])
    restored = FedAvgMServer(server.config, model_state([1.0, 2.0]), [0, 1])
    restored.load_state_dict(copy.deepcopy(server.state_dict()))
    # Execute: round 3 brings nothing; x moves by the momentum alone
    _round(restored, 2, ROUNDS[2])
    # Assert
    assert restored.global_params().tolist() == EXPECTED_X[2]


def test_an_all_reduce_replica_built_from_the_replica_state_steps_as_the_server(model_state):
    # a client whose replica is not current gets v with θ (rounds.py), then applies the round's mean itself
    server = _server(model_state)
    _round(server, 0, ROUNDS[0])
    replica = FedAvgMServer(server.config, ModelState(server.params.clone(), torch.zeros(0)), [])
    replica.load_replica_state({k: t.clone() for k, t in server.replica_state().items()})
    replica.apply(torch.tensor([0.5, 0.75]))
    _round(server, 1, ROUNDS[1])
    assert torch.equal(replica.params, server.global_params()) and replica.params.tolist() == EXPECTED_X[1]


def test_beta_zero_and_unit_rate_is_fedavg_bit_for_bit(tiny_trainer):
    # Prepare: real clients (BatchNorm, momentum, 8 and 12 samples); FedAvg is local_sgd weighted by samples
    settings = {"lr": 0.1, "local_steps": 3, "momentum": 0.9, "batch_size": 4, "weighted": True, "global_lr": 1.0}
    runs = []
    for config, server_cls in ((FedAvgMConfig(server_momentum=0.0, **settings), FedAvgMServer),
                               (LocalSGDConfig(**settings), DeltaServer)):
        trainers = {0: tiny_trainer(seed=0, n=8), 1: tiny_trainer(seed=1, n=12)}
        server = server_cls(config, ModelState(trainers[0].get_params(), trainers[0].get_buffers()), [0, 1])
        sends = run_fifo(server, {r: LocalSGDClient(config, t) for r, t in trainers.items()}, updates=8)
        runs.append((server, sends))
    # Execute / Assert: every θ sent and the final model, bit for bit
    (m, m_sends), (avg, avg_sends) = runs
    for a, b in zip(m_sends, avg_sends):
        assert torch.equal(a.instruction.tensors["params"], b.instruction.tensors["params"])
    assert torch.equal(m.global_params(), avg.global_params())
    assert torch.equal(m.global_buffers(), avg.global_buffers())
    assert not torch.equal(m.global_params(), m_sends[0].instruction.tensors["params"])


def test_momentum_of_one_or_more_is_refused():
    with pytest.raises(ValidationError):
        FedAvgMConfig(server_momentum=1.0)
    assert FedAvgMConfig().server_momentum == 0.9 and FedAvgMConfig().weighted
