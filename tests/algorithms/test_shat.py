"""SHAT, SHAT-root and ENSEMBLE: α's branches, c_i's counting, and the two limits α = 1 and α = 0."""
import logging
import math

import pytest
import torch

from edgesync.algorithms.asgd import ASGDConfig, ASGDServer
from edgesync.algorithms.machinery.base import Instruction, ModelState
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.algorithms.shat import (
    EnsembleConfig, EnsembleServer, SHATClient, SHATConfig, SHATRootConfig, SHATRootServer, SHATServer, shat_alpha,
)
from fake_quadratic import QuadraticTrainer, run_fifo, torch_sgd


@pytest.mark.parametrize("c,n,scale,expected", [
    (3, 1, 1.0, 1.0),                         # n = 1 ⇒ α = 1 (checked before c)
    (0, 1, 1.0, 1.0),                         # one client never sees others: still α = 1
    (0, 4, math.log(4), 0.0),                 # c = 0 ⇒ α = 0
    (1, 2, math.log(2), 0.0),                 # 1 − 2/0.693 = −1.885 → clipped to 0
    (3, 4, math.log(4), 1 - (4 / 3) / math.log(4)),  # 1 − 1.333/1.386 = 0.0382
    (3, 4, 2.0, 1 / 3),                       # log₂ 4 = 2: 1 − 1.333/2
    (16, 8, math.log(8), 1 - 0.5 / math.log(8)),     # a fast client, c = 2n: 0.7596
])
def test_alpha_branches(c, n, scale, expected):
    assert shat_alpha(c, n, scale) == pytest.approx(expected)


def test_each_variant_sets_alpha_its_own_way(model_state):
    # Prepare: n = 4 clients, c = 3 (homogeneous)
    state = model_state([0.0])
    shat_e = SHATServer(SHATConfig(), state, [0, 1, 2, 3])
    shat_2 = SHATServer(SHATConfig(log_base=2), state, [0, 1, 2, 3])  # YAML's `2` is an int
    root = SHATRootServer(SHATRootConfig(), state, [0, 1, 2, 3])
    ensemble = EnsembleServer(EnsembleConfig(), state, [0, 1, 2, 3])
    # Assert: 1 − (4/3)/ln 4 = 0.0382; 1 − (4/3)/log₂ 4 = 1/3; 1 − (4/3)/√4 = 1/3; 0
    assert shat_e.alpha(3, 4) == pytest.approx(0.0382033)
    assert shat_2.alpha(3, 4) == pytest.approx(1 / 3)
    assert root.alpha(3, 4) == pytest.approx(1 / 3)
    assert ensemble.alpha(3, 4) == 0.0


def test_c_i_counts_updates_by_others_since_the_clients_previous_update(model_state):
    # Prepare: 3 clients, deliveries in the order 0, 1, 0, 2, 0, 1, 2
    config = SHATConfig(lr=0.1)
    server = SHATServer(config, model_state([1.0, 1.0]), [0, 1, 2])
    clients = {c: SHATClient(config, QuadraticTrainer()) for c in range(3)}
    order = [0, 1, 0, 2, 0, 1, 2]
    # Execute
    sends = run_fifo(server, clients, updates=7, order=order)
    # Assert, update by update (#k = the k-th update applied):
    # #0 c0: none since the start → 0    #1 c1: #0 → 1          #2 c0: #1 → 1      #3 c2: #0–#2 → 3
    # #4 c0: #3 → 1                      #5 c1: #2–#4 → 3       #6 c2: #4, #5 → 2
    assert [row["c_i"] for row in server.update_log] == [0, 1, 1, 3, 1, 3, 2]
    # α with n = 3, ln 3 = 1.0986: c = 3 → 1 − 1/1.0986 = 0.0898; c ≤ 2 → negative → 0
    assert [row["alpha"] for row in server.update_log] == pytest.approx([0, 0, 0, 0.089761, 0, 0.089761, 0],
                                                                        abs=1e-6)
    # delivered: start→0, start→1, reply→0 (after #0), start→2, reply→0 (#2), reply→1 (#1), reply→2 (#3)
    reply = sends[6].instruction
    assert sends[6].client == 2 and reply.meta["c_i"] == 3 and reply.meta["alpha"] == pytest.approx(0.089761, abs=1e-6)
    assert "params" in reply.tensors
    assert sends[2].instruction.tensors == {} and sends[2].instruction.meta["c_i"] == 0  # α = 0: no model


def test_client_takes_its_local_step_then_mixes_with_the_reply():
    # Prepare: f = ½‖θ‖², η = 0.1
    client = SHATClient(SHATConfig(lr=0.1), QuadraticTrainer())
    # Execute
    first = client.on_instruction(Instruction({"params": torch.tensor([1.0, 2.0])}, {"alpha": 1.0, "lr": 0.1}))
    # θ_i = [1, 2]; g = [1, 2]; local step: θ_i = [0.9, 1.8]
    client.on_instruction(Instruction({"params": torch.tensor([0.5, 0.5])}, {"alpha": 0.5, "lr": 0.1}))
    # mix: 0.5·[0.9, 1.8] + 0.5·[0.5, 0.5] = [0.7, 1.15]; g there; local step: [0.63, 1.035]
    # Assert
    assert torch.equal(first.tensors["grad"], torch.tensor([1.0, 2.0]))
    assert torch.allclose(client.trainer.gradient_at[1], torch.tensor([0.7, 1.15]))
    assert torch.allclose(client.theta, torch.tensor([0.63, 1.035]))
    assert first.meta["steps"] == 1 and first.meta["samples"] == 4 and first.meta["data_size"] == 8


def test_ensemble_never_reads_the_global_model():
    # Prepare: two identical clients; their second reply's θ̃ differs (one is all NaN)
    clients = [SHATClient(EnsembleConfig(lr=0.1), QuadraticTrainer()) for _ in range(2)]
    for c in clients:
        c.on_instruction(Instruction({"params": torch.tensor([1.0, 2.0])}, {"alpha": 1.0, "lr": 0.1}))
    # Execute
    clients[0].on_instruction(Instruction({"params": torch.tensor([5.0, 5.0])}, {"alpha": 0.0, "lr": 0.1}))
    clients[1].on_instruction(Instruction({"params": torch.full((2,), float("nan"))}, {"alpha": 0.0, "lr": 0.1}))
    # Assert: θ_i = [0.9, 1.8] → [0.81, 1.62], whatever θ̃ said
    assert torch.equal(clients[0].theta, clients[1].theta)
    assert torch.allclose(clients[0].theta, torch.tensor([0.81, 1.62]))


def test_ensemble_sends_the_model_only_once(model_state):
    # Prepare
    config = EnsembleConfig(lr=0.1)
    server = EnsembleServer(config, model_state([1.0, 2.0]), [0, 1])
    clients = {c: SHATClient(config, QuadraticTrainer()) for c in (0, 1)}
    # Execute
    sends = run_fifo(server, clients, updates=6)
    # Assert: the start carries θ̃₀; every reply only c_i and α = 0; the master still applies every g
    assert all("params" in s.instruction.tensors for s in sends[:2])
    assert all(s.instruction.tensors == {} and s.instruction.meta["alpha"] == 0.0 for s in sends[2:])
    assert server.updates == 6 and not torch.equal(server.global_params(), torch.tensor([1.0, 2.0]))


class AlwaysOne(SHATServer):
    def alpha(self, c: int, n: int) -> float:
        return 1.0


def test_alpha_1_reproduces_asgd_exactly(tiny_trainer):
    # Prepare: the same two real clients (BatchNorm model) under ASGD and under SHAT with α ≡ 1
    runs = {}
    for name in ("asgd", "shat"):
        trainers = {rank: tiny_trainer(seed=rank) for rank in (0, 1)}
        initial = ModelState(trainers[0].get_params(), trainers[0].get_buffers())
        if name == "asgd":
            config = ASGDConfig(lr=0.1, batch_size=4)
            server, cls = ASGDServer(config, initial, [0, 1]), GradientClient
        else:
            config = SHATConfig(lr=0.1, batch_size=4)
            server, cls = AlwaysOne(config, initial, [0, 1]), SHATClient
        clients = {rank: cls(config, t) for rank, t in trainers.items()}
        # Execute
        sends = run_fifo(server, clients, updates=10)
        runs[name] = (sends, server)
    # Assert: the same models sent, the same global model and statistics, bit for bit
    (a_sends, a), (b_sends, b) = runs["asgd"], runs["shat"]
    for x, y in zip(a_sends, b_sends):
        assert x.client == y.client
        assert torch.equal(x.instruction.tensors["params"], y.instruction.tensors["params"])
    assert torch.equal(a.global_params(), b.global_params())
    assert torch.equal(a.global_buffers(), b.global_buffers())


class Recording(SHATServer):
    """Records, for every update, the model the master believes it was computed on."""

    def apply(self, client, update, lr):
        self.computed.setdefault(client, []).append(self.computed_on(client))
        return super().apply(client, update, lr)


def test_the_master_mirrors_each_clients_model_for_the_gap(model_state):
    # Prepare: 4 clients, log base 2: with c = 3 the replies have α = 1/3
    config = SHATConfig(lr=0.1, log_base="2")
    server = Recording(config, model_state([1.0, -2.0, 0.5]), [0, 1, 2, 3])
    server.computed = {}
    clients = {c: SHATClient(config, QuadraticTrainer()) for c in range(4)}
    # Execute
    run_fifo(server, clients, updates=12)
    # Assert: the mirror is the θ_i each gradient was really computed at
    assert any(0 < row["alpha"] < 1 for row in server.update_log)
    for c, client in clients.items():
        assert len(server.computed[c]) == len(client.trainer.gradient_at) == 3
        for mirror, actual in zip(server.computed[c], client.trainer.gradient_at):
            assert torch.allclose(mirror, actual, atol=1e-7)
    assert all(row["gap"] > 0 for row in server.update_log[4:])


def test_two_homogeneous_clients_degenerate_to_ensemble_and_say_so(model_state, caplog):
    # Prepare
    config = SHATConfig(lr=0.1)
    with caplog.at_level(logging.WARNING, logger="edgesync.algorithms.shat"):
        server = SHATServer(config, model_state([1.0]), [0, 1])
    clients = {c: SHATClient(config, QuadraticTrainer()) for c in (0, 1)}
    # Execute
    run_fifo(server, clients, updates=8)
    # Assert: c_i = 1 after the first round: α = 1 − 2/ln 2 < 0 → 0 on every update
    assert "ENSEMBLE" in caplog.text
    assert [row["c_i"] for row in server.update_log] == [0] + [1] * 7
    assert all(row["alpha"] == 0.0 for row in server.update_log)


# -- the client's momentum (shat.txt §4.1.3: momentum SGD, 0.9; off by default) -----------------------

def test_momentum_is_off_by_default_and_every_variant_takes_it():
    assert SHATConfig().momentum == SHATRootConfig().momentum == EnsembleConfig().momentum == 0.0
    assert SHATConfig(momentum=0.9).momentum == SHATRootConfig(momentum=0.9).momentum == 0.9
    assert EnsembleConfig(momentum=0.5).momentum == 0.5


def test_one_client_with_momentum_is_heavy_ball_sgd(model_state):
    # Prepare: n = 1 ⇒ α = 1, so θ_i = θ̃ after every reply; f = ½w², w₀ = 1, η = 0.1, m = 0.9
    config = SHATConfig(lr=0.1, momentum=0.9)
    server = SHATServer(config, model_state([1.0]), [0])
    client = SHATClient(config, QuadraticTrainer())
    # Execute
    run_fifo(server, {0: client}, updates=5)
    # Assert: v = 1, 1.8, 2.34, 2.592, 2.5596; w ← w − 0.1·v: heavy ball's sequence (docs/algorithms.md)
    seen = [row for row in client.trainer.gradient_at[1:]] + [server.global_params()]
    assert [round(w.item(), 6) for w in seen] == pytest.approx([0.9, 0.72, 0.486, 0.2268, -0.02916], abs=1e-6)
    assert [round(x, 6) for x in torch_sgd(nesterov=False)] == pytest.approx([w.item() for w in seen], abs=1e-6)


def test_client_momentum_steps_locally_sends_its_velocity_and_survives_a_restart():
    # Prepare: f = ½‖θ‖², η = 0.1, m = 0.5
    config = SHATConfig(lr=0.1, momentum=0.5)
    client = SHATClient(config, QuadraticTrainer())
    # Execute
    # 1. θ_i = [1, 2]; g = [1, 2]; v = g = [1, 2]; θ_i = [0.9, 1.8]; sends v
    first = client.on_instruction(Instruction({"params": torch.tensor([1.0, 2.0])}, {"alpha": 1.0, "lr": 0.1}))
    # 2. mix with [0.5, 0.5] by 0.5: [0.7, 1.15]; g there; v = 0.5·[1, 2] + g = [1.2, 2.15]; θ_i = [0.58, 0.935]
    second = client.on_instruction(Instruction({"params": torch.tensor([0.5, 0.5])}, {"alpha": 0.5, "lr": 0.1}))
    # 3. a new process (Flower) from the saved state; α = 0: g = [0.58, 0.935];
    #    v = 0.5·[1.2, 2.15] + g = [1.18, 2.01]; θ_i = [0.462, 0.734]
    fresh = SHATClient(config, QuadraticTrainer())
    fresh.load_state_dict(client.state_dict())
    third = fresh.on_instruction(Instruction({}, {"alpha": 0.0, "lr": 0.1}))
    # Assert
    assert first.tensors["grad"].tolist() == pytest.approx([1.0, 2.0])
    assert second.tensors["grad"].tolist() == pytest.approx([1.2, 2.15])
    assert client.theta.tolist() == pytest.approx([0.58, 0.935])
    assert third.tensors["grad"].tolist() == pytest.approx([1.18, 2.01])
    assert fresh.theta.tolist() == pytest.approx([0.462, 0.734])


def test_the_mirror_follows_a_client_with_momentum(model_state):
    # Prepare: as the mirror test above, with m = 0.9: the master steps with the velocity it is sent
    config = SHATConfig(lr=0.1, log_base="2", momentum=0.9)
    server = Recording(config, model_state([1.0, -2.0, 0.5]), [0, 1, 2, 3])
    server.computed = {}
    clients = {c: SHATClient(config, QuadraticTrainer()) for c in range(4)}
    # Execute
    run_fifo(server, clients, updates=12)
    # Assert
    assert any(0 < row["alpha"] < 1 for row in server.update_log)
    for c, client in clients.items():
        for mirror, actual in zip(server.computed[c], client.trainer.gradient_at):
            assert torch.allclose(mirror, actual, atol=1e-6)
