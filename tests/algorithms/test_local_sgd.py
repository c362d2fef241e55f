"""Local SGD / FedAvg: the aggregation identity, FedAvg weights, and one client = plain local SGD."""
from __future__ import annotations

import copy

import torch

from edgesync.algorithms.machinery.base import Instruction, ModelState, Update
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig


def delta_update(delta, version=0, data_size=1) -> Update:
    return Update(tensors={"delta": torch.tensor(delta)}, meta={"version": version, "data_size": data_size,
                                                                 "samples": 10, "steps": 10})


def server(model_state, **config) -> DeltaServer:
    return DeltaServer(LocalSGDConfig(**config), model_state([1.0, 2.0]), [0, 1])


def test_aggregation_is_theta_plus_global_lr_times_mean_delta(model_state):
    # θ0 = [1, 2]; Δ0 = [0.2, 0], Δ1 = [0, −0.4]; mean = [0.1, −0.2]
    s = server(model_state, global_lr=1.0)
    s.start()
    assert s.on_update(0, delta_update([0.2, 0.0])) == []  # the barrier
    sends = s.on_update(1, delta_update([0.0, -0.4]))
    assert torch.allclose(s.params, torch.tensor([1.1, 1.8]))
    assert [x.client for x in sends] == [0, 1] and sends[0].instruction.meta["version"] == 1

    half = server(model_state, global_lr=0.5)  # ε = 0.5 → θ = [1, 2] + 0.5·[0.1, −0.2]
    half.start()
    half.on_update(0, delta_update([0.2, 0.0]))
    half.on_update(1, delta_update([0.0, -0.4]))
    assert torch.allclose(half.params, torch.tensor([1.05, 1.9]))


def test_fedavg_weights_by_client_samples(model_state):
    # weights 3 and 1: mean = (3·[0.2, 0] + 1·[0, −0.4]) / 4 = [0.15, −0.1]
    s = server(model_state, weighted=True)
    s.start()
    s.on_update(0, delta_update([0.2, 0.0], data_size=3))
    s.on_update(1, delta_update([0.0, -0.4], data_size=1))
    assert torch.allclose(s.params, torch.tensor([1.15, 1.9]))


def test_one_client_is_plain_local_sgd(tiny_trainer):
    """One client, one round of H steps: θ1 equals H steps of torch.optim.SGD on the same batches."""
    trainer = tiny_trainer(n=8, batch_size=8, batchnorm=False)  # full batch: the same batch every step
    reference = copy.deepcopy(trainer.model)
    theta0 = trainer.get_params()
    config = LocalSGDConfig(local_steps=5, lr=0.1, momentum=0.9, batch_size=8)
    srv = DeltaServer(config, ModelState(theta0, torch.zeros(0)), [0])
    client = LocalSGDClient(config, trainer)
    (send,) = srv.start()
    (send,) = srv.on_update(0, client.on_instruction(send.instruction))

    opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(reference(trainer.x), trainer.y).backward()
        opt.step()
    expected = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    assert torch.allclose(srv.params, expected, atol=1e-6)
    assert torch.equal(send.instruction.tensors["params"], srv.params)


def test_momentum_restarts_every_round_and_step_budget_overrides_h(tiny_trainer):
    trainer = tiny_trainer(n=8, batch_size=8, batchnorm=False)
    config = LocalSGDConfig(local_steps=3, lr=0.1, momentum=0.9, batch_size=8)
    client = LocalSGDClient(config, trainer)
    theta = trainer.get_params()
    first = client.on_instruction(Instruction({"params": theta}, {"version": 0}))
    again = client.on_instruction(Instruction({"params": theta}, {"version": 0}))
    # The same start and a fresh momentum each round give the same Δ.
    assert torch.allclose(first.tensors["delta"], again.tensors["delta"])
    budget = client.on_instruction(Instruction({"params": theta}, {"version": 1, "local_steps": 7}))
    assert budget.meta["steps"] == 7 and budget.meta["samples"] == 7 * 8
    assert budget.meta["version"] == 1 and budget.meta["data_size"] == 8


def test_a_round_is_run_through_local_round_alone():
    # the unused wrapper `local_round_update` (LocalRound under another name) is gone, not kept as a second way
    from edgesync.algorithms import local_sgd
    assert not hasattr(local_sgd, "local_round_update")
    assert hasattr(local_sgd, "LocalRound")
