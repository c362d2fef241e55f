"""FedProx: the proximal local step and FedAvg's aggregation, worked out by hand (docs/algorithms.md, `fedprox`).

Client i's loss is f_i(θ) = ½(θ − c_i)², so its gradient is θ − c_i, and FedProx adds μ·(θ − x). With η = 0.5
and μ = 1 one local step from any θ lands on (c_i + x)/2:
    θ − 0.5·((θ − c_i) + (θ − x)) = (c_i + x)/2,
and every further step stays there, so Δ_i = (c_i − x)/2 for any H ≥ 1. Plain local SGD (μ = 0) halves
θ − c_i every step instead: after H = 2 steps Δ_i = ¾·(c_i − x).
Two clients, c = 0 with 1 training sample and c = 4 with 3: the weighted mean of c is c̄ = 3 (unweighted 2),
so x ← x + (c̄ − x)/2 per round, from x₀ = 1: 2, 2.5, 2.75 (all dyadic: exact in float32).
"""
from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from edgesync.algorithms.fedprox import FedProxClient, FedProxConfig
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig
from edgesync.algorithms.machinery.base import Instruction, ModelState
from fake_quadratic import QuadraticTrainer, run_fifo


class ShiftedQuadratic(QuadraticTrainer):
    """f(θ) = ½‖θ − c‖²: gradient θ − c."""

    def __init__(self, c: float, num_samples: int):
        super().__init__(num_samples=num_samples)
        self.c = c

    def gradient(self, weight_decay: float = 0.0, interrupt=None):
        self.gradient_at.append(self.theta.clone())
        g = self.theta - self.c
        return g, 0.5 * float(g @ g)


def _world(config, client_cls, x0=1.0):
    server = DeltaServer(config, ModelState(torch.tensor([x0]), torch.zeros(0)), [0, 1])
    clients = {0: client_cls(config, ShiftedQuadratic(0.0, num_samples=1)),
               1: client_cls(config, ShiftedQuadratic(4.0, num_samples=3))}
    return server, clients


def test_one_proximal_step_lands_halfway_between_the_local_optimum_and_the_global_model():
    # Prepare: x = [1, −2], c = 0, η = 0.5, μ = 1: (c + x)/2 = [0.5, −1] after the first step and the second
    config = FedProxConfig(lr=0.5, mu=1.0, local_steps=2)
    trainer = QuadraticTrainer()
    x = torch.tensor([1.0, -2.0])
    # Execute
    update = FedProxClient(config, trainer).on_instruction(Instruction({"params": x}, {"version": 0}))
    # Assert: the second gradient was taken at [0.5, −1], where θ − c + μ(θ − x) = 0
    assert torch.equal(update.tensors["delta"], torch.tensor([-0.5, 1.0]))
    assert [t.tolist() for t in trainer.gradient_at] == [[1.0, -2.0], [0.5, -1.0]]
    assert update.meta["steps"] == 2 and update.meta["data_size"] == 8


def test_three_rounds_with_unequal_clients_by_hand():
    # Prepare: η = 0.5, μ = 1, H = 2, clients c = 0 (1 sample) and c = 4 (3 samples), x₀ = 1
    config = FedProxConfig(lr=0.5, mu=1.0, local_steps=2)
    server, clients = _world(config, FedProxClient)
    # Execute: three rounds, two updates each
    sends = run_fifo(server, clients, updates=6)
    # Assert: x = 1 → 2 → 2.5 → 2.75, each round's θ sent to both clients
    assert [s.instruction.tensors["params"].item() for s in sends] == [1.0, 1.0, 2.0, 2.0, 2.5, 2.5]
    assert server.global_params().item() == 2.75 and server.updates == 3


def test_without_the_proximal_term_the_clients_drift_further():
    # Prepare: the same clients, μ = 0: Δ_i = ¾(c_i − x), x ← x + ¾(3 − x): 1 → 2.5 → 2.875
    config = FedProxConfig(lr=0.5, mu=0.0, local_steps=2)
    server, clients = _world(config, FedProxClient)
    # Execute
    run_fifo(server, clients, updates=4)
    # Assert
    assert server.global_params().item() == 2.875


def test_unweighted_fedprox_takes_the_plain_mean():
    # weighted: false: c̄ = 2 and x ← x + (2 − x)/2: 1 → 1.5
    config = FedProxConfig(lr=0.5, mu=1.0, local_steps=2, weighted=False)
    server, clients = _world(config, FedProxClient)
    run_fifo(server, clients, updates=2)
    assert server.global_params().item() == 1.5


def test_mu_zero_is_fedavg_bit_for_bit(tiny_trainer):
    # Prepare: a real network with BatchNorm, two clients with 8 and 12 samples, momentum, 4 rounds of 3 steps;
    # FedAvg is local_sgd weighted by the clients' samples
    settings = {"lr": 0.1, "local_steps": 3, "momentum": 0.9, "batch_size": 4, "weighted": True}
    worlds = []
    for config, client_cls in ((FedProxConfig(mu=0.0, **settings), FedProxClient),
                               (LocalSGDConfig(**settings), LocalSGDClient)):
        trainers = {0: tiny_trainer(seed=0, n=8), 1: tiny_trainer(seed=1, n=12)}
        initial = ModelState(trainers[0].get_params(), trainers[0].get_buffers())
        server = DeltaServer(config, initial, [0, 1])
        worlds.append((server, {r: client_cls(config, t) for r, t in trainers.items()}))
    # Execute
    (prox, prox_clients), (fedavg, fedavg_clients) = worlds
    sends_prox = run_fifo(prox, prox_clients, updates=8)
    sends_fedavg = run_fifo(fedavg, fedavg_clients, updates=8)
    # Assert: every θ sent and the final model and statistics, bit for bit; and the model did move
    for a, b in zip(sends_prox, sends_fedavg):
        assert torch.equal(a.instruction.tensors["params"], b.instruction.tensors["params"])
    assert torch.equal(prox.global_params(), fedavg.global_params())
    assert torch.equal(prox.global_buffers(), fedavg.global_buffers())
    assert not torch.equal(prox.global_params(), sends_prox[0].instruction.tensors["params"])


def test_mu_pulls_a_real_network_towards_the_global_model(tiny_trainer):
    # the same instruction with μ = 0 and with a large μ: the proximal term shortens the client's step
    theta = tiny_trainer(seed=0, n=8, batchnorm=False).get_params()
    norms = {}
    for mu in (0.0, 10.0):
        config = FedProxConfig(lr=0.05, mu=mu, local_steps=5, batch_size=8)
        client = FedProxClient(config, tiny_trainer(seed=0, n=8, batch_size=8, batchnorm=False))
        norms[mu] = client.on_instruction(Instruction({"params": theta}, {"version": 0})).tensors["delta"].norm()
    assert 0 < norms[10.0] < norms[0.0]


def test_a_negative_mu_is_refused():
    with pytest.raises(ValidationError):
        FedProxConfig(mu=-0.1)
    assert FedProxConfig().weighted and FedProxConfig().mu == 0.01
