"""DGC-async (Lin et al.'s DGC with DGS's model-difference download): momentum correction,
momentum-factor masking and sparsity warm-up, by hand."""
import pytest
import torch

from edgesync.algorithms.machinery.base import Instruction
from edgesync.algorithms.dgc_async import DGCAsyncClient, DGCAsyncConfig, dgc_step, warmup_rate
from edgesync.algorithms.dgs import DGSServer
from edgesync.algorithms.gd_async import GDAsyncClient, GDAsyncConfig
from edgesync.compression.codec import decode
from fake_quadratic import QuadraticTrainer


def stay(lr, version, **meta):
    return Instruction(tensors={"G.idx": torch.zeros(0, dtype=torch.int32), "G.val": torch.zeros(0)},
                       meta={"version": version, "lr": lr, **meta})


def test_momentum_correction_and_factor_masking_by_hand():
    # m = 0.5, g = [1, 0.6] every step, top-1 of 2, η = 1:
    # 1. u = [1, .6];            v = [1, .6];             send (0: 1);   u, v ← [0, .6], [0, .6]
    # 2. u = [0, .3] + g = [1, .9];  v = [0, .6] + u = [1, 1.5]; send (1: 1.5); u, v ← [1, 0], [1, 0]
    # 3. u = [.5, 0] + g = [1.5, .6]; v = [1, 0] + u = [2.5, .6]; send (0: 2.5); u, v ← [0, .6], [0, .6]
    g = torch.tensor([1.0, 0.6])
    for lr in (1.0, 0.5):  # η multiplies u as it enters v: every value sent scales with η
        u = v = None
        sends = []
        for _ in range(3):
            x, idx, u, v = dgc_step(u, v, g, lr, 0.5, rate=0.5)
            assert torch.all(u[idx] == 0) and torch.all(v[idx] == 0)  # momentum-factor masking
            sends.append((idx.tolist(), x[idx].tolist()))
        assert [i for i, _ in sends] == [[0], [1], [0]]
        assert [s for _, s in sends] == [pytest.approx([lr * 1.0]), pytest.approx([lr * 1.5]), pytest.approx([lr * 2.5])]
        assert u.tolist() == pytest.approx([0.0, 0.6])           # u is learning-rate free
        assert v.tolist() == pytest.approx([0.0, lr * 0.6])      # v is in parameter units


def test_through_the_client_half_with_state_round_trip():
    # Prepare: the same toy through the client (θ = g = [1, 0.6, 0, 0] stays put, top-1 of 4), η = 1
    config = DGCAsyncConfig(lr=1.0, momentum=0.5, rate=0.25)
    client = DGCAsyncClient(config, QuadraticTrainer())
    first = client.on_instruction(Instruction(tensors={"params": torch.tensor([1.0, 0.6, 0.0, 0.0])},
                                              meta={"version": 0, "lr": 1.0}))
    second = client.on_instruction(stay(1.0, 1))
    # Execute: a restarted client carries on from the state
    fresh = DGCAsyncClient(config, QuadraticTrainer())
    fresh.load_state_dict(client.state_dict())
    third = fresh.on_instruction(stay(1.0, 2))
    # Assert
    sends = [decode(u.tensors, "delta", 4).tolist() for u in (first, second, third)]
    assert sends == [pytest.approx(x) for x in ([1, 0, 0, 0], [0, 1.5, 0, 0], [2.5, 0, 0, 0])]
    assert fresh.memory["u"].tolist() == pytest.approx([0, 0.6, 0, 0])
    assert fresh.memory["v"].tolist() == pytest.approx([0, 0.6, 0, 0])


def test_sparsity_warmup_schedule():
    rates = (0.25, 0.0625, 0.015625, 0.004)
    # Assert: epoch ⌊e⌋'s rate, then `rate`
    got = [warmup_rate(rates, 0.001, e) for e in (0.0, 0.99, 1.0, 2.5, 3.0, 3.999, 4.0, 10.0)]
    assert got == [0.25, 0.25, 0.0625, 0.015625, 0.004, 0.004, 0.001, 0.001]
    assert warmup_rate((), 0.01, 0.0) == 0.01


def test_the_client_follows_the_masters_epochs(model_state):
    # Prepare: 1,000 parameters; rates 25%, 6.25% in epochs 0 and 1, then 1%
    config = DGCAsyncConfig(lr=0.1, rate=0.01, warmup_rates=[0.25, 0.0625])
    client = DGCAsyncClient(config, QuadraticTrainer(num_samples=8, batch_samples=4))
    theta = torch.randn(1000, generator=torch.Generator().manual_seed(2))
    sizes = []
    # Execute: the instruction's `epochs` decides the rate
    client.on_instruction(Instruction(tensors={"params": theta}, meta={"version": 0, "lr": 0.1, "epochs": 0.0}))
    for e in (0.5, 1.0, 1.7, 2.0, 7.0):
        update = client.on_instruction(stay(0.1, 1, epochs=e))
        sizes.append(update.tensors["delta.idx"].numel())
    # Assert
    assert sizes == [250, 62, 62, 10, 10]
    # The master's progress: one client with data_size 8 and 4 samples per update → 0.5 epoch per update
    server = DGSServer(config, model_state([0.0] * 1000), [0])
    (send,) = server.start()
    epochs = [send.instruction.meta["epochs"]]
    for _ in range(3):
        (send,) = server.on_update(0, client.on_instruction(send.instruction))
        epochs.append(send.instruction.meta["epochs"])
    assert epochs == [0.0, 0.5, 1.0, 1.5]


def test_dgc_with_momentum_0_is_gd_async():
    gen = torch.Generator().manual_seed(6)
    theta = torch.randn(40, generator=gen)
    dgc = DGCAsyncClient(DGCAsyncConfig(lr=0.1, rate=0.1, momentum=0.0), QuadraticTrainer())
    gd = GDAsyncClient(GDAsyncConfig(lr=0.1, rate=0.1), QuadraticTrainer())
    first = Instruction(tensors={"params": theta}, meta={"version": 0, "lr": 0.1})
    pairs = [(dgc.on_instruction(first), gd.on_instruction(first))]
    for v in range(1, 6):
        g_step = {"G.idx": torch.tensor([v], dtype=torch.int32), "G.val": torch.tensor([-0.5])}
        ins = Instruction(tensors=g_step, meta={"version": v, "lr": 0.1})
        pairs.append((dgc.on_instruction(ins), gd.on_instruction(ins)))
    for a, b in pairs:
        assert torch.allclose(decode(a.tensors, "delta", 40), decode(b.tensors, "delta", 40))


def test_at_rate_1_masking_clears_the_momentum_every_step():
    # rate 1: everything is sent and masked, so each update is η·g alone (plain ASGD): g = θ = [2]
    client = DGCAsyncClient(DGCAsyncConfig(lr=0.1, rate=1.0, momentum=0.9), QuadraticTrainer())
    first = client.on_instruction(Instruction(tensors={"params": torch.tensor([2.0])}, meta={"lr": 0.1}))
    second = client.on_instruction(Instruction(tensors={"G": torch.zeros(1)}, meta={"lr": 0.1}))
    assert first.tensors["delta"].tolist() == second.tensors["delta"].tolist() == pytest.approx([0.2])


def test_the_sampled_threshold_sends_the_exact_top_k():
    # 50,000 entries, k = 500: the sampled threshold's candidates hold the true top-k (else it falls back)
    torch.manual_seed(0)
    g = torch.randn(50_000, generator=torch.Generator().manual_seed(9))
    x_s, idx_s, _, _ = dgc_step(None, None, g, 0.1, 0.9, 0.01, method="sampled")
    x_e, idx_e, _, _ = dgc_step(None, None, g, 0.1, 0.9, 0.01, method="exact")
    assert idx_s.numel() == 500 and torch.equal(idx_s, idx_e)


@pytest.mark.parametrize("scope,sent,kept", [
    # θ = g = [4, 3, 2 | 1] in tensors of 3 and 1, η = 1, m = 0.5: u = v = g; per layer (0: 4) and (3: 1)
    ("layer", [4.0, 0.0, 0.0, 1.0], [0.0, 3.0, 2.0, 0.0]),
    ("global", [4.0, 0.0, 0.0, 0.0], [0.0, 3.0, 2.0, 1.0]),
])
def test_dgc_per_layer_masks_what_each_layer_sent(scope, sent, kept):
    config = DGCAsyncConfig(lr=1.0, momentum=0.5, rate=0.25, topk_scope=scope)
    client = DGCAsyncClient(config, QuadraticTrainer(layers=(3, 1)))
    update = client.on_instruction(Instruction(tensors={"params": torch.tensor([4.0, 3.0, 2.0, 1.0])},
                                               meta={"version": 0, "lr": 1.0}))
    assert decode(update.tensors, "delta", 4).tolist() == sent
    assert client.memory["u"].tolist() == client.memory["v"].tolist() == kept
