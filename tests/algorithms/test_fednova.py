"""FedNova (docs/algorithms.md, `fednova`): x ← x − η_g·τ_eff·Σ p_i·d_i with d_i = −Δ_i/τ_i, by hand; equal τ_i is
FedAvg; twice the steps is not twice the pull."""
from __future__ import annotations

import copy

import pytest
import torch
from pydantic import ValidationError

from edgesync.algorithms.fednova import FedNovaClient, FedNovaConfig, FedNovaServer
from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig
from edgesync.algorithms.machinery.base import ModelState, Update

from fake_quadratic import QuadraticTrainer


def delta(values, version=0, steps=1, data_size=1, buffers=None) -> Update:
    tensors = {"delta": torch.tensor(values)}
    if buffers is not None:
        tensors["buffers"] = torch.tensor(buffers)
    return Update(tensors, {"version": version, "steps": steps, "samples": 4 * steps, "data_size": data_size})


def server(x0, clients=(0, 1), **config) -> FedNovaServer:
    s = FedNovaServer(FedNovaConfig(**config), ModelState(torch.tensor(x0), torch.zeros(0)), list(clients))
    s.start()
    return s


def test_twice_the_steps_gets_the_same_weight_in_the_direction_not_twice_the_pull():
    # Constant gradients g_A = [1, 0], g_B = [0, 1], η = 0.1: A runs 1 step (Δ = [−0.1, 0]), B runs 2 (Δ = [0, −0.2]).
    # d_A = [0.1, 0], d_B = [0, 0.1]; p = ½ each; τ_eff = 1.5; x = 0 − 1.5·[0.05, 0.05] = [−0.075, −0.075]
    s = server([0.0, 0.0], weighted=False)
    s.on_update(0, delta([-0.1, 0.0], steps=1))
    s.on_update(1, delta([0.0, -0.2], steps=2))
    assert torch.allclose(s.params, torch.tensor([-0.075, -0.075]), atol=1e-7)
    # FedAvg pulls twice as hard towards B: x = ½·([−0.1, 0] + [0, −0.2]) = [−0.05, −0.1]
    fedavg = DeltaServer(LocalSGDConfig(), ModelState(torch.zeros(2), torch.zeros(0)), [0, 1])
    fedavg.start()
    fedavg.on_update(0, delta([-0.1, 0.0], steps=1))
    fedavg.on_update(1, delta([0.0, -0.2], steps=2))
    assert torch.allclose(fedavg.params, torch.tensor([-0.05, -0.1]))


def test_weights_steps_and_the_server_rate_by_hand():
    # p = 3/4, 1/4 (data sizes 3 and 1), τ = 2 and 4, Δ_A = [−0.4, 0.2], Δ_B = [0.8, −0.8], η_g = 0.5:
    # d_A = [0.2, −0.1], d_B = [−0.2, 0.2]; Σ p·d = [0.1, −0.025]; τ_eff = 1.5 + 1 = 2.5;
    # x = [1, 2] − 0.5·2.5·[0.1, −0.025] = [0.875, 2.03125]
    s = server([1.0, 2.0], global_lr=0.5)
    s.on_update(0, delta([-0.4, 0.2], steps=2, data_size=3))
    s.on_update(1, delta([0.8, -0.8], steps=4, data_size=1))
    assert torch.allclose(s.params, torch.tensor([0.875, 2.03125]), atol=1e-7)


def test_three_rounds_of_unequal_local_work_on_a_quadratic_by_hand():
    # f = ½‖θ‖² on both clients, η = 0.5: one step takes y to y/2 (Δ = −0.5x), two to y/4 (Δ = −0.75x).
    # A: 3 samples, its instruction's 1 step; B: 1 sample, 2 steps (the config's). p = 3/4, 1/4.
    # d_A = 0.5x, d_B = 0.375x; Σ p·d = 0.46875x; τ_eff = 3/4 + 2/4 = 1.25: x ← x − 1.25·0.46875x = 0.4140625x.
    config = FedNovaConfig(lr=0.5, local_steps=2)
    s = FedNovaServer(config, ModelState(torch.tensor([1.0, 2.0]), torch.zeros(0)), [0, 1])
    clients = {0: FedNovaClient(config, QuadraticTrainer(num_samples=3)),
               1: FedNovaClient(config, QuadraticTrainer(num_samples=1))}
    sends = s.start()
    for factor in (0.4140625, 0.4140625 ** 2, 0.4140625 ** 3):
        out = []
        for send in sends:
            if send.client == 0:  # a shorter budget in A's instruction (as ESync's or a deadline's)
                send.instruction.meta["local_steps"] = 1
            out = s.on_update(send.client, clients[send.client].on_instruction(send.instruction)) or out
        sends = out
        assert torch.allclose(s.params, factor * torch.tensor([1.0, 2.0]), rtol=1e-6)
    # FedAvg on the same work: x ← x + (¾·(−0.5) + ¼·(−0.75))x = 0.4375x, towards B's longer run
    assert not torch.allclose(s.params, 0.4375 ** 3 * torch.tensor([1.0, 2.0]), rtol=1e-3)


def test_a_client_with_no_step_adds_no_direction_but_counts_in_tau_eff():
    # d_A = [0.1] (Δ = −0.2 over 2 steps), B reports 0 steps; p = ½ each; τ_eff = 1; x = 1 − 1·0.05 = 0.95
    s = server([1.0], weighted=False)
    s.on_update(0, delta([-0.2], steps=2))
    s.on_update(1, delta([0.0], steps=0))
    assert torch.allclose(s.params, torch.tensor([0.95]))


@pytest.mark.parametrize("steps", [4, 10])
def test_equal_steps_are_fedavg(steps):
    """τ a power of two: bit for bit (dividing and multiplying by it is exact); otherwise to float rounding."""
    initial = ModelState(torch.tensor([1.0, -2.0, 0.5, 3.0]), torch.zeros(0))
    ours = FedNovaServer(FedNovaConfig(global_lr=0.5), initial, [0, 1, 2])
    fedavg = DeltaServer(LocalSGDConfig(global_lr=0.5, weighted=True), initial, [0, 1, 2])
    ours.start(), fedavg.start()
    gen = torch.Generator().manual_seed(1)
    for rnd in range(3):
        for client, size in ((1, 5), (0, 1), (2, 3)):
            d = torch.randn(4, generator=gen).tolist()
            ours.on_update(client, delta(d, version=rnd, steps=steps, data_size=size, buffers=[float(size)]))
            fedavg.on_update(client, delta(d, version=rnd, steps=steps, data_size=size, buffers=[float(size)]))
        if steps == 4:
            assert torch.equal(ours.params, fedavg.params)
        else:
            assert torch.allclose(ours.params, fedavg.params, rtol=1e-6, atol=1e-7)
        # BatchNorm statistics averaged with the p_i: (5·5 + 1·1 + 3·3)/9
        assert torch.equal(ours.buffers, fedavg.buffers) and torch.allclose(ours.buffers, torch.tensor([35 / 9]))


def test_equal_steps_end_to_end_are_fedavg(tiny_trainer):
    # the real client halves on a network: FedNova's client is local SGD's, and the rounds are FedAvg's
    config = FedNovaConfig(lr=0.1, local_steps=3, batch_size=4)
    local = LocalSGDConfig(lr=0.1, local_steps=3, batch_size=4, weighted=True)
    trainers = {0: tiny_trainer(seed=0, n=8), 1: tiny_trainer(seed=1, n=12)}
    initial = ModelState(trainers[0].get_params(), trainers[0].get_buffers())
    worlds = [(FedNovaServer(config, initial, [0, 1]),
               {r: FedNovaClient(config, copy.deepcopy(t)) for r, t in trainers.items()}),
              (DeltaServer(local, initial, [0, 1]),
               {r: LocalSGDClient(local, copy.deepcopy(t)) for r, t in trainers.items()})]
    for srv, clients in worlds:
        sends = srv.start()
        for _ in range(3):
            out = []
            for send in sends:
                out = srv.on_update(send.client, clients[send.client].on_instruction(send.instruction)) or out
            sends = out
    assert torch.allclose(worlds[0][0].params, worlds[1][0].params, rtol=1e-5, atol=1e-6)
    assert torch.allclose(worlds[0][0].buffers, worlds[1][0].buffers, rtol=1e-5, atol=1e-6)


def test_the_config_keys_are_validated():
    assert FedNovaConfig().weighted is True and FedNovaConfig().local_steps == 10
    for bad in ({"global_lr": 0}, {"local_steps": 0}, {"momentum": 0.9}, {"aggregation": "allreduce"}):
        with pytest.raises(ValidationError):
            FedNovaConfig(**bad)


def test_local_epochs_give_unequal_work_by_shard_size_and_fednova_normalises_it():
    # E = 1, batch 4: a client of 12 samples runs ⌈12/4⌉ = 3 steps, one of 4 samples ⌈4/4⌉ = 1 (FedNova's
    # paper's setting: E epochs on shards of unequal size). On ½‖θ‖² with η = 0.5 one step halves y:
    # Δ_A = (1/8 − 1)x = −0.875x (τ 3), Δ_B = −0.5x (τ 1); p = 12/16, 4/16.
    # FedNova: d_A = 0.875x/3, d_B = 0.5x; Σ p·d = 0.21875x + 0.125x = 0.34375x; τ_eff = 2.25 + 0.25 = 2.5:
    # x ← x − 2.5·0.34375x = 0.140625x.  FedAvg: x + (0.75·(−0.875) + 0.25·(−0.5))x = 0.21875x.
    for config, server_class, client_class, factor in (
            (FedNovaConfig(lr=0.5, local_epochs=1), FedNovaServer, FedNovaClient, 0.140625),
            (LocalSGDConfig(lr=0.5, local_epochs=1, weighted=True), DeltaServer, LocalSGDClient, 0.21875)):
        s = server_class(config, ModelState(torch.tensor([1.0, 2.0]), torch.zeros(0)), [0, 1])
        clients = {0: client_class(config, QuadraticTrainer(num_samples=12, batch_samples=4)),
                   1: client_class(config, QuadraticTrainer(num_samples=4, batch_samples=4))}
        out, steps = [], {}
        for send in s.start():
            update = clients[send.client].on_instruction(send.instruction)
            steps[send.client] = update.meta["steps"]
            out = s.on_update(send.client, update) or out
        assert steps == {0: 3, 1: 1}
        assert torch.allclose(s.params, factor * torch.tensor([1.0, 2.0]), rtol=1e-6), config.name
