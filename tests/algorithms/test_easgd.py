"""Asynchronous EASGD: the elastic exchange worked out by hand on f(θ) = ½θ² (g = θ).

θ̃0 = 1, η = 0.1, τ = 2 local steps, 2 clients ⇒ α = 0.9/2 = 0.45. Deliveries 0, 1, 0, 1:
  c0: θ_0 = 1 → 0.9 → 0.81, sends 0.81.  master: δ = 0.45·(0.81 − 1) = −0.0855,  θ̃ = 0.9145
  c1: θ_1 = 1 → 0.81, sends 0.81.        master: δ = 0.45·(0.81 − 0.9145) = −0.047025, θ̃ = 0.867475
  c0 gets δ = −0.0855: θ_0 = 0.81 + 0.0855 = 0.8955, its next steps start there.
"""
import pytest

from edgesync.algorithms.easgd import EASGDClient, EASGDConfig, EASGDServer
from fake_quadratic import QuadraticTrainer, run_fifo


def _run(model_state, updates, **config):
    config = EASGDConfig(lr=0.1, local_steps=2, **config)
    server = EASGDServer(config, model_state([1.0]), [0, 1])
    clients = {c: EASGDClient(config, QuadraticTrainer()) for c in (0, 1)}
    sends = run_fifo(server, clients, updates=updates)
    return server, clients, sends


def test_default_moving_rate_is_0_9_over_n(model_state):
    assert EASGDServer(EASGDConfig(), model_state([1.0]), [0, 1, 2]).alpha == pytest.approx(0.3)
    assert EASGDServer(EASGDConfig(moving_rate=0.2), model_state([1.0]), [0, 1, 2]).alpha == 0.2


def test_elastic_exchange_by_hand(model_state):
    # Execute: two exchanges; then a third delivery, client 0's pull
    after_two, _, _ = _run(model_state, updates=2)
    server, clients, sends = _run(model_state, updates=3)
    # Assert: the center after two exchanges, and the pull client 0 got
    assert after_two.global_params().item() == pytest.approx(0.867475)
    assert sends[2].client == 0 and sends[2].instruction.tensors["delta"].item() == pytest.approx(-0.0855)
    assert clients[0].trainer.gradient_at[2].item() == pytest.approx(0.8955)  # its third step starts there
    # distance before the move: |0.81 − 1| = 0.19, then |0.81 − 0.9145| = 0.1045
    assert [row["distance"] for row in server.update_log[:2]] == pytest.approx([0.19, 0.1045])


def test_the_first_instruction_carries_the_model_and_later_ones_only_delta(model_state):
    server, clients, sends = _run(model_state, updates=4)
    assert all(set(s.instruction.tensors) == {"params"} for s in sends[:2])
    assert all(set(s.instruction.tensors) == {"delta"} for s in sends[2:])
    assert all(s.instruction.meta["local_steps"] == 2 for s in sends)


def test_update_counts_tau_steps(model_state):
    # Prepare
    config = EASGDConfig(lr=0.1, local_steps=3)
    client = EASGDClient(config, QuadraticTrainer(num_samples=8, batch_samples=4))
    server = EASGDServer(config, model_state([1.0]), [0])
    # Execute
    update = client.on_instruction(server.start()[0].instruction)
    # Assert: 1 → 0.9 → 0.81 → 0.729
    assert update.tensors["params"].item() == pytest.approx(0.729)
    assert update.meta["steps"] == 3 and update.meta["samples"] == 12 and update.meta["data_size"] == 8
    assert update.meta["loss"] == pytest.approx((0.5 + 0.405 + 0.32805) / 3)


def test_the_force_is_symmetric(model_state):
    # The exchange moves θ_i by −δ and θ̃ by +δ: θ_0 + θ̃ = 0.81 + 1 = 1.81 before, 0.8955 + 0.9145 after
    server, clients, sends = _run(model_state, updates=3)
    assert clients[0].trainer.gradient_at[2].item() + 0.9145 == pytest.approx(0.81 + 1.0)
    assert sends[2].instruction.tensors["delta"].item() == pytest.approx(0.9145 - 1.0)  # θ̃ moved by +δ
