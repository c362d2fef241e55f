"""Client data splits: sizes, disjointness, coverage, determinism and the label mix of each kind."""

from __future__ import annotations

import numpy as np
import pytest

from edgesync.data.partition import NEEDS_GROUPS, PARTITION_KINDS, label_histogram, partition

NUM_CLASSES = 10
# the kinds that split by label alone; natural needs each sample's user (tests/data/test_leaf.py), flwr the name
# of a flwr-datasets partitioner (tests/data/test_flwr_partitioners.py)
LABEL_KINDS = tuple(k for k in PARTITION_KINDS if k not in NEEDS_GROUPS + ("flwr",))


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    """6000 labels, 600 per class, in shuffled order like a real training set."""
    return np.random.default_rng(123).permutation(np.repeat(np.arange(NUM_CLASSES), 600)).astype(np.int64)


@pytest.mark.parametrize("kind", LABEL_KINDS)
@pytest.mark.parametrize("num_clients", [1, 7, 20])
def test_disjoint_nonempty_int64(labels: np.ndarray, kind: str, num_clients: int) -> None:
    parts = partition(labels, num_clients, kind, seed=0)
    assert len(parts) == num_clients
    assert all(p.dtype == np.int64 and p.ndim == 1 and len(p) > 0 for p in parts)
    assert all(np.all(np.diff(p) > 0) for p in parts)  # sorted ascending, no repeats
    joined = np.concatenate(parts)
    assert len(np.unique(joined)) == len(joined)  # disjoint
    assert joined.min() >= 0 and joined.max() < len(labels)


@pytest.mark.parametrize("kind", LABEL_KINDS)
def test_deterministic_per_seed(labels: np.ndarray, kind: str) -> None:
    a = partition(labels, 10, kind, seed=5)
    b = partition(labels, 10, kind, seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    if kind != "sorted_slices":  # the only kind that uses no randomness
        c = partition(labels, 10, kind, seed=6)
        assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_iid_sizes_and_mix(labels: np.ndarray) -> None:
    parts = partition(labels, 7, "iid", seed=1)
    assert [len(p) for p in parts] == [6000 // 7] * 7  # remainder 6000 % 7 = 1 dropped
    hist = label_histogram(labels, parts, NUM_CLASSES)
    frac = hist / hist.sum(axis=1, keepdims=True)
    assert np.all(np.abs(frac - 0.1) < 0.05)  # 857 samples per client: each class ≈ 10 %


def test_shards_labels_per_client(labels: np.ndarray) -> None:
    parts = partition(labels, 20, "shards", seed=2)
    assert [len(p) for p in parts] == [300] * 20  # 40 shards of 150
    hist = label_histogram(labels, parts, NUM_CLASSES)
    # each shard of 150 lies within one class (600 per class = 4 shards), so <= 2 labels per client
    assert np.all((hist > 0).sum(axis=1) <= 2)
    assert np.array_equal(hist.sum(axis=0), np.full(NUM_CLASSES, 600))  # 40·150 = all 6000 covered


def test_shards_per_client_setting(labels: np.ndarray) -> None:
    parts = partition(labels, 10, "shards", seed=2, shards_per_client=3)
    assert [len(p) for p in parts] == [3 * (6000 // 30)] * 10
    assert np.all((label_histogram(labels, parts, NUM_CLASSES) > 0).sum(axis=1) <= 3)


def test_sorted_slices_contiguous_labels(labels: np.ndarray) -> None:
    parts = partition(labels, 7, "sorted_slices", seed=0)
    assert sum(len(p) for p in parts) == len(labels)  # nothing dropped
    assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1
    spans = [(labels[p].min(), labels[p].max()) for p in parts]
    assert all(lo <= hi for lo, hi in spans)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))  # client i's labels precede i+1's
    hist = label_histogram(labels, parts, NUM_CLASSES)
    assert np.all((hist > 0).sum(axis=1) <= 3)  # 857 samples span at most 3 classes of 600


def test_sorted_slices_ten_clients_one_class_each(labels: np.ndarray) -> None:
    hist = label_histogram(labels, partition(labels, 10, "sorted_slices", seed=0), NUM_CLASSES)
    np.testing.assert_array_equal(hist, np.diag(np.full(NUM_CLASSES, 600)))


def _mean_tv_from_uniform(labels: np.ndarray, parts: list[np.ndarray]) -> float:
    hist = label_histogram(labels, parts, NUM_CLASSES)
    frac = hist / hist.sum(axis=1, keepdims=True)
    return float(np.mean(0.5 * np.abs(frac - 1 / NUM_CLASSES).sum(axis=1)))


def test_dirichlet_alpha_controls_skew(labels: np.ndarray) -> None:
    skewed = partition(labels, 10, "dirichlet", seed=3, alpha=0.1)
    uniform = partition(labels, 10, "dirichlet", seed=3, alpha=1000.0)
    for parts in (skewed, uniform):
        assert sum(len(p) for p in parts) == len(labels)  # nothing dropped
    assert _mean_tv_from_uniform(labels, skewed) > 0.5
    assert _mean_tv_from_uniform(labels, uniform) < 0.05


def test_dirichlet_never_leaves_a_client_empty() -> None:
    labels = np.repeat(np.arange(2), 15).astype(np.int64)  # 30 samples, 2 classes
    for seed in range(20):
        parts = partition(labels, 30, "dirichlet", seed=seed, alpha=0.01)  # as many clients as samples
        assert [len(p) for p in parts] == [1] * 30


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((10, "random", 0), "unknown partition kind 'random'.*iid"),
        ((0, "iid", 0), "num_clients must be >= 1"),
        ((6001, "iid", 0), "6001.*6000 samples"),
    ],
)
def test_bad_arguments(labels: np.ndarray, args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        partition(labels, *args)


def test_bad_alpha_and_shards(labels: np.ndarray) -> None:
    with pytest.raises(ValueError, match="alpha"):
        partition(labels, 4, "dirichlet", seed=0, alpha=0.0)
    with pytest.raises(ValueError, match="shards"):
        partition(labels, 4000, "shards", seed=0)  # 8000 shards > 6000 samples
    with pytest.raises(ValueError, match="1-D integer"):
        partition(labels.astype(np.float32), 4, "iid", seed=0)


def test_label_histogram_counts() -> None:
    labels = np.array([0, 1, 1, 2, 2, 2])
    hist = label_histogram(labels, [np.array([0, 1]), np.array([2, 3, 4, 5])], num_classes=4)
    np.testing.assert_array_equal(hist, [[1, 1, 0, 0], [0, 1, 3, 0]])
    with pytest.raises(ValueError, match="0..1"):
        label_histogram(labels, [np.arange(6)], num_classes=2)
