"""FedDyn by hand: two rounds of two clients, h kept the mean of the clients' g_k, and the restart when a g_k is
lost; WidthNet's width. Only `edgesync.api` and this package are imported, as any extension's tests would.

The hand-worked rounds run on per-client quadratics L_k(θ) = ½‖θ − b_k‖² (gradient θ − b_k on every
mini-batch), b_A = [2, 4] and b_B = [−1, −2]: every number below is worked out for the first coordinate and is
twice that in the second. α = 0.5, η = 0.5, θ⁰ = 0; client A (rank 0) runs 2 local steps, B (rank 1) 1; the
run has m = 4 clients of which only A and B take part, so h divides by 4 and the model's mean by 2.
A local step is θ ← θ − η·(θ − b_k − g_k + α·(θ − θ^{t−1})).
"""
from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from edgesync.api import Instruction, ModelState, Population, Update
from edgesync_feddyn import FedDynClient, FedDynConfig, FedDynServer, WidthNet

B_A, B_B = [2.0, 4.0], [-1.0, -2.0]


class ShiftedQuadratic:
    """L(θ) = ½‖θ − b‖²: what LocalRound asks of a trainer, gradient θ − b on every mini-batch."""

    num_samples, batch_size, batch_samples = 8, 4, 4

    def __init__(self, b):
        self.b = torch.tensor(b)
        self.theta: torch.Tensor | None = None

    def set_params(self, theta):
        self.theta = theta.clone()

    def gradient(self, weight_decay: float = 0.0, interrupt=None):
        return self.theta - self.b, 0.0


def vec(first: float) -> torch.Tensor:
    return torch.tensor([first, 2 * first])


def setup():
    config = FedDynConfig(lr=0.5, alpha=0.5, local_steps=2)
    server = FedDynServer(config, ModelState(torch.zeros(2), torch.zeros(0)), [0, 1])
    server.population = Population(seed=0, data_sizes={0: 8, 1: 8, 2: 8, 3: 8})  # m = 4, two never online
    clients = {0: FedDynClient(config, ShiftedQuadratic(B_A)),
               1: FedDynClient(config.model_copy(update={"local_steps": 1}), ShiftedQuadratic(B_B))}
    return server, clients


def deliver(server, clients: dict, sends) -> list:
    """Each send to its client and the update back; returns the server's last sends."""
    out = []
    for send in sends:
        update = clients[send.client].on_instruction(Instruction(dict(send.instruction.tensors),
                                                                 dict(send.instruction.meta)))
        out = server.on_update(send.client, Update(update.tensors, update.meta)) or out
    return out


def test_two_rounds_by_hand():
    server, clients = setup()
    # Round 1, θ⁰ = 0, h = g_A = g_B = 0. A: θ = 0 → 0 − 0.5·(0 − 2) = 1 → 1 − 0.5·(1 − 2 + 0.5·1) = 1.25,
    # Δ_A = 1.25, g_A = 0 − 0.5·1.25 = −0.625. B: θ = 0 → 0 − 0.5·(0 + 1) = −0.5, Δ_B = −0.5, g_B = 0.25.
    # h = 0 − 0.5·¼·(1.25 − 0.5) = −0.09375; θ¹ = ½(1.25 − 0.5) − h/0.5 = 0.375 + 0.1875 = 0.5625
    sends = deliver(server, clients, server.start())
    assert torch.equal(server.h, vec(-0.09375)) and torch.equal(server.params, vec(0.5625))
    assert torch.equal(clients[0].grad_state, vec(-0.625)) and torch.equal(clients[1].grad_state, vec(0.25))
    assert [s.client for s in sends] == [0, 1] and all(torch.equal(s.instruction.tensors["params"], vec(0.5625))
                                                       for s in sends)
    # B's half is set up again from its state_dict (as Flower carries it between messages): nothing is lost
    carried = FedDynClient(clients[1].config, clients[1].trainer)
    carried.load_state_dict(clients[1].state_dict())
    clients[1] = carried
    # Round 2, θ¹ = 0.5625. A: 0.5625 − 0.5·(0.5625 − 2 + 0.625) = 0.96875, then
    # 0.96875 − 0.5·(0.96875 − 2 + 0.625 + 0.5·0.40625) = 1.0703125; Δ_A = 0.5078125, g_A = −0.625 − 0.25390625
    # = −0.87890625. B: 0.5625 − 0.5·(0.5625 + 1 − 0.25) = −0.09375, Δ_B = −0.65625, g_B = 0.25 + 0.328125 = 0.578125.
    # h = −0.09375 − 0.5·¼·(0.5078125 − 0.65625) = −0.0751953125;
    # θ² = ½(1.0703125 − 0.09375) − h/0.5 = 0.48828125 + 0.150390625 = 0.638671875
    deliver(server, clients, sends)
    assert torch.equal(server.h, vec(-0.0751953125)) and torch.equal(server.params, vec(0.638671875))
    assert torch.equal(clients[0].grad_state, vec(-0.87890625)) and torch.equal(clients[1].grad_state, vec(0.578125))
    # h is the mean of all four g_k (the two clients never online hold 0): (−0.87890625 + 0.578125 + 0 + 0)/4
    assert torch.equal(server.h, (clients[0].grad_state + clients[1].grad_state) / 4)
    assert server.updates == 2 and server.dyn_epoch == 0
    assert not [row for row in server.drain_update_log() if "dyn_reset" in row]


def test_a_lost_g_k_restarts_h_and_every_client_from_zero():
    server, clients = setup()
    sends = deliver(server, clients, server.start())
    clients[1] = FedDynClient(clients[1].config, clients[1].trainer)  # B back with a fresh half: g_B lost
    # Round 2: A as in the hand-worked run (θ_A = 1.0703125); B from g_B = 0: 0.5625 − 0.5·(0.5625 + 1) =
    # −0.21875. h no longer equals the mean of the g_k: θ² is the plain mean ½(1.0703125 − 0.21875) = 0.42578125,
    # h = 0, and the next instructions carry dyn_epoch 1
    sends = deliver(server, clients, sends)
    assert torch.equal(server.params, vec(0.42578125)) and torch.equal(server.h, vec(0.0))
    (reset,) = [row for row in server.drain_update_log() if "dyn_reset" in row]
    assert reset["dyn_reset"] == [1] and reset["reason"] == ["its g_k started afresh"]
    assert server.dyn_epoch == 1 and all(s.instruction.meta["dyn_epoch"] == 1 for s in sends)
    # Round 3: both start again from g_k = 0 (the paper's first round, from θ² = 0.42578125).
    # A: → 1.212890625 → 1.40966796875, Δ_A = 0.98388671875; B: → −0.287109375, Δ_B = −0.712890625.
    # h = −0.5·¼·0.27099609375 = −0.03387451171875; θ³ = 0.561279296875 + 0.0677490234375 = 0.6290283203125
    deliver(server, clients, sends)
    assert torch.equal(server.h, vec(-0.03387451171875)) and torch.equal(server.params, vec(0.6290283203125))
    assert torch.equal(server.h, (clients[0].grad_state + clients[1].grad_state) / 4)
    assert not [row for row in server.drain_update_log() if "dyn_reset" in row]


def test_an_update_the_server_never_applied_restarts_them_too():
    server, clients = setup()
    sends = deliver(server, clients, server.start())
    late = next(s for s in sends if s.client == 1)
    clients[1].on_instruction(late.instruction)  # B moves g_B, but its update never reaches the server
    deliver(server, clients, sends)
    (reset,) = [row for row in server.drain_update_log() if "dyn_reset" in row]
    assert reset["dyn_reset"] == [1] and reset["reason"] == ["its g_k moved by an update that was not applied"]


@pytest.mark.parametrize("keys, says", [({"alpha": 0}, "alpha"), ({"local_steps": 0}, "local_steps"),
                                        ({"aggregation": "allreduce"}, "aggregation")])
def test_bad_keys_are_refused(keys, says):
    with pytest.raises(ValidationError, match=says):
        FedDynConfig(**keys)


def test_widthnet_scales_every_layer_with_its_width():
    for width in (2, 8):
        net = WidthNet(10, 1, width=width)
        convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
        assert [c.out_channels for c in convs] == [width, 2 * width]
        assert net.classifier[-1].in_features == 2 * width * 16
        assert net(torch.zeros(3, 1, 28, 28)).shape == (3, 10)
    assert WidthNet(5, 3, width=2)(torch.zeros(1, 3, 32, 32)).shape == (1, 5)  # any side ≥ 4, any channels
    with pytest.raises(ValueError, match="width must be a whole number ≥ 1"):
        WidthNet(10, 1, width=0)
