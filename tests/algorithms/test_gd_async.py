"""GD-async (gradient dropping with DGS's model-difference download): the residual, by hand."""
import pytest
import torch

from edgesync.algorithms.machinery.base import Instruction
from edgesync.algorithms.dgs import DGSClient, DGSConfig, DGSServer, samomentum_step
from edgesync.algorithms.gd_async import GDAsyncClient, GDAsyncConfig
from edgesync.compression.codec import decode
from fake_quadratic import QuadraticTrainer


def model(theta, lr):
    return Instruction(tensors={"params": torch.tensor(theta)}, meta={"version": 0, "lr": lr})


def stay(lr, version):
    """A reply that leaves the model where it is (G with no entries)."""
    return Instruction(tensors={"G.idx": torch.zeros(0, dtype=torch.int32), "G.val": torch.zeros(0)},
                       meta={"version": version, "lr": lr})


def test_residual_by_hand_and_sent_plus_residual_is_everything_accumulated():
    # Prepare: η = 0.5, g = θ = [1, 0.6, 0, 0] every time (the model stays), top-1 of 4
    # η·g = [0.5, 0.3, 0, 0]
    # 1. r = [0.5, 0.3]  → send (0: 0.5), keep [0, 0.3]
    # 2. r = [0.5, 0.6]  → send (1: 0.6), keep [0.5, 0]
    # 3. r = [1.0, 0.3]  → send (0: 1.0), keep [0, 0.3]
    client = GDAsyncClient(GDAsyncConfig(lr=0.5, rate=0.25), QuadraticTrainer())
    # Execute
    updates = [client.on_instruction(model([1.0, 0.6, 0.0, 0.0], lr=0.5))]
    updates += [client.on_instruction(stay(0.5, v)) for v in (1, 2)]
    # Assert
    sends = [decode(u.tensors, "delta", 4) for u in updates]
    assert [s.tolist() for s in sends] == [pytest.approx(x) for x in ([0.5, 0, 0, 0], [0, 0.6, 0, 0], [1.0, 0, 0, 0])]
    assert [u.tensors["delta.idx"].tolist() for u in updates] == [[0], [1], [0]]  # 8 bytes < 16 dense
    r = client.memory["r"]
    assert r.tolist() == pytest.approx([0.0, 0.3, 0.0, 0.0])
    assert (sum(sends) + r).tolist() == pytest.approx((3 * 0.5 * torch.tensor([1.0, 0.6, 0, 0])).tolist())
    assert "u" not in client.memory and set(client.state_dict()) == {"theta", "buffers", "r"}


def test_sent_plus_residual_equals_the_accumulated_steps_for_random_gradients():
    gen = torch.Generator().manual_seed(4)
    r, total, shipped = None, torch.zeros(50), torch.zeros(50)
    for step in range(30):
        eta_g = 0.1 * torch.randn(50, generator=gen)
        x, idx, r = samomentum_step(r, eta_g, 0.0, rate=0.1)
        assert idx.numel() == 5 and torch.all(r[idx] == 0)
        shipped[idx] += x[idx]
        total += eta_g
        assert torch.allclose(shipped + r, total, atol=1e-5)


def test_dgs_with_momentum_0_is_gd_async_exactly(model_state):
    # Prepare: the same master, the same 2 clients' interleaving, 12 updates
    theta0 = torch.randn(16, generator=torch.Generator().manual_seed(8)).tolist()
    runs = {}
    for name, config, client_cls in (("gd", GDAsyncConfig(lr=0.1, rate=0.125), GDAsyncClient),
                                     ("dgs0", DGSConfig(lr=0.1, rate=0.125, momentum=0.0), DGSClient)):
        server = DGSServer(config, model_state(theta0), [0, 1])
        clients = {k: client_cls(config, QuadraticTrainer()) for k in (0, 1)}
        pending = {s.client: s for s in server.start()}
        sent = []
        for rank in [0, 1, 1, 0, 0, 0, 1, 0, 1, 1, 0, 1]:
            update = clients[rank].on_instruction(pending.pop(rank).instruction)
            sent.append(update.tensors)
            (reply,) = server.on_update(rank, update)
            pending[rank] = reply
        runs[name] = (sent, server.global_params())
    # Assert: bit for bit
    for a, b in zip(runs["gd"][0], runs["dgs0"][0]):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(runs["gd"][1], runs["dgs0"][1])


@pytest.mark.parametrize("scope,sent,kept", [
    # θ = g = [4, 3, 2 | 1] in tensors of 3 and 1, η = 1, R = 0.25: per layer (0: 4) and (3: 1)
    ("layer", [4.0, 0.0, 0.0, 1.0], [0.0, 3.0, 2.0, 0.0]),
    ("global", [4.0, 0.0, 0.0, 0.0], [0.0, 3.0, 2.0, 1.0]),
])
def test_gradient_dropping_per_layer(scope, sent, kept):
    client = GDAsyncClient(GDAsyncConfig(lr=1.0, rate=0.25, topk_scope=scope), QuadraticTrainer(layers=(3, 1)))
    update = client.on_instruction(model([4.0, 3.0, 2.0, 1.0], lr=1.0))
    assert decode(update.tensors, "delta", 4).tolist() == sent
    assert client.memory["r"].tolist() == kept
