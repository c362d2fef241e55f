"""FedAsync: staleness-weighted model mixing, worked out by hand (docs/algorithms.md's known answers).

The server half is fed fake updates (a model x_new, the version it was pulled at) or the real client
half on f(θ) = ½θ² (g = θ, fake_quadratic), so every number below is computed here, not by the code
under test.

Two clients, x₀ = 1, η = 0.5, H = 1 (a client's x_new is half the model it pulled), α = 0.5,
polynomial s(d) = 1/(d + 1) (a = 1); deliveries 0, 1, 0, 1:
  c0 pulled 1 (v0):      x_new = 0.5,     d = 0, α_t = 0.5:   x = 0.5·1 + 0.5·0.5           = 0.75
  c1 pulled 1 (v0):      x_new = 0.5,     d = 1, α_t = 0.25:  x = 0.75·0.75 + 0.25·0.5      = 0.6875
  c0 pulled 0.75 (v1):   x_new = 0.375,   d = 1, α_t = 0.25:  x = 0.75·0.6875 + 0.25·0.375  = 0.609375
  c1 pulled 0.6875 (v2): x_new = 0.34375, d = 1, α_t = 0.25:  x = 0.75·0.609375 + 0.25·0.34375 = 0.54296875
(all dyadic: exact in float32).
"""
from collections import deque

import pytest
import torch
from pydantic import ValidationError

from edgesync.algorithms.machinery.base import Update
from edgesync.algorithms.fedasync import FedAsyncConfig, FedAsyncServer, LocalStepsClient, staleness_weight
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused
from fake_quadratic import QuadraticTrainer


def _mixing(params, version: int, buffers=None) -> Update:
    """A client's update: its model x_new, pulled at `version`."""
    tensors = {"params": torch.tensor(params)}
    if buffers is not None:
        tensors["buffers"] = torch.tensor(buffers)
    return Update(tensors=tensors, meta={"version": version, "steps": 1, "samples": 4, "loss": 0.0})


def test_polynomial_staleness_of_a_lag_of_3_with_a_half_is_a_half():
    assert staleness_weight("polynomial", 3, 0.5, 4) == 0.5  # (3 + 1)^(−1/2)
    assert staleness_weight("polynomial", 0, 0.5, 4) == 1.0
    assert staleness_weight("constant", 7, 0.5, 4) == 1.0


def test_hinge_is_one_up_to_b_then_decays():
    # a = 0.5, b = 2: s(d) = 1 for d ≤ 2, then 1/(0.5·(d − 2) + 1)
    assert [staleness_weight("hinge", d, 0.5, 2) for d in (0, 2, 4, 6)] == pytest.approx([1.0, 1.0, 0.5, 1 / 3])


def test_a_fresh_update_with_alpha_one_replaces_the_model(model_state):
    # Prepare: d = 0 (the update was computed on the current version), α = 1
    server = FedAsyncServer(FedAsyncConfig(alpha=1.0), model_state([1.0, 2.0], buffers=[0.5]), [0])
    server.start()
    update = _mixing([0.3, -0.7], version=0, buffers=[0.25])
    # Execute
    server.on_update(0, update)
    # Assert: x = x_new bit for bit, and its statistics with it
    assert torch.equal(server.global_params(), update.tensors["params"])
    assert torch.equal(server.global_buffers(), update.tensors["buffers"])
    assert server.updates == 1 and server.update_log[0]["alpha"] == 1.0 and server.update_log[0]["lag"] == 0


def test_alpha_zero_never_moves_the_model(model_state):
    server = FedAsyncServer(FedAsyncConfig(alpha=0.0), model_state([1.0, 2.0], buffers=[0.5]), [0, 1])
    server.start()
    for k, (client, version) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1), (0, 4)]):
        sends = server.on_update(client, _mixing([10.0 * k, -3.0], version=version, buffers=[9.0]))
        # the sender still gets the (unchanged) model at once, under the new version
        assert [s.client for s in sends] == [client] and sends[0].instruction.meta["version"] == k + 1
    assert torch.equal(server.global_params(), torch.tensor([1.0, 2.0]))
    assert torch.equal(server.global_buffers(), torch.tensor([0.5]))
    assert server.updates == 5 and all(row["alpha"] == 0.0 for row in server.update_log)


def test_a_stale_update_is_mixed_with_alpha_times_its_staleness(model_state):
    # Prepare: α = 0.8, polynomial a = 0.5; three updates bring the version to 3
    server = FedAsyncServer(FedAsyncConfig(alpha=0.8), model_state([1.0], buffers=[1.0]), [0, 1])
    server.start()
    for _ in range(3):
        server.on_update(0, _mixing([1.0], version=server.updates, buffers=[1.0]))
    # Execute: client 1 still computed on version 0: d = 3, s = 0.5, α_t = 0.4
    server.on_update(1, _mixing([3.0], version=0, buffers=[2.0]))
    # Assert: x = 0.6·1 + 0.4·3 = 1.8; the statistics mixed with the same α_t: 0.6·1 + 0.4·2 = 1.4
    row = server.update_log[-1]
    assert row["lag"] == 3 and row["alpha"] == pytest.approx(0.4)
    assert server.global_params().item() == pytest.approx(1.8)
    assert server.global_buffers().item() == pytest.approx(1.4)


def test_hinge_mixing_through_the_server(model_state):
    # α = 1, hinge a = 1, b = 1: d = 1 ⇒ α_t = 1; d = 3 ⇒ α_t = 1/(1·2 + 1) = 1/3
    config = FedAsyncConfig(alpha=1.0, staleness="hinge", a=1.0, b=1)
    server = FedAsyncServer(config, model_state([0.0]), [0, 1])
    server.start()
    server.on_update(0, _mixing([1.0], version=0))
    server.on_update(0, _mixing([2.0], version=0))  # d = 1 ≤ b: replaces x
    assert server.global_params().item() == 2.0
    server.on_update(0, _mixing([2.0], version=2))
    server.on_update(1, _mixing([5.0], version=0))  # d = 3: x = (2/3)·2 + (1/3)·5 = 3
    assert [r["alpha"] for r in server.update_log] == pytest.approx([1.0, 1.0, 1.0, 1 / 3])
    assert server.global_params().item() == pytest.approx(3.0)


def test_two_clients_mix_stale_models_by_hand(model_state):
    # Prepare: the module docstring's run, through the real client halves
    config = FedAsyncConfig(lr=0.5, alpha=0.5, a=1.0, local_steps=1)
    server = FedAsyncServer(config, model_state([1.0]), [0, 1])
    clients = {c: LocalStepsClient(config, QuadraticTrainer()) for c in (0, 1)}
    pending, sends, xs = deque(server.start()), [], []
    # Execute: first in, first out, noting the model after every update
    for _ in range(4):
        send = pending.popleft()
        sends.append(send)
        pending.extend(server.on_update(send.client, clients[send.client].on_instruction(send.instruction)))
        xs.append(server.global_params().item())
    # Assert: the model after each update, the lags and α_t, what each client was sent
    assert xs == [0.75, 0.6875, 0.609375, 0.54296875]
    assert [r["lag"] for r in server.update_log] == [0, 1, 1, 1]
    assert [r["alpha"] for r in server.update_log] == [0.5, 0.25, 0.25, 0.25]
    assert [(s.client, s.instruction.meta["version"], s.instruction.tensors["params"].item()) for s in sends] == [
        (0, 0, 1.0), (1, 0, 1.0), (0, 1, 0.75), (1, 2, 0.6875)]
    # the gap: |x − x_pulled| when applied (0, |0.75 − 1|, |0.6875 − 0.75|, |0.609375 − 0.6875|), normalised
    # by the RMS of the client's one raw gradient, g = x_pulled
    assert [r["gap"] for r in server.update_log] == [0.0, 0.25, 0.0625, 0.078125]
    assert [r["gap_normalized"] for r in server.update_log] == pytest.approx(  # logged to 6 decimals
        [0.0, 0.25, 0.0625 / 0.75, 0.078125 / 0.6875], abs=1e-6)


def test_the_client_runs_h_local_steps_with_momentum_and_sends_its_model(model_state):
    # Prepare: θ = 1, η = 0.1, H = 3, momentum 0.5 on ½θ²:
    #   g = 1,    v = 1,                θ = 0.9
    #   g = 0.9,  v = 0.5 + 0.9 = 1.4,  θ = 0.9 − 0.14 = 0.76
    #   g = 0.76, v = 0.7 + 0.76 = 1.46, θ = 0.76 − 0.146 = 0.614
    config = FedAsyncConfig(lr=0.1, local_steps=3, momentum=0.5)
    server = FedAsyncServer(config, model_state([1.0]), [0])
    client = LocalStepsClient(config, QuadraticTrainer(num_samples=8, batch_samples=4))
    instruction = server.start()[0].instruction
    # Execute: twice from the same model (momentum restarts every pull)
    first, second = client.on_instruction(instruction), client.on_instruction(instruction)
    # Assert
    for update in (first, second):
        assert set(update.tensors) == {"params"}
        assert update.tensors["params"].item() == pytest.approx(0.614)
        assert update.meta["steps"] == 3 and update.meta["samples"] == 12 and update.meta["version"] == 0
        assert update.meta["grad_rms"] == pytest.approx((1 + 0.9 + 0.76) / 3)  # mean RMS of the raw gradients
    assert instruction.tensors["params"].item() == 1.0  # the model it was sent is not changed


def test_a_lost_clients_late_update_is_ignored_and_a_returning_one_gets_the_model_at_once(model_state):
    server = FedAsyncServer(FedAsyncConfig(alpha=0.5), model_state([1.0]), [0, 1])
    server.start()
    server.on_client_lost(1)
    assert server.on_update(1, _mixing([5.0], version=0)) == [] and server.updates == 0
    server.on_update(0, _mixing([3.0], version=0))  # x = 2
    (send,) = server.on_client_joined(1)
    assert send.client == 1 and send.instruction.meta["version"] == 1
    assert send.instruction.tensors["params"].item() == 2.0


def test_the_runtime_accepts_a_model_and_refuses_anything_else(model_state):
    # Prepare: the check the coordinator runs on every UPDATE, built from the half's declared format
    initial = model_state([0.0, 0.0], buffers=[0.0])
    check = UpdateCheck.for_server(FedAsyncServer(FedAsyncConfig(), initial, [0]), initial)
    # Execute / Assert
    check.check({"params": torch.ones(2), "buffers": torch.ones(1)})
    with pytest.raises(UpdateRefused, match="'delta' is not part of a fedasync update"):
        check.check({"delta": torch.ones(2)})


@pytest.mark.parametrize("settings,key", [({"alpha": 1.5}, "alpha"), ({"staleness": "exponential"}, "staleness"),
                                          ({"a": -1.0}, "a"), ({"local_steps": 0}, "local_steps"),
                                          ({"weighted": True}, "weighted")])
def test_bad_settings_are_refused_naming_the_key(settings, key):
    with pytest.raises(ValidationError) as info:
        FedAsyncConfig(**settings)
    assert key in str(info.value)
