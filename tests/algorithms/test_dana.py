"""DANA-Zero, DANA-Slim and DANA-DC: the known answers of docs/algorithms.md and hand-worked look-aheads.

f(w) = ½w² (g = w), η = 0.1, γ = 0.9, w0 = 1, one client. Nesterov by hand (Bengio form, what
DANA-Slim's master holds): Θ ← Θ − η·(γ·v + g) with v ← γ·v + g, g = Θ:
  g = 1:       v = 1,      Θ = 1 − 0.1·1.9        = 0.81
  g = 0.81:    v = 1.71,   Θ = 0.81 − 0.1·2.349   = 0.5751
  g = 0.5751:  v = 2.1141, Θ = 0.5751 − 0.1·2.47779 = 0.327321
  then 0.09388791 and −0.10458168. DANA-Zero's look-ahead θ̂ = θ − ηγ·v is the same sequence.
"""
import pytest
import torch

from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.dana import (
    DanaDCConfig, DanaDCServer, DanaSlimClient, DanaSlimConfig, DanaZeroConfig, DanaZeroServer,
)
from edgesync.algorithms.machinery.gradient_client import model_instruction
from fake_quadratic import QuadraticTrainer, random_script, replay, run_fifo, torch_sgd

NESTEROV = [0.81, 0.5751, 0.327321, 0.09388791, -0.10458168]


def test_dana_slim_with_one_client_gives_the_nesterov_sequence(model_state):
    # Prepare
    config = DanaSlimConfig(lr=0.1, momentum=0.9)
    server = AsyncServer(config, model_state([1.0]), [0])
    client = DanaSlimClient(config, QuadraticTrainer())
    # Execute
    sends = run_fifo(server, {0: client}, updates=6)
    # Assert: the Θ sent after each update, and torch.optim.SGD(nesterov=True)
    got = [s.instruction.tensors["params"].item() for s in sends[1:]]
    assert got == pytest.approx(NESTEROV, abs=1e-6)
    assert torch_sgd(nesterov=True) == pytest.approx(NESTEROV, abs=1e-6)
    assert client.trainer.gradient_at[1].item() == pytest.approx(0.81)  # g = ∇J(Θ) at the Θ it was sent


def test_dana_zero_look_ahead_with_one_client_gives_the_nesterov_sequence(model_state):
    # Prepare: θ̂ = θ − ηγ·v; first update: v = 1, θ = 0.9, θ̂ = 0.9 − 0.09 = 0.81
    config = DanaZeroConfig(lr=0.1, momentum=0.9)
    server = DanaZeroServer(config, model_state([1.0]), [0])
    client = GradientClient(config, QuadraticTrainer())
    # Execute
    sends = run_fifo(server, {0: client}, updates=6)
    # Assert: the look-ahead sent; the master's own θ is heavy ball (θ1 = 0.9)
    got = [s.instruction.tensors["params"].item() for s in sends[1:]]
    assert got == pytest.approx(NESTEROV, abs=1e-6)
    assert [t.item() for t in client.trainer.gradient_at[1:]] == pytest.approx(NESTEROV[:5], abs=1e-6)


def test_dana_zero_look_ahead_sums_every_clients_velocity(model_state, make_update):
    # Prepare: θ0 = 1, η = 0.1, γ = 0.5, two clients; velocities u = η·v
    server = DanaZeroServer(DanaZeroConfig(lr=0.1, momentum=0.5), model_state([1.0]), [0, 1])
    start = server.start()
    # Execute
    # 1. c0 g=1: u0 = 0.1, θ = 0.9, Σu = 0.1 → θ̂ = 0.9 − 0.5·0.1 = 0.85
    r1 = server.on_update(0, make_update([1.0], version=0))
    # 2. c1 g=2: u1 = 0.2, θ = 0.7, Σu = 0.3 → θ̂ = 0.7 − 0.15 = 0.55
    r2 = server.on_update(1, make_update([2.0], version=0))
    # 3. c0 g=1 (computed on 0.85): u0 = 0.05 + 0.1 = 0.15, θ = 0.55, Σu = 0.35 → θ̂ = 0.55 − 0.175 = 0.375
    r3 = server.on_update(0, make_update([1.0], version=1))
    # 4. c1 is lost: Σu = 0.15; c0 g=0: u0 = 0.075, θ = 0.475, Σu = 0.075 → θ̂ = 0.475 − 0.0375 = 0.4375
    server.on_client_lost(1)
    r4 = server.on_update(0, make_update([0.0], version=3))
    # Assert
    assert [s.instruction.tensors["params"].item() for s in start] == [1.0, 1.0]
    sent = [r[0].instruction.tensors["params"].item() for r in (r1, r2, r3, r4)]
    assert sent == pytest.approx([0.85, 0.55, 0.375, 0.4375])
    assert server.global_params().item() == pytest.approx(0.475)  # the model evaluated is θ, not θ̂
    # gap of update 3: computed on θ̂ = 0.85, applied to θ = 0.7 → |0.7 − 0.85| = 0.15; τ = 2 − 1 = 1
    row = server.update_log[2]
    assert row["lag"] == 1 and row["gap"] == pytest.approx(0.15)


def test_dana_dc_compensates_with_the_look_ahead_sent(model_state, make_update):
    # Prepare: θ0 = 1, η = 0.1, γ = 0.5, λ = 2
    server = DanaDCServer(DanaDCConfig(lr=0.1, momentum=0.5, dc_lambda=2.0), model_state([1.0]), [0, 1])
    server.start()
    # Execute
    # 1. c0 g=1, θ̂ sent = θ = 1: ĝ = 1; u0 = 0.1, θ = 0.9; c0 is sent θ̂ = 0.9 − 0.05 = 0.85
    server.on_update(0, make_update([1.0], version=0))
    # 2. c1 g=2, θ̂ sent = 1, θ = 0.9: ĝ = 2 + 2·4·(−0.1) = 1.2; u1 = 0.12, θ = 0.78
    server.on_update(1, make_update([2.0], version=0))
    # 3. c0 g=1, θ̂ sent = 0.85, θ = 0.78: ĝ = 1 + 2·1·(−0.07) = 0.86; u0 = 0.05 + 0.086 = 0.136, θ = 0.644
    server.on_update(0, make_update([1.0], version=1))
    # Assert
    assert server.global_params().item() == pytest.approx(0.644)


def test_dana_dc_with_lambda_0_equals_dana_zero_exactly(model_state, make_update):
    # Prepare: a random interleaving of 3 clients, 40 updates
    script = random_script(seed=11, clients=[0, 1, 2], steps=40)
    theta0 = torch.randn(5, generator=torch.Generator().manual_seed(2)).tolist()
    dc = DanaDCServer(DanaDCConfig(lr=0.05, momentum=0.9, dc_lambda=0.0), model_state(theta0), [0, 1, 2])
    zero = DanaZeroServer(DanaZeroConfig(lr=0.05, momentum=0.9), model_state(theta0), [0, 1, 2])
    # Execute
    a, b = replay(dc, script, make_update), replay(zero, script, make_update)
    # Assert: every look-ahead sent and every global model, bit for bit
    assert len(a) == len(b) == 80
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_dana_slim_client_keeps_its_own_velocity(model_state):
    # Prepare: two clients with their own v; the state survives a state_dict round trip
    config = DanaSlimConfig(lr=0.1, momentum=0.9)
    a = DanaSlimClient(config, QuadraticTrainer())
    a.on_instruction(model_instruction(torch.tensor([1.0]), torch.zeros(0), version=0))
    b = DanaSlimClient(config, QuadraticTrainer())
    b.load_state_dict(a.state_dict())
    # Execute: g = 0.5, v = 0.9·1 + 0.5 = 1.4, sent γv + g = 1.26 + 0.5 = 1.76
    update = b.on_instruction(model_instruction(torch.tensor([0.5]), torch.zeros(0), version=1))
    # Assert
    assert update.tensors["grad"].item() == pytest.approx(1.76)
    assert b.velocity.item() == pytest.approx(1.4) and a.velocity.item() == pytest.approx(1.0)
    assert update.meta["data_size"] == 8
