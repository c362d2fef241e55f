"""NAG-ASGD, Multi-ASGD and DC-ASGD masters: every expected number below is worked out by hand.

Velocities are kept as u = η·v (u ← γ·u + η·g; θ ← θ − u): at a constant η that is v ← γ·v + g;
θ ← θ − η·v, the update rule of dana.txt Alg. 6–8.
"""
import pytest
import torch

from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.momentum_asgd import (
    DCASGDConfig, DCASGDServer, MultiASGDConfig, MultiASGDServer, NAGASGDConfig, NAGASGDServer, delay_compensate,
)
from fake_quadratic import QuadraticTrainer, random_script, replay, run_fifo, torch_sgd

HEAVY_BALL = [0.9, 0.72, 0.486, 0.2268, -0.02916]


def test_nag_asgd_with_one_client_is_heavy_ball(model_state):
    # Prepare: f(w) = ½w², g = w; η = 0.1, γ = 0.9, w0 = 1
    # u1 = 0.1·1 = 0.1 → w = 0.9;  u2 = 0.9·0.1 + 0.1·0.9 = 0.18 → 0.72;  u3 = 0.162 + 0.072 = 0.234 → 0.486
    # u4 = 0.2106 + 0.0486 = 0.2592 → 0.2268;  u5 = 0.23328 + 0.02268 = 0.25596 → −0.02916
    config = NAGASGDConfig(lr=0.1, momentum=0.9)
    server = NAGASGDServer(config, model_state([1.0]), [0])
    client = GradientClient(config, QuadraticTrainer())
    # Execute
    sends = run_fifo(server, {0: client}, updates=6)
    # Assert: the model sent after update k is w_k
    got = [s.instruction.tensors["params"].item() for s in sends[1:]]
    assert got == pytest.approx(HEAVY_BALL, abs=1e-6)
    assert got == pytest.approx(torch_sgd(nesterov=False), abs=1e-6)


def test_multi_asgd_keeps_one_velocity_per_client_and_nag_one_for_all(model_state, make_update):
    # Prepare: θ0 = [1, 2], η = 0.1, γ = 0.5; c0 g=[1,0], c1 g=[0,1], c0 g=[1,0]
    # Multi: u0 = [0.1, 0] → θ = [0.9, 2];  u1 = [0, 0.1] → [0.9, 1.9];
    #        u0 = 0.5·[0.1, 0] + [0.1, 0] = [0.15, 0] → [0.75, 1.9]
    # NAG:   u = [0.1, 0] → [0.9, 2];  u = [0.05, 0] + [0, 0.1] → [0.85, 1.9];
    #        u = [0.025, 0.05] + [0.1, 0] → [0.725, 1.85]
    script = [(0, [1.0, 0.0], 0), (1, [0.0, 1.0], 0), (0, [1.0, 0.0], 1)]
    results = {}
    for name, cls, cfg in (("multi", MultiASGDServer, MultiASGDConfig), ("nag", NAGASGDServer, NAGASGDConfig)):
        server = cls(cfg(lr=0.1, momentum=0.5), model_state([1.0, 2.0]), [0, 1])
        server.start()
        # Execute
        for client, grad, version in script:
            server.on_update(client, make_update(grad, version=version))
        results[name] = server
    # Assert
    assert torch.allclose(results["multi"].global_params(), torch.tensor([0.75, 1.9]))
    assert torch.allclose(results["nag"].global_params(), torch.tensor([0.725, 1.85]))
    v = results["multi"].velocities
    assert torch.allclose(v.get(0, 0.1), torch.tensor([0.15, 0.0]))
    assert torch.allclose(v.get(1, 0.1), torch.tensor([0.0, 0.1]))


def test_dc_asgd_compensates_with_the_model_last_sent_to_the_client(model_state, make_update):
    # Prepare: θ0 = [1, 2], η = 0.1, γ = 0.5, λ = 2; both clients start on θ0
    server = DCASGDServer(DCASGDConfig(lr=0.1, momentum=0.5, dc_lambda=2.0), model_state([1.0, 2.0]), [0, 1])
    server.start()
    # Execute
    # 1. c0, g = [1, 1], θ − θ_sent = 0: ĝ = g; u0 = [0.1, 0.1] → θ = [0.9, 1.9]
    server.on_update(0, make_update([1.0, 1.0], version=0))
    # 2. c1, g = [2, −1], θ − θ_sent = [−0.1, −0.1]:
    #    ĝ = [2 + 2·4·(−0.1), −1 + 2·1·(−0.1)] = [1.2, −1.2]
    #    u1 = [0.12, −0.12] → θ = [0.78, 2.02]
    server.on_update(1, make_update([2.0, -1.0], version=0))
    # Assert
    assert torch.allclose(server.global_params(), torch.tensor([0.78, 2.02]))
    assert torch.allclose(delay_compensate(torch.tensor([2.0]), 2.0, torch.tensor([0.9]) - torch.tensor([1.0])),
                          torch.tensor([1.2]))


def test_dc_asgd_with_lambda_0_equals_multi_asgd_exactly(model_state, make_update):
    # Prepare: a random interleaving of 3 clients, 40 updates
    script = random_script(seed=7, clients=[0, 1, 2], steps=40)
    theta0 = torch.randn(5, generator=torch.Generator().manual_seed(1)).tolist()
    dc = DCASGDServer(DCASGDConfig(lr=0.05, momentum=0.9, dc_lambda=0.0), model_state(theta0), [0, 1, 2])
    multi = MultiASGDServer(MultiASGDConfig(lr=0.05, momentum=0.9), model_state(theta0), [0, 1, 2])
    # Execute
    a, b = replay(dc, script, make_update), replay(multi, script, make_update)
    # Assert: every model sent and every global model, bit for bit
    assert len(a) == len(b) == 80
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_dc_asgd_with_lambda_2_differs_from_multi_asgd(model_state, make_update):
    script = random_script(seed=7, clients=[0, 1, 2], steps=10)
    dc = DCASGDServer(DCASGDConfig(lr=0.05, dc_lambda=2.0), model_state([0.0] * 5), [0, 1, 2])
    multi = MultiASGDServer(MultiASGDConfig(lr=0.05), model_state([0.0] * 5), [0, 1, 2])
    assert not torch.equal(replay(dc, script, make_update)[-1], replay(multi, script, make_update)[-1])


def test_a_lost_client_takes_its_velocity_with_it(model_state, make_update):
    # Prepare
    server = MultiASGDServer(MultiASGDConfig(lr=0.1), model_state([1.0]), [0, 1])
    server.start()
    server.on_update(1, make_update([1.0], version=0))
    # Execute
    sends = server.on_client_lost(1)
    late = server.on_update(1, make_update([1.0], version=0))
    # Assert
    assert sends == [] and late == []
    assert server.velocities.get(1, 0.1) is None
    assert server.updates == 1
