"""Top-k selection: k_for, exact and sampled top-k, select; hand-computed expectations."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesync.compression import k_for, select, topk_indices


def _idx(values) -> list[int]:
    return [int(i) for i in values]


# --- k_for -------------------------------------------------------------------------------------

@pytest.mark.parametrize("numel, rate, expected", [
    (100, 1.0, 100),      # dense
    (100, 2.0, 100),      # above 1 is still dense
    (100, 0.01, 1),
    (100, 0.015, 1),      # floor
    (100, 0.29, 29),      # 0.29 * 100 = 28.999... in floats: still 29
    (1000, 1e-9, 1),      # tiny rate keeps one entry
    (1, 0.001, 1),
    (11_000_000, 0.001, 11_000),
    (0, 0.5, 0),          # nothing to keep
])
def test_k_for(numel, rate, expected):
    assert k_for(numel, rate) == expected


@pytest.mark.parametrize("rate", [0.0, -0.1, float("nan")])
def test_k_for_rejects_bad_rate(rate):
    with pytest.raises(ValueError, match="rate"):
        k_for(10, rate)


# --- exact -------------------------------------------------------------------------------------

def test_exact_small_vector():
    x = torch.tensor([0.1, -3.0, 2.0, 0.5, -0.2, 4.0])
    out = topk_indices(x, 3)
    assert out.dtype == torch.int64
    assert _idx(out) == [1, 2, 5]          # |x| = 3, 2, 4; sorted by index


@pytest.mark.parametrize("method", ["exact", "sampled"])
def test_ties_keep_exactly_k(method):
    x = torch.tensor([1.0, -1.0, 1.0, 1.0, 0.5])
    out = topk_indices(x, 2, method, sample_size=2)
    assert len(out) == 2
    assert set(_idx(out)) <= {0, 1, 2, 3}  # any two of the tied ones, never the 0.5
    assert _idx(out) == sorted(set(_idx(out)))


@pytest.mark.parametrize("method", ["exact", "sampled"])
def test_all_zero(method):
    out = topk_indices(torch.zeros(50_000), 10, method)
    assert len(out) == 10
    assert len(set(_idx(out))) == 10


@pytest.mark.parametrize("method", ["exact", "sampled"])
@pytest.mark.parametrize("k", [4, 5, 9])
def test_k_at_least_numel_returns_all(method, k):
    assert _idx(topk_indices(torch.tensor([3.0, 0.0, -1.0, 2.0]), k, method)) == [0, 1, 2, 3]


@pytest.mark.parametrize("method", ["exact", "sampled"])
def test_empty_and_zero_k(method):
    assert topk_indices(torch.zeros(0), 3, method).numel() == 0
    assert topk_indices(torch.ones(5), 0, method).numel() == 0


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="flat"):
        topk_indices(torch.ones(2, 3), 1)
    with pytest.raises(ValueError, match="method"):
        topk_indices(torch.ones(3), 1, "fastest")


# --- select ------------------------------------------------------------------------------------

def test_select_dense_path_and_rate():
    x = torch.tensor([0.0, 5.0, -6.0, 1.0])
    assert _idx(select(x, 1.0)) == [0, 1, 2, 3]
    assert _idx(select(x, 0.5)) == [1, 2]
    assert _idx(select(x, 0.01)) == [2]    # k_for gives 1


# --- per layer (dgs.txt Alg. 1-3: a threshold per parameter tensor) ---------------------------

# three tensors, flat: [10, 9, 8, 7 | 0.1, 0.2 | -0.05, 0.3, 0.01, 0.02]
LAYERED = torch.tensor([10.0, 9.0, 8.0, 7.0, 0.1, 0.2, -0.05, 0.3, 0.01, 0.02])
SIZES = (4, 2, 4)


@pytest.mark.parametrize("method", ["exact", "sampled"])
@pytest.mark.parametrize("rate, global_, per_layer", [
    # k = max(1, floor(R·n)): globally 2 of 10; per layer 1 of 4, 1 of 2 (floor 0.5 → 1), 1 of 4
    (0.25, [0, 1], [0, 5, 7]),
    # globally 5 of 10: the first tensor and 0.3; per layer 2, 1 and 2: the small tensors get their share
    (0.5, [0, 1, 2, 3, 7], [0, 1, 5, 6, 7]),
])
def test_select_per_layer_keeps_each_tensors_own_top_k(method, rate, global_, per_layer):
    assert _idx(select(LAYERED, rate, method)) == global_
    assert _idx(select(LAYERED, rate, method, sizes=SIZES)) == per_layer
    assert _idx(select(LAYERED, rate, method, sizes=())) == global_  # () = one layer


def test_select_per_layer_dense_path_and_bad_sizes():
    assert _idx(select(LAYERED, 1.0, sizes=SIZES)) == list(range(10))
    assert _idx(select(LAYERED, 0.1, sizes=(10,))) == [0]
    assert _idx(select(LAYERED, 0.1, sizes=(4, 0, 2, 4))) == [0, 5, 7]  # an empty tensor keeps nothing
    with pytest.raises(ValueError, match="sizes"):
        select(LAYERED, 0.1, sizes=(4, 2))


def test_sampled_per_layer_finds_each_layers_exact_top_k():
    x = torch.randn(80_030, generator=torch.Generator().manual_seed(2))
    sizes = (50_000, 30, 30_000)
    exact = select(x, 0.01, "exact", sizes=sizes)
    sampled = select(x, 0.01, "sampled", generator=torch.Generator().manual_seed(0), sizes=sizes)
    assert exact.numel() == 500 + 1 + 300
    assert torch.equal(sampled, exact)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 40), min_size=1, max_size=6), rate=st.floats(1e-3, 0.99), seed=st.integers(0, 99))
def test_select_per_layer_property(sizes, rate, seed):
    x = torch.randn(sum(sizes), generator=torch.Generator().manual_seed(seed))
    got = select(x, rate, sizes=tuple(sizes))
    assert _idx(got) == sorted(set(_idx(got)))
    offset = 0
    for n in sizes:  # every tensor: exactly its own k, its largest entries
        mine = got[(got >= offset) & (got < offset + n)] - offset
        assert mine.numel() == k_for(n, rate)
        if 0 < mine.numel() < n:
            part = x[offset:offset + n].abs()
            mask = torch.zeros(n, dtype=torch.bool)
            mask[mine] = True
            assert part[mask].min() >= part[~mask].max()
        offset += n


# --- sampled on a large vector -----------------------------------------------------------------

@pytest.mark.parametrize("rate", [0.01, 0.001])
def test_sampled_density_and_overlap(rate):
    x = torch.randn(1_000_000, generator=torch.Generator().manual_seed(0))
    k = k_for(x.numel(), rate)
    exact = set(_idx(topk_indices(x, k)))
    for seed in range(3):
        out = topk_indices(x, k, "sampled", generator=torch.Generator().manual_seed(seed))
        assert len(out) <= k
        assert abs(len(out) / k - 1) <= 0.2          # density within ±20% of requested
        assert len(exact & set(_idx(out))) >= 0.8 * k
        assert _idx(out) == sorted(set(_idx(out)))


def test_sampled_is_reproducible_with_generator():
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(1))
    a = topk_indices(x, 100, "sampled", generator=torch.Generator().manual_seed(5))
    b = topk_indices(x, 100, "sampled", generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


def test_sampled_heavy_ties_keeps_k():
    # 99% zeros and a block of equal magnitudes: the threshold lands on a tie.
    x = torch.zeros(200_000)
    x[:2000] = 1.0
    x[1000:2000] = -1.0
    out = topk_indices(x, 500, "sampled", generator=torch.Generator().manual_seed(0))
    assert len(out) == 500
    assert int(out.max()) < 2000


# --- property ----------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=0, max_size=300),
       rate=st.floats(1e-4, 1.0))
def test_select_property(values, rate):
    x = torch.tensor(values, dtype=torch.float32)
    out = select(x, rate)
    got = _idx(out)
    assert got == sorted(set(got))
    assert len(got) <= k_for(x.numel(), rate)    # 0 for an empty vector
    if got and len(got) < x.numel():
        mask = torch.zeros(x.numel(), dtype=torch.bool)
        mask[out] = True
        assert x.abs()[mask].min() >= x.abs()[~mask].max()
