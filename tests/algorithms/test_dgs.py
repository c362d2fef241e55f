"""DGS (dgs.txt Alg. 2–3): SAMomentum, the master's model-difference tracking, resyncs, payload sizes.

Every expected number is worked out by hand in the comments. The quadratic trainer's gradient at θ is
θ itself, so a client whose model does not move computes the same gradient every time.
"""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesync.algorithms.asgd import ASGDConfig
from edgesync.algorithms.machinery.async_server import AsyncServer
from edgesync.algorithms.machinery.base import Instruction, ModelState, Update
from edgesync.algorithms.dgs import DGSClient, DGSConfig, DGSServer, samomentum_step
from edgesync.algorithms.machinery.gradient_client import GradientClient
from edgesync.compression.codec import decode, payload_bytes
from fake_quadratic import QuadraticTrainer


def dense_instruction(theta, lr=1.0, version=0, **meta) -> Instruction:
    return Instruction(tensors={"params": torch.as_tensor(theta, dtype=torch.float32)},
                       meta={"version": version, "lr": lr, **meta})


def nothing_new(lr=1.0, version=1, **meta) -> Instruction:
    """A reply G with no entries: the client's model stays where it is."""
    return Instruction(tensors={"G.idx": torch.zeros(0, dtype=torch.int32), "G.val": torch.zeros(0)},
                       meta={"version": version, "lr": lr, **meta})


def sparse_update(idx, val, numel, version=0) -> Update:
    return Update(tensors={"delta.idx": torch.tensor(idx, dtype=torch.int32),
                           "delta.val": torch.tensor(val, dtype=torch.float32)},
                  meta={"version": version, "samples": 4, "steps": 1, "loss": 1.0, "data_size": 8})


def sent(update: Update, numel: int) -> list[float]:
    return decode(update.tensors, "delta", numel).tolist()


# -- SAMomentum -------------------------------------------------------------------------------------

def test_samomentum_toy_step_by_step():
    # η = 1, m = 0.5, g = [1, 0.1], top-1 of 2 (docs/algorithms.md, the DGS family):
    # 1. u = [1, 0.1];                      send [1, 0];    keep [1, 0.1/0.5]   = [1, 0.2]
    # 2. u = 0.5·[1, 0.2] + g = [1.5, 0.2]; send [1.5, 0];  keep [1.5, 0.4]
    # 3. u = [0.75, 0.2] + g = [1.75, 0.3]; send [1.75, 0]; keep [1.75, 0.6]
    g = torch.tensor([1.0, 0.1])
    u, sends, kept = None, [], []
    for _ in range(3):
        x, idx, u = samomentum_step(u, 1.0 * g, 0.5, rate=0.5)
        dense = torch.zeros(2)
        dense[idx] = x[idx]
        sends.append(dense.tolist())
        kept.append(u.tolist())
    assert sends == [pytest.approx([1.0, 0.0]), pytest.approx([1.5, 0.0]), pytest.approx([1.75, 0.0])]
    assert kept == [pytest.approx([1.0, 0.2]), pytest.approx([1.5, 0.4]), pytest.approx([1.75, 0.6])]


def test_samomentum_toy_through_the_client_half():
    # Prepare: the model stays at θ = [1, 0.1] (empty replies), so g = θ = [1, 0.1] every time
    config = DGSConfig(lr=1.0, momentum=0.5, rate=0.5)
    client = DGSClient(config, QuadraticTrainer())
    # Execute
    updates = [client.on_instruction(dense_instruction([1.0, 0.1], version=0))]
    updates += [client.on_instruction(nothing_new(version=v)) for v in (1, 2)]
    # Assert: the values of the toy. One sparse entry of 2 (int32 index + float32 value, 8 bytes) is no
    # smaller than the dense vector (8 bytes), so these payloads travel dense: "delta" = [1, 0] …
    assert [sent(u, 2) for u in updates] == [pytest.approx(x) for x in ([1, 0], [1.5, 0], [1.75, 0])]
    assert all(set(u.tensors) == {"delta"} for u in updates)
    assert client.memory["u"].tolist() == pytest.approx([1.75, 0.6])
    assert [u.meta["version"] for u in updates] == [0, 1, 2]
    assert {"loss", "steps", "samples", "data_size", "version"} <= set(updates[0].meta)
    # A restarted client continues from the state: u = 0.5·[1.75, 0.6] + g = [1.875, 0.4] → send [1.875, 0]
    fresh = DGSClient(config, QuadraticTrainer())
    fresh.load_state_dict(client.state_dict())
    nxt = fresh.on_instruction(nothing_new(version=3))
    assert sent(nxt, 2) == pytest.approx([1.875, 0.0])
    assert fresh.memory["u"].tolist() == pytest.approx([1.875, 0.8])
    assert fresh.trainer.gradient_at[0].tolist() == pytest.approx([1.0, 0.1])


def test_the_client_applies_g_before_computing_and_always_loads_its_model():
    # Prepare: two clients share one trainer (as in the simulator)
    trainer = QuadraticTrainer()
    config = DGSConfig(lr=1.0, momentum=0.5, rate=1.0)
    a, b = DGSClient(config, trainer), DGSClient(config, trainer)
    # Execute: a gets θ = [1, 2], b gets θ = [5, 5]; then a gets G = [0, −1.5] (sparse: index 1)
    a.on_instruction(dense_instruction([1.0, 2.0]))
    b.on_instruction(dense_instruction([5.0, 5.0]))
    a.on_instruction(Instruction(tensors={"G.idx": torch.tensor([1], dtype=torch.int32),
                                          "G.val": torch.tensor([-1.5])}, meta={"version": 2, "lr": 1.0}))
    # Assert: a computed on its own θ + G = [1, 0.5], not on b's model left in the trainer
    assert [t.tolist() for t in trainer.gradient_at] == [[1.0, 2.0], [5.0, 5.0], [1.0, 0.5]]
    assert a.theta.tolist() == [1.0, 0.5]


def test_warmup_rescales_the_velocity_when_eta_changes():
    # Prepare: m = 0.5, dense (rate 1: u is kept whole), g = θ = [1]
    client = DGSClient(DGSConfig(lr=0.1, momentum=0.5, rate=1.0), QuadraticTrainer())
    # Execute
    # 1. η = 0.1: u = 0.1, sent 0.1
    first = client.on_instruction(dense_instruction([1.0], lr=0.1))
    # 2. η = 0.2: u corrected to 0.1·(0.2/0.1) = 0.2; u = 0.5·0.2 + 0.2·1 = 0.3
    second = client.on_instruction(Instruction(tensors={"G": torch.zeros(1)}, meta={"version": 1, "lr": 0.2}))
    # Assert: dense payloads ("delta", rate 1.0)
    assert first.tensors["delta"].tolist() == pytest.approx([0.1])
    assert second.tensors["delta"].tolist() == pytest.approx([0.3])
    assert client.memory["lr"] == 0.2


def test_momentum_0_is_the_limit_of_samomentum_gradient_dropping():
    # m = 0: r ← r + η·g, send top-1, zero it. g = [1, 0.6]:
    # 1. r = [1, 0.6]  → send [1, 0],   keep [0, 0.6]
    # 2. r = [1, 1.2]  → send [0, 1.2], keep [1, 0]
    # 3. r = [2, 0.6]  → send [2, 0],   keep [0, 0.6]
    g = torch.tensor([1.0, 0.6])
    results = {}
    for m in (0.0, 1e-4):
        u, sends = None, []
        for _ in range(3):
            x, idx, u = samomentum_step(u, g, m, rate=0.5)
            sends.append((idx.tolist(), x[idx].tolist()))
        results[m] = (sends, u)
    sends, u = results[0.0]
    assert [i for i, _ in sends] == [[0], [1], [0]]
    assert [v for _, v in sends] == [pytest.approx([1.0]), pytest.approx([1.2]), pytest.approx([2.0])]
    assert u.tolist() == pytest.approx([0.0, 0.6])
    # a tiny m sends almost the same: m·u → 0 on sent coordinates, u/m·m = u on the others
    near, u_near = results[1e-4]
    assert [i for i, _ in near] == [[0], [1], [0]]
    assert [v for _, v in near] == [pytest.approx(v, rel=1e-3) for _, v in sends]
    assert u_near[1].item() == pytest.approx(0.6 / 1e-4, rel=1e-3)  # stored as u/m: restored by the next m·u


# -- the master ---------------------------------------------------------------------------------

def test_master_tracks_m_and_each_clients_v(model_state):
    # Prepare: θ0 = [0, 1, …, 7], two clients; each is first sent θ0, v_k = 0
    server = DGSServer(DGSConfig(lr=0.1), model_state([float(i) for i in range(8)]), [0, 1])
    start = server.start()
    # Execute
    # 1. c0 sends −(0.5 at 0):  M = [−0.5, 0, …];      G0 = M − v0 = (0: −0.5);        v0 = M
    r1 = server.on_update(0, sparse_update([0], [0.5], 8, version=0))
    # 2. c1 sends (1 at 1):     M = [−0.5, −1, 0, …];  G1 = M − 0 = (0: −0.5, 1: −1);  v1 = M
    r2 = server.on_update(1, sparse_update([1], [1.0], 8, version=0))
    # 3. c0 sends (2 at 2):     M = [−0.5, −1, −2, …]; G0 = M − v0 = (1: −1, 2: −2);   v0 = M
    r3 = server.on_update(0, sparse_update([2], [2.0], 8, version=1))
    # Assert
    assert all(torch.equal(s.instruction.tensors["params"], torch.arange(8.0)) for s in start)
    replies = [r[0].instruction.tensors for r in (r1, r2, r3)]
    assert [t["G.idx"].tolist() for t in replies] == [[0], [0, 1], [1, 2]]
    assert [t["G.val"].tolist() for t in replies] == [[-0.5], [-0.5, -1.0], [-1.0, -2.0]]
    assert [r[0].instruction.meta["version"] for r in (r1, r2, r3)] == [1, 2, 3]
    assert server.global_params().tolist() == [-0.5, 0.0, 0.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert server.v[0].tolist() == server.v[1].tolist()[:2] + [-2.0] + [0.0] * 5
    assert server.v[1].tolist() == [-0.5, -1.0] + [0.0] * 6
    rows = server.update_log
    # lag: 0, 1 (c1 computed on version 0, one update since), 1; gap ‖M − v_k‖/√8 before applying
    assert [r["lag"] for r in rows] == [0, 1, 1]
    assert [r["gap"] for r in rows] == pytest.approx([0.0, 0.5 / 8 ** 0.5, 1.0 / 8 ** 0.5])
    assert [r["bytes_up"] for r in rows] == [8, 8, 8]             # one int32 index + one float32 value
    assert [r["bytes_down"] for r in rows] == [8, 16, 16]
    assert [r["density_up"] for r in rows] == [0.125] * 3
    assert [r["density_down"] for r in rows] == [0.125, 0.25, 0.25]
    assert [r["resync"] for r in rows] == [False] * 3
    assert rows[-1]["v_bytes"] == server.v_bytes() == 2 * 8 * 4


def test_secondary_compression_sends_the_top_r2_of_g_and_keeps_the_rest_owed(model_state):
    # Prepare: as above with R₂ = 1/8 (one entry of G per reply)
    server = DGSServer(DGSConfig(lr=0.1, secondary_rate=0.125), model_state([0.0] * 8), [0, 1])
    server.start()
    # Execute
    # 1. c0 (0: 0.5):  M = [−.5, 0, 0, 0, …]; G0 = (0: −.5) → send it;         v0 = [−.5, 0, …]
    r1 = server.on_update(0, sparse_update([0], [0.5], 8, version=0))
    # 2. c1 (1: 1):    M = [−.5, −1, 0, 0];  G1 = [−.5, −1] → top-1: (1: −1);   v1 = [0, −1, 0, …]
    r2 = server.on_update(1, sparse_update([1], [1.0], 8, version=0))
    # 3. c0 (2: 2):    M = [−.5, −1, −2, 0]; G0 = [0, −1, −2] → (2: −2);        v0 = [−.5, 0, −2, …]
    r3 = server.on_update(0, sparse_update([2], [2.0], 8, version=1))
    # 4. c1 (3: 1):    M = [−.5, −1, −2, −1]; G1 = M − v1 = [−.5, 0, −2, −1] → (2: −2); v1 = [0, −1, −2, 0, …]
    r4 = server.on_update(1, sparse_update([3], [1.0], 8, version=2))
    # Assert
    replies = [r[0].instruction.tensors for r in (r1, r2, r3, r4)]
    assert [(t["G.idx"].tolist(), t["G.val"].tolist()) for t in replies] == [
        ([0], [-0.5]), ([1], [-1.0]), ([2], [-2.0]), ([2], [-2.0])]
    assert server.v[0].tolist()[:4] == [-0.5, 0.0, -2.0, 0.0]
    assert server.v[1].tolist()[:4] == [0.0, -1.0, -2.0, 0.0]
    assert server.M.tolist()[:4] == [-0.5, -1.0, -2.0, -1.0]
    assert all(r["density_down"] == 0.125 for r in server.update_log)


def test_the_master_refuses_a_malformed_payload_and_ignores_a_missing_one(model_state):
    server = DGSServer(DGSConfig(lr=0.1), model_state([0.0] * 4), [0])
    server.start()
    with pytest.raises(ValueError, match="out of range"):
        server.on_update(0, sparse_update([9], [1.0], 4))
    assert server.on_update(0, Update(tensors={}, meta={"version": 0})) == []
    assert server.updates == 0 and server.M.tolist() == [0.0] * 4


def test_a_lost_client_takes_its_v_with_it(model_state):
    server = DGSServer(DGSConfig(lr=0.1), model_state([0.0] * 4), [0, 1])
    server.start()
    assert server.v_bytes() == 2 * 4 * 4
    server.on_client_lost(1)
    assert 1 not in server.v and server.v_bytes() == 4 * 4
    assert server.on_update(1, sparse_update([0], [1.0], 4)) == []


# -- runs through both halves ------------------------------------------------------------------------

def drive(server, clients, order, on_receipt=None) -> list[torch.Tensor]:
    """Deliver each client's pending instruction in `order` (ranks); returns the global model after every update.

    `on_receipt(step, rank, models)` runs once the client has applied its instruction, before the
    master hears from it; `models` is the list returned, so far.
    """
    pending = {s.client: s for s in server.start()}
    models: list[torch.Tensor] = []
    for step, rank in enumerate(order):
        update = clients[rank].on_instruction(pending.pop(rank).instruction)
        if on_receipt is not None:
            on_receipt(step, rank, models)
        for reply in server.on_update(rank, update):
            pending[reply.client] = reply
        models.append(server.global_params().clone())
    return models


class HeavyBallClient(GradientClient):
    """ASGD with client-side momentum: v ← m·v + g at the θ it was sent; sends v (the master steps −η·v)."""

    def __init__(self, config, trainer, momentum):
        super().__init__(config, trainer)
        self.momentum, self.velocity = momentum, None

    def on_instruction(self, instruction):
        update = super().on_instruction(instruction)
        g = update.tensors["grad"]
        self.velocity = g if self.velocity is None else self.momentum * self.velocity + g
        update.tensors["grad"] = self.velocity
        return update


ORDER = [0, 1, 2, 0, 0, 2, 1, 2, 0, 1, 1, 0, 2, 0, 1, 2, 2, 0]


def test_without_sparsification_dgs_is_asgd_with_client_side_momentum(model_state):
    # Prepare: 3 clients, rate 1 and no R₂. "ASGD with client-side momentum": ASGD's master
    # (θ ← θ − η·sent, replies θ) and clients keeping heavy-ball v ← m·v + g and sending v; DGS's
    # SAMomentum with nothing unsent is u ← m·u + η·g, i.e. u = η·v at a constant η.
    theta0 = torch.randn(6, generator=torch.Generator().manual_seed(3)).tolist()
    lr, m = 0.1, 0.9
    dgs = DGSServer(DGSConfig(lr=lr, momentum=m, rate=1.0), model_state(theta0), [0, 1, 2])
    dgs_clients = {k: DGSClient(dgs.config, QuadraticTrainer()) for k in range(3)}
    asgd = AsyncServer(ASGDConfig(lr=lr), model_state(theta0), [0, 1, 2])
    ref_clients = {k: HeavyBallClient(asgd.config, QuadraticTrainer(), m) for k in range(3)}
    eq5 = []

    def check_eq5(step, rank, models):
        # Eq. 5: after applying G the client holds θ0 + M as it was when the master answered it,
        # i.e. the global model after the client's previous update
        previous = max((j for j in range(step) if ORDER[j] == rank), default=None)
        if previous is not None:
            eq5.append(torch.allclose(dgs_clients[rank].theta, models[previous], atol=1e-6))

    # Execute
    globals_dgs = drive(dgs, dgs_clients, ORDER, check_eq5)
    globals_ref = drive(asgd, ref_clients, ORDER)
    # Assert: the same global model after every update, the same θ every gradient was computed at
    assert len(eq5) == len(ORDER) - 3 and all(eq5)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(globals_dgs, globals_ref))
    for k in range(3):
        ours, ref = dgs_clients[k].trainer.gradient_at, ref_clients[k].trainer.gradient_at
        assert len(ours) == len(ref) > 0
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(ours, ref))
    assert not torch.allclose(globals_dgs[-1], torch.tensor(theta0))
    assert all(r["density_down"] > 0.5 for r in dgs.update_log)  # G travelled whole


@settings(max_examples=40, deadline=None)
@given(order=st.lists(st.integers(0, 2), min_size=1, max_size=30),
       rate=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
       secondary=st.sampled_from([None, 0.1, 0.5]),
       resync=st.sampled_from([None, 0, 2, 5]),
       momentum=st.sampled_from([0.0, 0.5, 0.9]),
       value_dtype=st.sampled_from(["float32", "float16"]))
def test_every_clients_model_is_theta0_plus_its_v(order, rate, secondary, resync, momentum, value_dtype):
    # Prepare: 3 clients, 20 parameters, any interleaving and setting
    theta0 = torch.randn(20, generator=torch.Generator().manual_seed(len(order)))
    config = DGSConfig(lr=0.1, rate=rate, secondary_rate=secondary, resync_every=resync, momentum=momentum,
                       value_dtype=value_dtype)
    server = DGSServer(config, ModelState(params=theta0, buffers=torch.zeros(0)), [0, 1, 2])
    clients = {k: DGSClient(config, QuadraticTrainer()) for k in range(3)}
    checked = []

    def check(step, rank, models):  # after the client applied its reply, before the master hears from it
        checked.append(torch.allclose(clients[rank].theta, server.theta0 + server.v[rank], atol=1e-5))

    # Execute
    drive(server, clients, order, check)
    # Assert
    assert len(checked) == len(order) and all(checked)
    assert torch.allclose(server.global_params(), server.theta0 + server.M)


def test_a_dense_resync_sets_the_client_to_theta0_plus_m_and_v_to_m(model_state):
    # Prepare: resync every 3 versions, 2 clients taking turns, sparse both ways. Replies and why:
    # v1 c0: 1 − 0 < 3 → G;  v2 c1: 2 − 0 < 3 → G;  v3 c0: 3 − 0 ≥ 3 → dense;  v4 c1: 4 − 0 → dense;
    # v5 c0: 5 − 3 < 3 → G;  v6 c1: 6 − 4 < 3 → G;  v7 c0: 7 − 3 ≥ 3 → dense;  v8 c1: 8 − 4 → dense
    theta0 = torch.randn(10, generator=torch.Generator().manual_seed(5)).tolist()
    config = DGSConfig(lr=0.1, rate=0.2, momentum=0.5, resync_every=3)
    server = DGSServer(config, model_state(theta0), [0, 1])
    clients = {k: DGSClient(config, QuadraticTrainer()) for k in (0, 1)}
    pending = {s.client: s for s in server.start()}
    delivered_dense = []
    # Execute
    for step, rank in enumerate([0, 1, 0, 1, 0, 1, 0, 1, 0, 1]):
        instruction = pending.pop(rank).instruction
        update = clients[rank].on_instruction(instruction)
        if step >= 2 and "params" in instruction.tensors:  # a resync (not the first model)
            # the client holds exactly the model the master had when it answered: θ0 + M then
            delivered_dense.append(torch.equal(clients[rank].theta, instruction.tensors["params"]))
        if step >= 8:
            break
        (reply,) = server.on_update(rank, update)
        pending[rank] = reply
        if "params" in reply.instruction.tensors:
            assert torch.equal(reply.instruction.tensors["params"], server.global_params())
            assert torch.allclose(reply.instruction.tensors["params"], torch.tensor(theta0) + server.M)
            assert torch.equal(server.v[rank], server.M)
            assert "G.idx" not in reply.instruction.tensors
    # Assert
    assert [r["resync"] for r in server.update_log] == [False, False, True, True, False, False, True, True]
    assert [r["density_down"] == 1.0 for r in server.update_log] == [r["resync"] for r in server.update_log]
    assert [r["bytes_down"] for r in server.update_log if r["resync"]] == [40] * 4
    assert delivered_dense == [True, True, True]


@pytest.mark.parametrize("value_dtype,per_entry", [("float32", 4 + 4), ("float16", 4 + 2)])
def test_the_update_at_rate_1_percent_carries_1_percent_of_the_entries(model_state, value_dtype, per_entry):
    # Prepare: the Fashion-MNIST CNN's size; k = ⌊0.01·184,586⌋ = 1,845 entries, int32 index + value each
    numel = 184_586
    theta = torch.randn(numel, generator=torch.Generator().manual_seed(0))
    config = DGSConfig(lr=0.1, rate=0.01, value_dtype=value_dtype)
    server = DGSServer(config, ModelState(params=theta, buffers=torch.zeros(0)), [0, 1])
    (first, _) = server.start()
    client = DGSClient(config, QuadraticTrainer())
    # Execute
    update = client.on_instruction(first.instruction)
    server.on_update(0, update)
    # Assert: 14,760 bytes up with float32 values, ≈ 1% × 8 bytes per entry of the dense 738,344
    assert payload_bytes(update.tensors, "delta") == 1845 * per_entry
    if value_dtype == "float32":
        assert payload_bytes(update.tensors, "delta") == pytest.approx(0.01 * numel * 8, rel=1e-3)
    assert update.tensors["delta.idx"].dtype == torch.int32
    assert update.tensors["delta.val"].dtype == getattr(torch, value_dtype)
    # the entries sent are the 1,845 largest |η·g| = |0.1·θ|
    assert set(update.tensors["delta.idx"].tolist()) == set(theta.abs().topk(1845).indices.tolist())
    row = server.update_log[0]
    assert row["bytes_up"] == 1845 * per_entry and row["density_up"] == round(1845 / numel, 6)
    assert row["bytes_down"] == 1845 * per_entry  # G for client 0 is its own update, exactly
    assert row["v_bytes"] == 2 * numel * 4


# -- top-k per layer (dgs.txt Alg. 1–3: each parameter tensor keeps its own top R) --------------------

def layered(*sizes) -> QuadraticTrainer:
    return QuadraticTrainer(layers=sizes)


@pytest.mark.parametrize("scope,sent_idx,kept", [
    # θ = g = [4, 3, 2 | 1] in two tensors (3 and 1), η = 1, m = 0.5, R = 0.25 ⇒ k = max(1, ⌊R·n⌋):
    # per layer 1 of 3 and 1 of 1 → send (0: 4), (3: 1); keep u/m = [4, 6, 4, 1] on the unsent
    ("layer", [0, 3], [4.0, 6.0, 4.0, 1.0]),
    # over the whole vector 1 of 4 → send (0: 4) only; the small tensor's 1 waits: [4, 6, 4, 2]
    ("global", [0], [4.0, 6.0, 4.0, 2.0]),
])
def test_the_dgs_client_sparsifies_each_tensor_of_its_model(scope, sent_idx, kept):
    client = DGSClient(DGSConfig(lr=1.0, momentum=0.5, rate=0.25, topk_scope=scope), layered(3, 1))
    update = client.on_instruction(dense_instruction([4.0, 3.0, 2.0, 1.0]))
    x = decode(update.tensors, "delta", 4)
    assert torch.nonzero(x).squeeze(1).tolist() == sent_idx
    assert x[sent_idx].tolist() == [[4.0, 3.0, 2.0, 1.0][i] for i in sent_idx]
    assert client.memory["u"].tolist() == pytest.approx(kept)


def test_the_default_scope_is_per_layer():
    assert DGSConfig().topk_scope == "layer"


def test_per_layer_follows_the_real_models_parameter_order(tiny_trainer):
    # Prepare: Linear(2, 4) 8 + 4, BatchNorm1d(4) 4 + 4, Linear(4, 2) 8 + 2 = 30 parameters in 6 tensors;
    # R = 0.01 ⇒ one entry per tensor (six), where a global top-k would send one entry in all
    trainer = tiny_trainer()
    sizes = [p.numel() for p in trainer.model.parameters()]
    client = DGSClient(DGSConfig(lr=0.1, momentum=0.0, rate=0.01), trainer)
    # Execute
    update = client.on_instruction(dense_instruction(trainer.get_params().tolist(), lr=0.1))
    # Assert: in each slice of the flat vector (params.py's order), its largest |η·g| is the one sent
    sent = decode(update.tensors, "delta", sum(sizes))
    step = sent + client.memory["u"]  # m = 0: sent + residual = η·g
    offset = 0
    for n in sizes:
        part = sent[offset:offset + n]
        assert int(torch.count_nonzero(part)) == 1
        assert part.abs().argmax() == step[offset:offset + n].abs().argmax()
        offset += n
    assert sizes == [8, 4, 4, 4, 8, 2]


@pytest.mark.parametrize("scope,idx,val", [
    # M = −[4, 3, 0, 0 | 0, 0, 2, 1], G₀ = M; R₂ = 0.25 ⇒ per tensor of 4: 1 each → (0: −4), (6: −2)
    ("layer", [0, 6], [-4.0, -2.0]),
    ("global", [0, 1], [-4.0, -3.0]),  # 2 of 8, both from the first tensor
])
def test_the_masters_secondary_compression_is_per_layer_too(scope, idx, val):
    initial = ModelState(params=torch.zeros(8), buffers=torch.zeros(0), sizes=(4, 4))
    server = DGSServer(DGSConfig(lr=0.1, secondary_rate=0.25, topk_scope=scope), initial, [0, 1])
    server.start()
    (reply,) = server.on_update(0, sparse_update([0, 1, 6, 7], [4.0, 3.0, 2.0, 1.0], 8))
    assert reply.instruction.tensors["G.idx"].tolist() == idx
    assert reply.instruction.tensors["G.val"].tolist() == val


def test_layer_sizes_that_do_not_cover_the_model_are_refused():
    initial = ModelState(params=torch.zeros(8), buffers=torch.zeros(0), sizes=(4, 3))
    with pytest.raises(ValueError, match="sizes"):
        DGSServer(DGSConfig(secondary_rate=0.25), initial, [0])


def test_the_runtime_gives_the_server_half_the_models_layer_sizes():
    from types import SimpleNamespace

    from edgesync.models import build_model
    from edgesync.runtime.bookkeeping.workload import initial_model
    from edgesync.config import load_scenario

    scenario = load_scenario({"name": "sizes", "clients": ["x1"], "algorithms": [{"name": "dgs"}]})
    data = SimpleNamespace(num_classes=10, input_shape=(1, 28, 28))
    initial = initial_model(scenario, data)
    model = build_model(scenario.model.name, num_classes=10, in_channels=1)
    assert initial.sizes == tuple(p.numel() for p in model.parameters())
    assert sum(initial.sizes) == initial.params.numel() and len(initial.sizes) > 1
