"""SCAFFOLD (docs/algorithms.md, `scaffold`): both options by hand over two rounds, the reduction to FedAvg,
the packed update, option I's full pass, and c = (1/N)·Σ c_i kept through rejoins, late updates and resumes.

The hand-worked cases run on per-client quadratics f_i(θ) = ½‖θ − b_i‖² (gradient θ − b_i, the same on every
mini-batch, so ∇f_i(x) = x − b_i too), with b_A = [2, 4] and b_B = [−1, −2]: every number below is worked
out for the first coordinate and is twice that in the second. η_l = 0.5, η_g = 1, client A runs 2 local
steps, client B 1, and the run has N = 4 clients of which only A (rank 0) and B (rank 1) take part.
"""
from __future__ import annotations

import copy
import io

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from edgesync.algorithms.local_sgd import DeltaServer, LocalSGDClient, LocalSGDConfig
from edgesync.algorithms.machinery.base import Instruction, ModelState, Population, Update
from edgesync.algorithms.scaffold import (ScaffoldClient, ScaffoldConfig, ScaffoldServer, full_gradient, pack,
                                          unpack)
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused
from edgesync.runtime.sharding.slices import split
from edgesync.transport.protocol import Message

B_A, B_B = [2.0, 4.0], [-1.0, -2.0]


class ShiftedQuadratic:
    """f(θ) = ½‖θ − b‖²: gradient θ − b on every mini-batch; the sampling API option I's pass uses."""

    def __init__(self, b, num_samples: int = 8, batch_size: int = 4):
        self.b = torch.tensor(b)
        self.num_samples, self.batch_size, self.subset = num_samples, batch_size, None
        self.theta: torch.Tensor | None = None
        self.batches: list[int] = []  # the batch size of every gradient computed
        self.state = {"rng": {"any": 1}, "order": np.arange(3), "cursor": 1}  # where training's sampling stands

    @property
    def batch_samples(self) -> int:
        return min(self.batch_size, self.num_samples)

    def set_params(self, theta):
        self.theta = theta.clone()

    def get_params(self):
        return self.theta.clone()

    def set_buffers(self, buffers):
        return None

    def get_buffers(self):
        return torch.zeros(0)

    def sampler_state(self) -> dict:
        return copy.deepcopy(self.state)

    def load_sampler_state(self, state: dict) -> None:
        self.state = copy.deepcopy(state)

    def gradient(self, weight_decay: float = 0.0, interrupt=None):
        self.batches.append(self.batch_samples)
        return self.theta - self.b, 0.0


def wire(kind: str, tensors: dict, meta: dict) -> Message:
    """Through the wire format: the receiver gets read-only views of the bytes, as live."""
    return Message.from_frames([bytes(f) for f in Message(kind, meta, tensors).to_frames()])


def deliver(server, clients: dict, sends, lost=()) -> list:
    """Each send to its client and the update back, over the wire; returns the server's last sends."""
    out = []
    for send in sends:
        if send.client in lost:
            continue
        ins = wire("TRAIN", send.instruction.tensors, send.instruction.meta)
        update = clients[send.client].on_instruction(Instruction(ins.tensors, ins.meta))
        up = wire("UPDATE", update.tensors, update.meta)
        out = server.on_update(send.client, Update(up.tensors, up.meta)) or out
    return out


def setup(option: int = 2):
    """A (rank 0, 2 steps) and B (rank 1, 1 step) of a 4-client run, x0 = 0."""
    config = ScaffoldConfig(lr=0.5, local_steps=2, control_option=option)
    server = ScaffoldServer(config, ModelState(torch.zeros(2), torch.zeros(0)), [0, 1])
    server.population = Population(seed=0, data_sizes={0: 8, 1: 8, 2: 8, 3: 8})  # N = 4, two of them never online
    clients = {0: ScaffoldClient(config, ShiftedQuadratic(B_A)),
               1: ScaffoldClient(config.model_copy(update={"local_steps": 1}), ShiftedQuadratic(B_B))}
    return server, clients


def vec(first: float) -> torch.Tensor:
    return torch.tensor([first, 2 * first])


def test_two_rounds_of_option_2_by_hand():
    server, clients = setup(option=2)
    sends = server.start()
    assert all(torch.equal(s.instruction.tensors["control"], torch.zeros(2)) for s in sends)
    # Round 1, c = c_A = c_B = 0. A: y = 0 → 1 → 1.5 (steps of −0.5·(y − 2)), Δy = 1.5, c_A = (0 − 1.5)/(2·0.5)
    # = −1.5. B: y = 0 → −0.5, Δy = −0.5, c_B = 0.5/(1·0.5) = 1. x = 0 + ½(1.5 − 0.5) = 0.5; c = ¼(−1.5 + 1) = −0.125
    sends = deliver(server, clients, sends)
    assert torch.equal(server.params, vec(0.5)) and torch.equal(server.control, vec(-0.125))
    assert torch.equal(clients[0].control, vec(-1.5)) and torch.equal(clients[1].control, vec(1.0))
    assert [s.client for s in sends] == [0, 1]
    assert all(torch.equal(s.instruction.tensors["control"], vec(-0.125)) for s in sends)
    # Round 2. A: c − c_A = 1.375, steps y − 0.5·(y − 2 + 1.375): 0.5 → 0.5625 → 0.59375, Δy = 0.09375,
    # c_A = −1.5 + 0.125 + (0.5 − 0.59375)/1 = −1.46875 (Δc = 0.03125).
    # B: c − c_B = −1.125, y − 0.5·(y + 1 − 1.125): 0.5 → 0.3125, Δy = −0.1875, c_B = 1 + 0.125 + 0.1875/0.5 = 1.5
    # (Δc = 0.5). x = 0.5 + ½(0.09375 − 0.1875) = 0.453125; c = −0.125 + ¼(0.03125 + 0.5) = 0.0078125
    deliver(server, clients, sends)
    assert torch.equal(server.params, vec(0.453125)) and torch.equal(server.control, vec(0.0078125))
    assert torch.equal(clients[0].control, vec(-1.46875)) and torch.equal(clients[1].control, vec(1.5))
    # c is the mean of the four c_i (the two clients never online hold 0): (−1.46875 + 1.5 + 0 + 0)/4
    assert torch.equal(server.control, (clients[0].control + clients[1].control) / 4)
    assert server.updates == 2 and server.control_epoch == 0
    assert not [r for r in server.drain_update_log() if "control_reset" in r]


def test_two_rounds_of_option_1_by_hand():
    server, clients = setup(option=1)
    sends = server.start()
    # Round 1: the same Δy (c = c_i = 0); c_i = ∇f_i(0) = −b_i: c_A = −2, c_B = 1; x = 0.5, c = ¼(−2 + 1) = −0.25
    sends = deliver(server, clients, sends)
    assert torch.equal(server.params, vec(0.5)) and torch.equal(server.control, vec(-0.25))
    assert torch.equal(clients[0].control, vec(-2.0)) and torch.equal(clients[1].control, vec(1.0))
    # Round 2. A: c − c_A = 1.75, y − 0.5·(y − 0.25): 0.5 → 0.375 → 0.3125, Δy = −0.1875, c_A = ∇f_A(0.5) = −1.5.
    # B: c − c_B = −1.25, y − 0.5·(y − 0.25): 0.5 → 0.375, Δy = −0.125, c_B = 1.5.
    # x = 0.5 + ½(−0.1875 − 0.125) = 0.34375; c = −0.25 + ¼(0.5 + 0.5) = 0
    deliver(server, clients, sends)
    assert torch.equal(server.params, vec(0.34375)) and torch.equal(server.control, vec(0.0))
    assert torch.equal(clients[0].control, vec(-1.5)) and torch.equal(clients[1].control, vec(1.5))
    # The full pass: 8 samples in batches of 4 at x, then the local steps; training's sampling put back
    trainer = clients[0].trainer
    assert trainer.batches == [4, 4, 4, 4] * 2 and trainer.batch_size == 4
    assert trainer.state["cursor"] == 1 and list(trainer.state["order"]) == [0, 1, 2]


def test_option_1_counts_its_pass_in_the_update():
    config = ScaffoldConfig(lr=0.5, local_steps=3, control_option=1, batch_size=3)
    client = ScaffoldClient(config, ShiftedQuadratic(B_A, num_samples=8, batch_size=3))
    update = client.on_instruction(Instruction({"params": torch.zeros(2), "control": torch.zeros(2)},
                                               {"version": 0}))
    # batches of 3, 3 and 2; the three local steps' samples plus the shard's eight
    assert client.trainer.batches == [3, 3, 2, 3, 3, 3]
    assert update.meta["full_pass_steps"] == 3 and update.meta["steps"] == 3
    assert update.meta["samples"] == 3 * 3 + 8


def test_the_full_pass_is_the_whole_shards_gradient_and_leaves_training_batches_alone(tiny_trainer):
    trainer = tiny_trainer(n=8, batch_size=3, batchnorm=False)  # batches of 3, 3, 2
    twin = copy.deepcopy(trainer)
    x = trainer.get_params()
    g, batches = full_gradient(trainer, x, None, weight_decay=0.01)
    # the reference: one autograd pass over all 8 samples, mean loss, plus the L2 term
    model = copy.deepcopy(trainer.model)
    torch.nn.functional.cross_entropy(model(trainer.x), trainer.y).backward()
    expected = torch.cat([p.grad.reshape(-1) for p in model.parameters()]) + 0.01 * x
    assert batches == 3 and torch.allclose(g, expected, atol=1e-6)
    assert trainer.stats.steps == 3  # the pass is computation, counted and timed as steps
    # the next training gradient is the one it would have been without the pass
    trainer.set_params(x)
    twin.set_params(x)
    assert torch.equal(trainer.gradient()[0], twin.gradient()[0])


def test_with_no_control_the_client_is_local_sgd_and_the_server_fedavg_bit_for_bit(tiny_trainer):
    # Client: c = c_i = 0 ⇒ the same Δy as local SGD's Δ, operation for operation.
    scaffold_cfg = ScaffoldConfig(lr=0.1, local_steps=4, batch_size=4)
    local_cfg = LocalSGDConfig(lr=0.1, local_steps=4, batch_size=4)
    trainer = tiny_trainer(seed=3)
    theta = trainer.get_params()
    ins = {"params": theta, "buffers": trainer.get_buffers()}
    ours = ScaffoldClient(scaffold_cfg, copy.deepcopy(trainer)).on_instruction(
        Instruction({**ins, "control": torch.zeros_like(theta)}, {"version": 0}))
    theirs = LocalSGDClient(local_cfg, copy.deepcopy(trainer)).on_instruction(Instruction(dict(ins), {"version": 0}))
    delta_y, delta_c = unpack(ours.tensors["delta"], theta.numel())
    assert torch.equal(delta_y, theirs.tensors["delta"])
    assert torch.equal(ours.tensors["buffers"], theirs.tensors["buffers"])
    # Server: Δc = 0 every round ⇒ c stays 0 and x is FedAvg's with ε = η_g, bit for bit (three clients, 3 rounds).
    initial = ModelState(torch.tensor([1.0, -2.0, 0.5]), torch.zeros(0))
    ours_s = ScaffoldServer(ScaffoldConfig(global_lr=0.7), initial, [0, 1, 2])
    theirs_s = DeltaServer(LocalSGDConfig(global_lr=0.7), initial, [0, 1, 2])
    ours_s.start(), theirs_s.start()
    gen = torch.Generator().manual_seed(0)
    for rnd in range(3):
        for client in (2, 0, 1):
            dy = torch.randn(3, generator=gen)
            meta = {"version": rnd, "steps": 4, "samples": 16, "data_size": client + 1}
            sends = ours_s.on_update(client, Update({"delta": pack(dy, torch.zeros(3))},
                                                    {**meta, "control_round": rnd - 1 if rnd else None}))
            theirs_s.on_update(client, Update({"delta": dy}, meta))
        assert torch.equal(ours_s.params, theirs_s.params)
        assert all(torch.equal(s.instruction.tensors["control"], torch.zeros(3)) for s in sends)
    assert ours_s.updates == 3 and ours_s.control_epoch == 0


def test_the_packed_update_survives_the_wire_the_update_check_and_sharding():
    dy = torch.tensor([1.5, -0.0, 1e-40, 3.4e38, -7.25])  # a signed zero, a subnormal, a huge value
    dc = torch.tensor([-2.0, 0.0, float.fromhex("0x1.fffffep-1"), 1e-7, 5.0])
    packed = pack(dy, dc)
    assert packed.dtype == torch.int64 and packed.shape == (5,)
    got = wire("UPDATE", {"delta": packed}, {}).tensors["delta"]
    back_y, back_c = unpack(got, 5)
    assert torch.equal(back_y.view(torch.int32), dy.view(torch.int32))  # bit for bit, −0.0 included
    assert torch.equal(back_c.view(torch.int32), dc.view(torch.int32))
    # the coordinator's check takes it as the server half declares it, and refuses a plain float32 delta
    initial = ModelState(torch.zeros(5), torch.zeros(0))
    check = UpdateCheck.for_server(ScaffoldServer(ScaffoldConfig(), initial, [0]), initial)
    check.check({"delta": got})
    with pytest.raises(UpdateRefused, match="int64"):
        check.check({"delta": dy})
    with pytest.raises(ValueError, match="int64"):
        unpack(dy, 5)
    # a sharded coordinator cuts it per parameter, as any model-sized vector: each slice unpacks to its own
    parts = split({"delta": got}, ((0, 2), (2, 5)))
    for part, (lo, hi) in zip(parts, ((0, 2), (2, 5))):
        y, c = unpack(part["delta"], hi - lo)
        assert torch.equal(y, dy[lo:hi]) and torch.equal(c, dc[lo:hi])


def test_the_bytes_are_twice_fedavgs_each_way():
    theta = torch.zeros(100_000)
    server = ScaffoldServer(ScaffoldConfig(), ModelState(theta, torch.zeros(0)), [0])
    (send,) = server.start()
    fedavg = DeltaServer(LocalSGDConfig(), ModelState(theta, torch.zeros(0)), [0])
    (plain,) = fedavg.start()
    down = Message("TRAIN", send.instruction.meta, send.instruction.tensors).wire_size()
    down_fedavg = Message("TRAIN", plain.instruction.meta, plain.instruction.tensors).wire_size()
    up = Message("UPDATE", {}, {"delta": pack(theta, theta)}).wire_size()
    up_fedavg = Message("UPDATE", {}, {"delta": theta}).wire_size()
    assert down == pytest.approx(2 * down_fedavg, rel=1e-3) and up == pytest.approx(2 * up_fedavg, rel=1e-3)


# -- c = (1/N)·Σ c_i through clients lost, back, late, and a resume -----------------------------------------

def test_a_client_back_with_a_fresh_half_restarts_every_control_variate_by_hand():
    server, clients = setup(option=2)
    sends = deliver(server, clients, server.start())  # round 1 as by hand: x = 0.5, c = −0.125, c_B = 1
    # B's device goes offline before it computes round 2, and comes back during it
    server.on_client_lost(1)
    assert server.on_client_joined(1) == []  # A's round goes on; B is drawn again from the next one
    # Round 2, A alone (as by hand, Δy_A = 0.09375, Δc_A = 0.03125): x = 0.5 + 0.09375/1 = 0.59375,
    # c = −0.125 + ¼·0.03125 = −0.1171875 (N is still 4)
    sends = deliver(server, clients, sends, lost={1})
    assert torch.equal(server.params, vec(0.59375)) and torch.equal(server.control, vec(-0.1171875))
    # back from offline, B has a new client half (the simulator's fresh half, a live re-SETUP): c_B = 0
    clients[1] = ScaffoldClient(clients[1].config, clients[1].trainer)
    # Round 3. A: c − c_A = −0.1171875 + 1.46875 = 1.3515625, y − 0.5·(y − 0.6484375): 0.59375 → 0.62109375
    # → 0.634765625, Δy = 0.041015625. B: c − 0, y − 0.5·(y + 0.8828125): 0.59375 → −0.14453125,
    # Δy = −0.73828125. x = 0.59375 + ½(0.041015625 − 0.73828125) = 0.2451171875. B said its c_i started
    # afresh while c still holds ¼ of its old one: c and every c_i restart from 0 at the close.
    sends = deliver(server, clients, sends)
    assert torch.equal(server.params, vec(0.2451171875))
    assert torch.equal(server.control, torch.zeros(2)) and server.control_epoch == 1
    (row,) = [r for r in server.drain_update_log() if "control_reset" in r]
    assert row["control_reset"] == [1] and row["reason"] == ["its c_i started afresh"] and row["round"] == 2
    assert all(s.instruction.meta["control_epoch"] == 1 for s in sends)
    # Round 4 is a first round from x = 0.2451171875 (A drops its c_i on the new epoch). A: 0.2451171875 →
    # 1.12255859375 → 1.561279296875, Δy = 1.316162109375 = −c_A. B: → −0.37744140625, Δy = −0.62255859375,
    # c_B = 1.2451171875. x = 0.2451171875 + ½·0.693603515625 = 0.5919189453125, c = ¼(−0.071044921875)
    deliver(server, clients, sends)
    assert torch.equal(server.params, vec(0.5919189453125))
    assert torch.equal(clients[0].control, vec(-1.316162109375)) and torch.equal(clients[1].control, vec(1.2451171875))
    assert torch.equal(server.control, vec(-0.01776123046875))
    assert torch.equal(server.control, (clients[0].control + clients[1].control) / 4)  # the mean of the c_i again


def test_a_client_cut_off_and_back_with_its_half_keeps_its_control_variate():
    # live: the same process, cut off before it computed, is back with its half (c_i and all): nothing restarts
    server, clients = setup(option=2)
    sends = deliver(server, clients, server.start())
    server.on_client_lost(1)
    sends = deliver(server, clients, sends, lost={1})  # round 2 without B; round 3 is drawn without it
    server.on_client_joined(1)
    sends = deliver(server, clients, sends)  # round 3, A alone
    deliver(server, clients, sends)  # round 4: B's c_i is still the one of round 1, which c holds
    assert server.control_epoch == 0 and clients[1].control_round == 3
    assert not [r for r in server.drain_update_log() if "control_reset" in r]
    assert torch.allclose(server.control, (clients[0].control + clients[1].control) / 4, atol=1e-7)


def test_an_update_the_server_never_applied_restarts_the_control_variates():
    # B's round-2 update arrives after the round closed without it: its c_i moved, c did not
    server, clients = setup(option=2)
    sends = deliver(server, clients, server.start())
    server.on_client_lost(1)
    late = clients[1].on_instruction(next(s.instruction for s in sends if s.client == 1))
    sends = deliver(server, clients, sends, lost={1})
    assert server.on_update(1, late) == []  # ignored: not part of this round
    server.on_client_joined(1)
    sends = deliver(server, clients, sends)  # round 3, A alone
    assert server.control_epoch == 0
    deliver(server, clients, sends)  # round 4: B's c_i is round 2's, c holds round 1's
    assert server.control_epoch == 1 and torch.equal(server.control, torch.zeros(2))
    assert [r["reason"] for r in server.drain_update_log() if "control_reset" in r] == [
        ["its c_i moved by an update that was not applied"]]


def test_a_non_finite_update_is_left_out_and_restarts_the_control_variates():
    server, clients = setup(option=2)
    sends = server.start()
    server.on_update(1, Update({"delta": pack(torch.tensor([float("nan"), 0.0]), torch.zeros(2))},
                               {"version": 0, "steps": 1, "samples": 4, "control_round": None}))
    ins = next(s.instruction for s in sends if s.client == 0)
    sends = server.on_update(0, clients[0].on_instruction(ins))
    assert torch.equal(server.params, vec(1.5))  # A's Δy alone: the mean over the finite updates
    assert torch.equal(server.control, torch.zeros(2)) and server.control_epoch == 1 and len(sends) == 2
    assert [r["control_reset"] for r in server.drain_update_log() if "control_reset" in r] == [[1]]
    # a client whose numbers blew up says so in the metadata: a shard holding only finite slices of it hears it too
    blown = ScaffoldClient(ScaffoldConfig(lr=0.5, local_steps=1), ShiftedQuadratic([float("inf"), 0.0]))
    update = blown.on_instruction(Instruction({"params": torch.zeros(2), "control": torch.zeros(2)}, {"version": 0}))
    assert update.meta["nonfinite"] is True
    shard, _ = setup(option=2)
    shard.start()
    shard.on_update(1, Update({"delta": pack(torch.ones(2), torch.ones(2))},
                              {**update.meta, "version": 0, "control_round": None}))
    assert shard.weight_sum == 0 and shard.out_of_step == {1: "non-finite update"}


def test_a_resumed_server_goes_on_with_c_and_clients_that_kept_their_halves_see_no_restart():
    server, clients = setup(option=2)
    sends = deliver(server, clients, server.start())
    buf = io.BytesIO()
    torch.save(server.state_dict(), buf)  # the coordinator's checkpoint
    buf.seek(0)
    restored, _ = setup(option=2)
    restored.load_state_dict(torch.load(buf, weights_only=False))
    assert torch.equal(restored.control, vec(-0.125)) and restored.control_rounds == {0: 0, 1: 0}
    # clients whose state came through (a Flower ClientApp restores its half's state_dict every message)
    kept = {rank: ScaffoldClient(c.config, copy.deepcopy(c.trainer)) for rank, c in clients.items()}
    for rank, c in kept.items():
        c.load_state_dict(copy.deepcopy(clients[rank].state_dict()))
    deliver(server, clients, sends)
    deliver(restored, kept, restored.start())  # what the resumed coordinator's start sends
    assert torch.equal(restored.params, server.params) and torch.equal(restored.control, server.control)
    assert torch.equal(restored.params, vec(0.453125)) and restored.control_epoch == 0


def test_a_resumed_server_with_clients_set_up_afresh_restarts_from_zero():
    # live: after a coordinator restart every client is set up again, its c_i gone; c comes from the checkpoint
    server, clients = setup(option=2)
    deliver(server, clients, server.start())
    restored, fresh = setup(option=2)
    restored.load_state_dict(copy.deepcopy(server.state_dict()))
    sends = deliver(restored, fresh, restored.start())  # the resumed coordinator's start
    # round 2 from x = 0.5 with c = −0.125 and c_i = 0 (the resumed clients): Δy_A from steps
    # y − 0.5·(y − 2 − 0.125): 0.5 → 1.3125 → 1.71875, Δy_A = 1.21875; B: y − 0.5·(y + 1 − 0.125): 0.5 → −0.1875,
    # Δy_B = −0.6875. x = 0.5 + ½(1.21875 − 0.6875) = 0.765625; c restarts from 0, and with it every c_i
    assert torch.equal(restored.params, vec(0.765625))
    assert torch.equal(restored.control, torch.zeros(2)) and restored.control_epoch == 1
    assert all(s.instruction.meta["control_epoch"] == 1 for s in sends)
    deliver(restored, fresh, sends)
    assert restored.control_epoch == 1
    assert torch.equal(restored.control, (fresh[0].control + fresh[1].control) / 4)


def test_the_config_keys_are_validated():
    assert ScaffoldConfig().control_option == 2 and ScaffoldConfig().global_lr == 1.0
    for bad in ({"control_option": 3}, {"global_lr": 0}, {"local_steps": 0}, {"momentum": 0.9},
                {"aggregation": "allreduce"}):
        with pytest.raises(ValidationError):
            ScaffoldConfig(**bad)
