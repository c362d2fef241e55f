"""EdgeSync's own partition kinds against flwr-datasets' partitioners (partition kind `flwr`), on fixed seeds and
labels: identical index sets where the algorithms are the same, the same distribution where only the random
draws differ, and each documented difference asserted as a difference (docs/scenarios.md, "ours vs
flwr-datasets"). Also: the wrapper gives exactly what flwr-datasets gives when used directly.

`flwr_partition(..., seed)` preshuffles the rows with ``np.random.default_rng(seed).permutation(n)`` (as
FederatedDataset does) and passes `seed` to the partitioner; `partition(..., seed)` seeds our kinds with it.
"""
from __future__ import annotations

import inspect
import warnings

import datasets
import flwr_datasets.partitioner
import numpy as np
import pytest

from edgesync.data.flwr_partitioners import NOT_USABLE, USABLE, flwr_partition
from edgesync.data.partition import label_histogram, partition

NUM_CLASSES = 10


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    """600 labels, 60 per class, in shuffled order like a real training set."""
    return np.random.default_rng(123).permutation(np.repeat(np.arange(NUM_CLASSES), 60)).astype(np.int64)


def same_parts(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def flwr(labels, n, name, seed, groups=None, preshuffle=True, **args) -> list[np.ndarray]:
    with warnings.catch_warnings():  # Dirichlet's resampling, Pathological's unused classes: not under test here
        warnings.simplefilter("ignore", UserWarning)
        return flwr_partition(labels, n, name, args, seed, groups=groups, preshuffle=preshuffle)


def test_every_partitioner_of_the_installed_flwr_datasets_is_usable_or_says_why_not():
    assert set(USABLE) | set(NOT_USABLE) == set(flwr_datasets.partitioner.__all__)
    assert not set(USABLE) & set(NOT_USABLE)


USERS = np.random.default_rng(7).integers(0, 10, 600)
DIRECT = {  # a working configuration of each usable partitioner: (clients, args)
    "ContinuousPartitioner": (5, {"partition_by": "label", "strictness": 0.5}),
    "DirichletPartitioner": (5, {"partition_by": "label", "alpha": 0.5, "min_partition_size": 0}),
    "DistributionPartitioner": (10, {"partition_by": "label", "num_unique_labels_per_partition": 2,
                                     "distribution_array": np.random.default_rng(0).lognormal(size=(10, 2)).tolist(),
                                     "preassigned_num_samples_per_label": 5}),
    "ExponentialPartitioner": (5, {}),
    "GroupedNaturalIdPartitioner": (5, {"partition_by": "user", "group_size": 2}),
    "IidPartitioner": (5, {}),
    "InnerDirichletPartitioner": (4, {"partition_by": "label", "alpha": 1.0, "partition_sizes": [100, 150, 150, 200]}),
    "LinearPartitioner": (5, {}),
    "NaturalIdPartitioner": (10, {"partition_by": "user"}),
    "PathologicalPartitioner": (5, {"partition_by": "label", "num_classes_per_partition": 2}),
    "ShardPartitioner": (5, {"partition_by": "label", "num_shards_per_partition": 2}),
    "SizePartitioner": (3, {"partition_sizes": [100, 200, 300]}),
    "SquarePartitioner": (5, {}),
}


@pytest.mark.parametrize("name", USABLE)
def test_the_wrapper_gives_what_flwr_datasets_gives_used_directly(labels, name):
    """Directly: FederatedDataset's shuffle(seed) of a plain (default-format) Dataset, the partitioner with
    num_partitions and seed, load_partition(i)["index"]. The wrapper reads arrow-formatted columns: the same."""
    n, args = DIRECT[name]
    ours = flwr(labels, n, name, 4, groups=USERS, **args)
    cls = getattr(flwr_datasets.partitioner, name)
    kwargs = {k: np.asarray(v) if k == "distribution_array" else v for k, v in args.items()}
    params = inspect.signature(cls).parameters
    kwargs.update({k: v for k, v in (("num_partitions", n), ("seed", 4)) if k in params})
    part = cls(**kwargs)
    part.dataset = datasets.Dataset.from_dict({"index": np.arange(600), "label": labels, "user": USERS}).shuffle(seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        direct = [np.sort(np.asarray(list(part.load_partition(i)["index"]), dtype=np.int64)) for i in range(n)]
    assert same_parts(ours, direct)
    assert all(p.dtype == np.int64 and np.all(np.diff(p) > 0) for p in ours)  # sorted, no repeats


# --- iid vs IidPartitioner ------------------------------------------------------------------------------------


def test_iid_is_identical_when_the_clients_divide_the_samples(labels):
    """Ours: default_rng(seed).permutation(n) cut into equal parts. Theirs: the preshuffle (the same
    permutation) cut into contiguous shards by datasets' Dataset.shard. Same rows, same order."""
    for seed in (0, 5):
        assert same_parts(partition(labels, 6, "iid", seed=seed), flwr(labels, 6, "IidPartitioner", seed))


def test_iid_differs_in_the_remainder_ours_drops_theirs_spreads(labels):
    ours, theirs = partition(labels, 7, "iid", seed=5), flwr(labels, 7, "IidPartitioner", 5)
    assert [len(p) for p in ours] == [85] * 7  # 600 // 7, the 5 left over unused
    assert [len(p) for p in theirs] == [86] * 5 + [85] * 2  # all 600: the first 600 % 7 clients one more
    assert len(np.concatenate(theirs)) == 600 and not same_parts(ours, theirs)


def test_iid_without_preshuffle_is_contiguous_and_ignores_the_seed(labels):
    a = flwr(labels, 6, "IidPartitioner", 1, preshuffle=False)
    assert same_parts(a, [np.arange(i * 100, (i + 1) * 100) for i in range(6)])
    assert same_parts(a, flwr(labels, 6, "IidPartitioner", 2, preshuffle=False))


# --- natural vs NaturalIdPartitioner --------------------------------------------------------------------------


@pytest.mark.parametrize("preshuffle", [True, False])
def test_natural_is_identical_with_one_client_per_user(labels, preshuffle):
    """Both give partition i the i-th smallest id's samples, whole: the order of the rows does not matter."""
    users = np.repeat(np.arange(7), [40, 200, 60, 100, 80, 20, 100])[np.random.default_rng(3).permutation(600)]
    ours = partition(labels, 7, "natural", seed=0, groups=users)
    theirs = flwr(labels, 7, "NaturalIdPartitioner", 9, groups=users, preshuffle=preshuffle, partition_by="user")
    assert same_parts(ours, theirs)


def test_natural_with_fewer_clients_than_users_is_ours_only(labels):
    """Ours draws which users take part; NaturalIdPartitioner makes one partition per id, no fewer."""
    users = np.arange(600) % 7
    assert len(partition(labels, 5, "natural", seed=0, groups=users)) == 5
    with pytest.raises(ValueError, match="it makes 7 partitions for 5 clients"):
        flwr(labels, 5, "NaturalIdPartitioner", 0, groups=users, partition_by="user")


# --- shards vs ShardPartitioner --------------------------------------------------------------------------------

SHARD_ARGS = {"partition_by": "label", "num_shards_per_partition": 2}


@pytest.mark.parametrize("n", [600, 610])
def test_shards_are_identical_without_preshuffle(labels, n):
    """Both sort by label (stably), cut shards of floor(n / (N·s)) samples and give client i the shards
    default_rng(seed).permutation(N·s)[i·s:(i+1)·s]: identical whenever floor(n / size) = N·s."""
    labels = np.concatenate([labels, np.arange(n - 600)])
    for seed in (0, 3):
        ours = partition(labels, 10, "shards", seed=seed, shards_per_client=2)
        assert same_parts(ours, flwr(labels, 10, "ShardPartitioner", seed, preshuffle=False, **SHARD_ARGS))


def test_shards_after_the_preshuffle_have_the_same_labels_not_the_same_samples(labels):
    """The preshuffle reorders the samples within each label, not the label-sorted sequence of labels: each
    client gets the same shard positions, hence the same label counts, from other samples."""
    ours = partition(labels, 10, "shards", seed=3, shards_per_client=2)
    theirs = flwr(labels, 10, "ShardPartitioner", 3, **SHARD_ARGS)
    assert np.array_equal(label_histogram(labels, ours, NUM_CLASSES), label_histogram(labels, theirs, NUM_CLASSES))
    assert not same_parts(ours, theirs)


def test_shards_differ_where_more_shards_fit_than_are_given(labels):
    """100 samples, 15 clients × 2 shards: both cut shards of 3 samples, but 33 fit. Ours uses the first 30
    (the last 10 label-sorted samples are dropped); theirs draws 30 of the 33, dropping 3 random shards."""
    labels = labels[:100]
    ours = partition(labels, 15, "shards", seed=3, shards_per_client=2)
    theirs = flwr(labels, 15, "ShardPartitioner", 3, preshuffle=False, **SHARD_ARGS)
    assert [len(p) for p in ours] == [len(p) for p in theirs] == [6] * 15
    by_label = np.argsort(labels, kind="stable")
    assert set(np.concatenate(ours)) == set(by_label[:90])
    assert set(np.concatenate(theirs)) != set(by_label[:90])


# --- shards vs PathologicalPartitioner -------------------------------------------------------------------------


def test_pathological_gives_classes_not_shards(labels):
    """Pathological: each client exactly k distinct classes (mode random), each class's samples split evenly
    among the clients that drew it; sizes vary and a class no client drew is unused. Ours (shards): equal
    sizes, and a client may get two shards of one class (fewer than s classes) or a shard across two."""
    sizes_vary = unused = ours_not_two = False
    for seed in range(10):
        theirs = flwr(labels, 10, "PathologicalPartitioner", seed, partition_by="label", num_classes_per_partition=2)
        hist = label_histogram(labels, theirs, NUM_CLASSES)
        assert ((hist > 0).sum(axis=1) == 2).all()
        sizes_vary |= len({len(p) for p in theirs}) > 1
        unused |= bool((hist.sum(axis=0) == 0).any())
        ours = partition(labels, 10, "shards", seed=seed, shards_per_client=2)
        assert {len(p) for p in ours} == {60}
        ours_not_two |= bool(((label_histogram(labels, ours, NUM_CLASSES) > 0).sum(axis=1) != 2).any())
    assert sizes_vary and unused and ours_not_two


# --- dirichlet vs DirichletPartitioner -------------------------------------------------------------------------

DIRICHLET = {"alpha": 0.5, "partition_by": "label", "min_partition_size": 0}


def cut_counts(rng: np.random.Generator, n_per_class: int, num_clients: int, alpha: float, ours: bool) -> np.ndarray:
    """Per-class counts (clients × classes) from the shared cut rule: floor(cumsum(p) · n_c) with p ~ Dir(α·1),
    drawn class by class from `rng`; ours draws the class's permutation first from the same stream."""
    rows = []
    for _ in range(NUM_CLASSES):
        if ours:
            rng.permutation(n_per_class)
        p = rng.dirichlet(np.full(num_clients, alpha))
        cuts = (np.cumsum(p)[:-1] * n_per_class).astype(np.int64)
        rows.append(np.diff(np.concatenate([[0], cuts, [n_per_class]])))
    return np.array(rows).T


@pytest.mark.parametrize("seed", [2, 11])
def test_dirichlet_shares_the_cut_rule_not_the_draws(labels, seed):
    """Both cut each class at floor(cumsum(p)·n_c), p ~ Dir(α·1_N), classes in ascending order. Ours draws
    each class's shuffle and p from one stream; theirs draws only p from its own (the preshuffle does the
    shuffling). Each side's label counts are reproduced exactly from its own draws; they differ."""
    ours = partition(labels, 5, "dirichlet", seed=seed, alpha=0.5)
    theirs = flwr(labels, 5, "DirichletPartitioner", seed, **DIRICHLET)
    assert np.array_equal(label_histogram(labels, ours, NUM_CLASSES),
                          cut_counts(np.random.default_rng(seed), 60, 5, 0.5, ours=True))
    assert np.array_equal(label_histogram(labels, theirs, NUM_CLASSES),
                          cut_counts(np.random.default_rng(seed), 60, 5, 0.5, ours=False))
    assert not same_parts(ours, theirs)


def shares(labels, seeds, run) -> np.ndarray:
    """Each client's share of each class, (seeds, clients, classes)."""
    return np.array([label_histogram(labels, run(s), NUM_CLASSES) / 60 for s in seeds])


def test_dirichlet_is_equal_in_distribution_and_self_balancing_is_not(labels):
    """Over 60 seeds, with min_partition_size 0 and no self-balancing (their defaults are 10 and off): the
    class shares have the same mean (1/N, exactly) and variance (≈ (N-1)/(N²(Nα+1)), the Dir marginal's, less
    flooring) and as many empty cells. self_balancing=True (stop giving to a client above n/N) makes the largest
    client smaller and the shares more extreme."""
    seeds = range(60)
    ours = shares(labels, seeds, lambda s: partition(labels, 5, "dirichlet", seed=s, alpha=0.5))
    theirs = shares(labels, seeds, lambda s: flwr(labels, 5, "DirichletPartitioner", s, **DIRICHLET))
    theory = 4 / (25 * (5 * 0.5 + 1))
    assert ours.mean() == pytest.approx(0.2) and theirs.mean() == pytest.approx(0.2)
    assert ours.var() == pytest.approx(theory, rel=0.15) and theirs.var() == pytest.approx(theory, rel=0.15)
    assert ours.var() == pytest.approx(theirs.var(), rel=0.1)
    assert (ours == 0).mean() == pytest.approx((theirs == 0).mean(), abs=0.03)
    balanced = shares(labels, seeds[:30], lambda s: flwr(labels, 5, "DirichletPartitioner", s, **DIRICHLET,
                                                        self_balancing=True))
    largest = lambda x: (x.sum(axis=2) * 60).max(axis=1).mean()  # noqa: E731
    assert largest(balanced) < 0.9 * largest(theirs[:30])
    assert balanced.var() > 1.1 * theirs[:30].var()


def test_dirichlet_empty_clients_ours_repairs_theirs_resamples_or_fails(labels):
    """40 clients, α 0.05: some client gets nothing. Ours moves one sample from the largest client to it;
    theirs with min_partition_size 0 leaves it empty (refused: every client needs a sample), and with its
    default 10 resamples, warning each time, and gives up after 10 tries."""
    assert min(len(p) for p in partition(labels, 40, "dirichlet", seed=0, alpha=0.05)) == 1
    with pytest.raises(ValueError, match="got no samples.*raise min_partition_size"):
        flwr(labels, 40, "DirichletPartitioner", 0, alpha=0.05, partition_by="label", min_partition_size=0)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(ValueError, match="max number of attempts"):
        warnings.simplefilter("always")
        flwr_partition(labels, 40, "DirichletPartitioner", {"alpha": 0.05, "partition_by": "label"}, 0)
    assert sum("min_partition_size" in str(w.message) for w in caught) == 11
