"""The coordinator's single passes over model-sized vectors (edgesync/model_passes.py): in C where the extension is
built, in torch otherwise; both against float64 references computed here, and against each other."""
from __future__ import annotations

import math
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesync import model_passes


def test_the_c_extension_is_built_where_a_compiler_is():
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    assert model_passes.NATIVE or shutil.which("cc") is None or not headers.exists()


@pytest.fixture(params=["native", "torch"])
def way(request, monkeypatch):
    if request.param == "native" and not model_passes.NATIVE:
        pytest.skip("the C extension is not built here (no C compiler at install)")
    monkeypatch.setattr(model_passes, "NATIVE", request.param == "native")
    return request.param


def vectors(n: int, k: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, generator=g) for _ in range(k)]


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 1000, 184_586])
def test_the_squared_distance_is_the_float64_sum_of_squares(way, n):
    a, b = vectors(n, 2)
    want = float(np.sum((a.numpy().astype(np.float64) - b.numpy().astype(np.float64)) ** 2))
    assert model_passes.sq_dist(a, b) == pytest.approx(want, rel=1e-12, abs=0.0)


def test_a_step_writes_a_new_vector_and_leaves_its_inputs_alone(way):
    x, y, a, b = vectors(1001, 4)
    before = [t.clone() for t in (x, y, a, b)]
    out, sq = model_passes.step(x, y, -0.05, (a, b))
    assert out is not x and out.data_ptr() != x.data_ptr()
    torch.testing.assert_close(out, x - 0.05 * y, rtol=0, atol=1e-6)
    assert sq == pytest.approx(float(((a.double() - b.double()) ** 2).sum()), rel=1e-12)
    for t, t0 in zip((x, y, a, b), before):
        assert torch.equal(t, t0)
    out, sq = model_passes.step(x, y, 2.0)
    assert sq is None
    torch.testing.assert_close(out, x + 2.0 * y, rtol=0, atol=1e-5)


def test_a_step_may_read_the_gap_of_the_vector_it_steps_from(way):
    """ASGD's fused pass: θ' = θ − η·g and ‖θ − θ_sent‖² with θ both the step's start and the gap's side."""
    theta, g, sent = vectors(513, 3)
    out, sq = model_passes.step(theta, g, -0.1, (theta, sent))
    torch.testing.assert_close(out, torch.add(theta, g, alpha=-0.1), rtol=0, atol=1e-6)
    assert sq == pytest.approx(float(((theta.double() - sent.double()) ** 2).sum()), rel=1e-12)


def test_the_running_sum_is_float64_and_in_place(way):
    x1, x2, x3 = vectors(999, 3)
    total = model_passes.accumulate(None, x1, 0.5)
    assert total.dtype == torch.float64
    torch.testing.assert_close(total, x1.double() * 0.5, rtol=0, atol=0)  # one rounding: the same bits
    ptr = total.data_ptr()
    total = model_passes.accumulate(total, x2, 2.0)
    total = model_passes.accumulate(total, x3, 1.0)
    assert total.data_ptr() == ptr
    want = x1.double() * 0.5 + 2.0 * x2.double() + x3.double()
    torch.testing.assert_close(total, want, rtol=1e-15, atol=1e-15)


def test_the_mean_is_rounded_to_float32_once_the_same_bits_both_ways(monkeypatch):
    """No multiply-add in the mean: C and torch give the same bits (divisor, and FedNova's multiplier)."""
    if not model_passes.NATIVE:
        pytest.skip("the C extension is not built here")
    total = torch.randn(4097, dtype=torch.float64) * 3
    native = [model_passes.mean(total, 3.0), model_passes.mean(total, 1.0, 0.37)]
    monkeypatch.setattr(model_passes, "NATIVE", False)
    torch_way = [model_passes.mean(total, 3.0), model_passes.mean(total, 1.0, 0.37)]
    for n, t in zip(native, torch_way):
        assert n.dtype == torch.float32 and torch.equal(n, t)
    assert torch.equal(torch_way[0], (total / 3.0).float())


def test_a_mean_applied_to_theta_is_theta_plus_eps_times_the_float32_mean(way):
    theta = vectors(2049, 1)[0]
    total = torch.randn(2049, dtype=torch.float64)
    out = model_passes.mean(total, 4.0, theta=theta, eps=0.5)
    m = (total / 4.0).float()
    torch.testing.assert_close(out, theta + 0.5 * m, rtol=0, atol=1e-6)
    assert torch.equal(model_passes.mean(total, 4.0, theta=theta), theta + m)  # eps 1: one rounding either way


def test_tensors_c_cannot_read_take_the_torch_path():
    """Non-contiguous, another dtype, different sizes: the same results through torch."""
    strided, y = torch.randn(2, 600)[0, ::2], torch.randn(300)
    assert not strided.is_contiguous()
    out, sq = model_passes.step(strided, y, 1.0, (strided, y))
    torch.testing.assert_close(out, strided + y)
    assert sq == pytest.approx(float(((strided.double() - y.double()) ** 2).sum()), rel=1e-9)
    with pytest.raises(RuntimeError):  # sizes that differ: torch's own error, not a C read past an end
        model_passes.step(torch.randn(5), torch.randn(6), 1.0)
    d = torch.randn(10, dtype=torch.float64)
    assert model_passes.sq_dist(d, d * 2) == pytest.approx(float((d ** 2).sum()), rel=1e-12)
    total = model_passes.accumulate(None, strided, 2.0)
    torch.testing.assert_close(total, strided.double() * 2)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 70), alpha=st.floats(-4, 4, allow_nan=False), seed=st.integers(0, 2**16),
       divisor=st.floats(0.25, 64), weight=st.floats(-3, 3, allow_nan=False))
def test_c_agrees_with_torch_on_every_pass(n, alpha, seed, divisor, weight):
    if not model_passes.NATIVE:
        return
    x, y, a = vectors(n, 3, seed)
    results = []
    for native in (True, False):
        model_passes.NATIVE = native
        try:
            out, sq = model_passes.step(x, y, alpha, (a, x))
            total = model_passes.accumulate(model_passes.accumulate(None, x, weight), y, 1.5)
            results.append((out, sq, total, model_passes.mean(total, divisor),
                            model_passes.mean(total, divisor, theta=a, eps=alpha)))
        finally:
            model_passes.NATIVE = True
    (o1, s1, t1, m1, p1), (o2, s2, t2, m2, p2) = results
    torch.testing.assert_close(o1, o2, rtol=2e-7, atol=1e-6)  # a multiply-add's last bit at most
    assert s1 == pytest.approx(s2, rel=1e-12, abs=1e-300)
    torch.testing.assert_close(t1, t2, rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(m1, m2, rtol=1.2e-7, atol=0)
    torch.testing.assert_close(p1, p2, rtol=2e-7, atol=1e-6)


def test_momentum_is_a_new_velocity_and_a_step_along_it(way):
    theta, v, g, sent = vectors(777, 4)
    before = [t.clone() for t in (theta, v, g)]
    theta2, v2, sq = model_passes.momentum(theta, v, g, 0.9, -0.05)
    assert sq is None
    torch.testing.assert_close(v2, 0.9 * v + g, rtol=0, atol=0)  # two roundings, as torch's own ops
    torch.testing.assert_close(theta2, theta - 0.05 * v2, rtol=0, atol=0)
    assert all(torch.equal(t, t0) for t, t0 in zip((theta, v, g), before))
    # NAG-ASGD's form: u ← γ·u + η·g, θ − u, with the gap to the model the update was computed on
    theta3, u, sq = model_passes.momentum(theta, v, g, 0.9, -1.0, b=0.05, gap_of=sent)
    torch.testing.assert_close(u, 0.9 * v + 0.05 * g, rtol=0, atol=1e-7)
    torch.testing.assert_close(theta3, theta - u, rtol=0, atol=0)
    assert sq == pytest.approx(float(((theta.double() - sent.double()) ** 2).sum()), rel=1e-12)


@pytest.mark.parametrize("w", [0.0, 0.2, 0.5, 0.9, 1.0])
def test_lerp_pulls_as_torch_lerp_and_returns_the_step_it_took(way, w):
    theta, x, sent = vectors(1025, 3, seed=6)
    out, step, sq_gap, sq_step = model_passes.lerp(theta, x, w, sent, with_step=True)
    torch.testing.assert_close(out, torch.lerp(theta, x, w), rtol=0, atol=1e-6)
    assert torch.equal(step, out - theta)  # θ + step is θ's new value (EASGD's δ)
    assert sq_step == pytest.approx(float((step.double() ** 2).sum()), rel=1e-12, abs=1e-300)
    assert sq_gap == pytest.approx(float(((theta.double() - sent.double()) ** 2).sum()), rel=1e-12)
    out2, none_step, none_gap, none_sq = model_passes.lerp(theta, x, w)
    assert torch.equal(out2, out) and none_step is None and none_gap is None and none_sq is None


def test_a_scaled_step_is_fedasyncs_mix(way):
    x, x_new = vectors(640, 2, seed=7)
    out, _ = model_passes.step(x, x_new, 0.3, scale=0.7)
    torch.testing.assert_close(out, x.mul(0.7).add_(x_new, alpha=0.3), rtol=0, atol=1e-6)
    assert torch.equal(model_passes.step(x, x_new, 0.0, scale=1.0)[0], x)  # α = 0: x, to the bit


@pytest.mark.parametrize("rule", ["fedadam", "fedyogi", "fedadagrad"])
def test_the_adaptive_step_follows_reddi_et_al(way, rule):
    """Against the rule written out in float64 (fed_adaptive.py's docstring), from non-zero moments."""
    x, m, d = vectors(1500, 3, seed=3)
    v = vectors(1500, 1, seed=4)[0].abs()
    b1, b2, tau, lr = 0.9, 0.99, 1e-3, 0.01
    x2, m2, v2 = model_passes.adaptive(x, m, v, d, rule, b1, b2, tau, lr)
    X, M, V, D = (t.double() for t in (x, m, v, d))
    want_m = b1 * M + (1 - b1) * D
    want_v = {"fedadam": b2 * V + (1 - b2) * D * D, "fedadagrad": V + D * D,
              "fedyogi": V - (1 - b2) * D * D * torch.sign(V - D * D)}[rule]
    torch.testing.assert_close(m2.double(), want_m, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(v2.double(), want_v, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x2.double(), X + lr * want_m / (want_v.sqrt() + tau), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mix", [0.0, 1 / 3, 0.75, 1.0])
def test_shats_mirrored_step_steps_both_and_mixes(way, mix):
    theta, mirror, g = vectors(901, 3, seed=5)
    theta2, mirror2, sq = model_passes.mirrored(theta, mirror, g, -0.1, -0.2, mix)
    t, s = theta - 0.1 * g, mirror - 0.2 * g
    torch.testing.assert_close(theta2, t, rtol=0, atol=1e-6)
    if mix >= 1.0:
        assert mirror2 is theta2  # the mirror is the reply itself (shat.mix returns it)
    else:
        torch.testing.assert_close(mirror2, torch.lerp(s, t, mix), rtol=0, atol=1e-6)
    assert sq == pytest.approx(float(((theta.double() - mirror.double()) ** 2).sum()), rel=1e-12)


def test_pairs_split_into_their_two_halves(way):
    pairs = torch.randn(333, 2)
    a, b = model_passes.split_pairs(pairs)
    assert torch.equal(a, pairs[:, 0]) and torch.equal(b, pairs[:, 1])
    assert a.is_contiguous() and b.is_contiguous() and a.data_ptr() != pairs.data_ptr()


def designed_sq_dist(a: torch.Tensor, b: torch.Tensor) -> float:
    """Σ (a − b)² in the order _model_passes.c fixes: blocks of 2,048 in turn; in each, eight float64 partial sums over
    the coordinates i ≡ j (mod 8), the block's tail summed first and the eight added to it in order."""
    total = 0.0
    x64, y64 = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    for k in range(0, a.numel(), 2048):
        sq = (x64[k:k + 2048] - y64[k:k + 2048]) ** 2
        full = sq.size - sq.size % 8
        parts = np.cumsum(sq[:full].reshape(-1, 8), axis=0)[-1] if full else np.zeros(8)  # cumsum: in order
        block = 0.0
        for value in [*sq[full:], *parts]:
            block += float(value)
        total += block
    return total


def test_the_c_sums_are_in_their_designed_order_whichever_copy_the_processor_runs():
    """The C passes are compiled for AVX2 and for the baseline (target_clones); the order of every sum is the source's,
    not the vector width's, so the gap's bits are the same on every machine."""
    if not model_passes.NATIVE:
        pytest.skip("the C extension is not built here")
    for n in (5, 2048, 10_003):
        a, b, g = vectors(n, 3, seed=n)
        want = designed_sq_dist(a, b)
        assert model_passes.sq_dist(a, b) == want
        assert model_passes.step(a, g, -0.1, (a, b))[1] == want


def test_every_pass_sums_the_gap_to_the_same_bits():
    """The gap of one pair of vectors is the same float64 whichever pass measured it (sq_dist, a step, momentum, a
    lerp, SHAT's mirror): a run's logged gaps do not depend on which server half took them."""
    if not model_passes.NATIVE:
        pytest.skip("the C extension is not built here")
    theta, sent, g = vectors(10_000, 3, seed=10)  # several blocks
    want = model_passes.sq_dist(theta, sent)
    assert model_passes.step(theta, g, -0.1, (theta, sent))[1] == want
    assert model_passes.momentum(theta, g, g, 0.9, -1.0, b=0.1, gap_of=sent)[2] == want
    assert model_passes.lerp(theta, g, 0.3, sent)[2] == want
    assert model_passes.mirrored(theta, sent, g, -0.1, -0.1, 0.5)[2] == want
    assert model_passes.delay_compensated(g, theta, sent, 0.04)[1] == want
    assert model_passes.momentum_sum(theta, g, g, sent, 0.9, -1.0, b=0.1, gap_of=sent)[3] == want
    idx = torch.arange(0, 10_000, 7)
    assert model_passes.sparse_difference(theta, sent, idx, g[idx])[1] == want


def test_momentum_with_a_running_sum_of_the_velocities(way):
    """DANA's Σ_j u_j kept beside u_key's step: total' = total + (u' − u), u' = γ·u + η·g, θ' = θ − u'."""
    theta, u, g, total, sent = vectors(2500, 5, seed=13)
    theta2, u2, total2, sq = model_passes.momentum_sum(theta, u, g, total, 0.9, -1.0, b=0.05, gap_of=sent)
    torch.testing.assert_close(u2, 0.9 * u + 0.05 * g, rtol=0, atol=1e-7)
    torch.testing.assert_close(total2, total + (u2 - u), rtol=0, atol=0)
    torch.testing.assert_close(theta2, theta - u2, rtol=0, atol=0)
    assert sq == pytest.approx(float(((theta.double() - sent.double()) ** 2).sum()), rel=1e-12)


def test_the_delay_compensated_gradient_is_dc_asgds(way):
    """ĝ = g + λ·g⊙g⊙(θ − θ_sent), against the rule in float64."""
    g, theta, sent = vectors(3000, 3, seed=12)
    before = [t.clone() for t in (g, theta, sent)]
    ghat, sq = model_passes.delay_compensated(g, theta, sent, 0.04)
    G, T, S = (t.double() for t in (g, theta, sent))
    torch.testing.assert_close(ghat.double(), G + 0.04 * G * G * (T - S), rtol=1e-6, atol=1e-6)
    assert sq == pytest.approx(float(((T - S) ** 2).sum()), rel=1e-12)
    assert all(torch.equal(t, t0) for t, t0 in zip((g, theta, sent), before))


def dgs_state(n: int, seed: int) -> tuple[torch.Tensor, ...]:
    """M, v_k (M some updates ago: they differ on a few coordinates), an update's ascending indices and values."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(n, generator=g)
    m = v.clone()
    behind = torch.randperm(n, generator=g)[: max(1, n // 20)]
    m[behind] += torch.randn(behind.numel(), generator=g)
    idx = torch.randperm(n, generator=g)[: max(1, n // 50)].sort().values
    return m, v, idx, torch.randn(idx.numel(), generator=g)


@pytest.mark.parametrize("n", [1, 2047, 2048, 2049, 10_000])
def test_the_dgs_step_subtracts_the_update_and_sends_m_minus_v_where_it_is_not_zero(way, n):
    """DGS's master (Alg. 2): M' = M − δ (as index_add with alpha −1 rounds it), G = M' − v_k's nonzero entries in
    ascending order, Σ (M − v_k)² before the update; the inputs are left alone."""
    m, v, idx, values = dgs_state(n, seed=n)
    before = [t.clone() for t in (m, v, idx, values)]
    m2, sq, where, g = model_passes.sparse_difference(m, v, idx, values)
    assert torch.equal(m2, m.index_add(0, idx, values, alpha=-1))
    d = m2 - v
    assert torch.equal(where, torch.nonzero(d).squeeze(1)) and torch.equal(g, d[where])
    assert sq == pytest.approx(float(((m.double() - v.double()) ** 2).sum()), rel=1e-12)
    assert all(torch.equal(t, t0) for t, t0 in zip((m, v, idx, values), before))
    # G's entries are tensors of their own size (a reply waiting for its client holds nothing model-sized)
    assert where.untyped_storage().nbytes() == where.numel() * 8 and g.untyped_storage().nbytes() == g.numel() * 4


def test_the_dgs_step_takes_indices_out_of_order_or_repeated_as_index_add_does(way):
    m, v, _, _ = dgs_state(3000, seed=3)
    idx = torch.tensor([2999, 5, 5, 0, 2048])
    values = torch.tensor([1.0, 0.25, 0.5, -2.0, 3.0])
    m2, _, where, g = model_passes.sparse_difference(m, v, idx, values)
    assert torch.equal(m2, m.index_add(0, idx, values, alpha=-1))
    assert torch.equal(where, torch.nonzero(m2 - v).squeeze(1)) and torch.equal(g, (m2 - v)[where])


def test_the_dgs_step_sends_what_cancels_nowhere_and_a_nan_as_an_entry(way):
    """An update that brings M back to v_k on a coordinate sends nothing there; a NaN (a diverged master) is sent,
    as M − v_k's would be."""
    v = torch.zeros(100)
    m = v.clone()
    m[[3, 40]] = torch.tensor([0.5, float("nan")])
    m2, sq, where, g = model_passes.sparse_difference(m, v, torch.tensor([3, 7]), torch.tensor([0.5, -1.0]))
    assert where.tolist() == [7, 40] and g[0] == 1.0 and torch.isnan(g[1]) and math.isnan(sq)
    m2, sq, where, g = model_passes.sparse_difference(v, v, torch.zeros(0, dtype=torch.int64), torch.zeros(0))
    assert where.numel() == 0 and g.numel() == 0 and sq == 0.0 and torch.equal(m2, v) and m2 is not v
