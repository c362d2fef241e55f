"""Split a labelled dataset among clients: i.i.d., label-sorted shards, ESync's sorted slices, Dirichlet(α),
or the data's natural users (LEAF's writers and roles).

`partition` returns one int64 index array per client, each sorted ascending (clients shuffle their own
data every epoch; sorted parts make equality checks and caching simple). Seeded with
``np.random.default_rng(seed)``: the same inputs always give the same parts.

- ``iid``: one uniform shuffle cut into equal parts; the remainder (n mod N samples) is dropped.
- ``shards`` (McMahan et al. 2017): sort by label, cut into N·shards_per_client equal shards (the
  remainder is dropped), give each client shards_per_client shards drawn at random.
- ``sorted_slices`` (ESync's non-i.i.d. split): sort by label, cut into N contiguous slices whose sizes
  differ by at most one; nothing is dropped and the seed is not used.
- ``dirichlet``: per class, shuffle its samples and split them among clients with proportions
  p ~ Dir(α·1_N). Every client is then guaranteed ≥ 1 sample by a repair rule: while some client is
  empty, move one random sample from the currently largest client to it (needs N ≤ n, checked).
- ``natural``: one client per natural id (a LEAF user), given per sample by `groups`; a client's part is
  exactly its user's samples. With fewer clients than ids, `natural_users` draws which ids take part:
  ``np.random.default_rng(seed).choice(ids, N, replace=False)``, then sorted, so client i gets the i-th
  smallest drawn id; with as many clients as ids every id takes part and the seed is not used. More
  clients than ids is an error. The other kinds ignore `groups`.
- ``flwr``: a partitioner of flwr-datasets, named by `partitioner` and called with `partitioner_args`, over
  the columns label and (when `groups` is given) user; see flwr_partitioners.py for the seed, the
  preshuffle and what EdgeSync sets. `alpha` and `shards_per_client` are not used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from edgesync.data.flwr_partitioners import FLWR_KIND, flwr_partition

PARTITION_KINDS = ("iid", "shards", "sorted_slices", "dirichlet", "natural", FLWR_KIND)
NEEDS_GROUPS = ("natural",)  # the kinds that split by each sample's natural id, not by label


def partition(
    labels: np.ndarray,
    num_clients: int,
    kind: str,
    seed: int,
    alpha: float = 0.5,
    shards_per_client: int = 2,
    groups: np.ndarray | None = None,
    partitioner: str | None = None,
    partitioner_args: Mapping[str, Any] | None = None,
    preshuffle: bool = True,
) -> list[np.ndarray]:
    """Split sample indices 0..len(labels)-1 among num_clients clients; see the module docstring.

    `groups` (natural, where it is required, and flwr, where it is optional) gives each sample's natural id,
    aligned with labels. `partitioner`, `partitioner_args` and `preshuffle` are kind flwr's."""
    labels = _check(labels, num_clients, kind)
    if kind == FLWR_KIND:
        if partitioner is None:
            raise ValueError("partition kind flwr needs the name of a flwr-datasets partitioner")
        return flwr_partition(labels, num_clients, partitioner, partitioner_args, seed, groups, preshuffle)
    if kind == "natural":
        groups = _check_groups(groups, labels)
        users = natural_users(groups, num_clients, seed)
        return [np.flatnonzero(groups == user).astype(np.int64) for user in users]
    rng = np.random.default_rng(seed)
    if kind == "iid":
        parts = _iid(len(labels), num_clients, rng)
    elif kind == "shards":
        parts = _shards(labels, num_clients, shards_per_client, rng)
    elif kind == "sorted_slices":
        parts = np.array_split(np.argsort(labels, kind="stable"), num_clients)
    else:
        parts = _dirichlet(labels, num_clients, alpha, rng)
    return [np.sort(p).astype(np.int64, copy=False) for p in parts]


def natural_users(groups: np.ndarray, num_clients: int, seed: int) -> np.ndarray:
    """The natural id each client gets, sorted (int64, one per client): every id present in groups when
    there are as many clients, else a seeded draw of num_clients of them (see the module docstring)."""
    ids = np.unique(np.asarray(groups))
    if num_clients > len(ids):
        raise ValueError(f"partition kind natural: {num_clients} clients but the data has {len(ids)} natural ids "
                         f"(users); use at most {len(ids)} clients, one per user")
    if num_clients == len(ids):
        return ids.astype(np.int64)
    drawn = np.random.default_rng(seed).choice(ids, size=num_clients, replace=False)
    return np.sort(drawn).astype(np.int64)


def label_histogram(labels: np.ndarray, parts: list[np.ndarray], num_classes: int) -> np.ndarray:
    """Count of each label per client: (num_clients, num_classes) int64."""
    labels = np.asarray(labels)
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels span {labels.min()}..{labels.max()}, expected 0..{num_classes - 1}")
    hist = np.zeros((len(parts), num_classes), dtype=np.int64)
    for i, p in enumerate(parts):
        hist[i] = np.bincount(labels[p], minlength=num_classes)
    return hist


def _check(labels: np.ndarray, num_clients: int, kind: str) -> np.ndarray:
    labels = np.asarray(labels)
    if kind not in PARTITION_KINDS:
        raise ValueError(f"unknown partition kind {kind!r}; known kinds: {', '.join(PARTITION_KINDS)}")
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be a 1-D integer array, got {labels.dtype} of shape {labels.shape}")
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    if num_clients > len(labels):
        raise ValueError(f"num_clients={num_clients} exceeds the {len(labels)} samples; every client needs one")
    return labels


def _check_groups(groups: np.ndarray | None, labels: np.ndarray) -> np.ndarray:
    if groups is None:
        raise ValueError("partition kind natural needs each sample's natural id (its user), and this dataset has "
                         "no natural ids: use a dataset with users (LEAF's femnist, shakespeare, sent140, celeba) or "
                         "another kind")
    groups = np.asarray(groups)
    if groups.shape != labels.shape or not np.issubdtype(groups.dtype, np.integer):
        raise ValueError(f"groups must be a 1-D integer array with one id per sample ({len(labels)}), got "
                         f"{groups.dtype} of shape {groups.shape}")
    return groups


def _iid(n: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    size = n // num_clients
    perm = rng.permutation(n)
    return [perm[i * size : (i + 1) * size] for i in range(num_clients)]


def _shards(
    labels: np.ndarray, num_clients: int, shards_per_client: int, rng: np.random.Generator
) -> list[np.ndarray]:
    num_shards = num_clients * shards_per_client
    if shards_per_client < 1 or num_shards > len(labels):
        raise ValueError(
            f"shards_per_client={shards_per_client} with {num_clients} clients needs 1 <= "
            f"{num_shards} shards <= {len(labels)} samples"
        )
    size = len(labels) // num_shards
    by_label = np.argsort(labels, kind="stable")
    shard_ids = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
    return [np.concatenate([by_label[s * size : (s + 1) * size] for s in ids]) for ids in shard_ids]


def _dirichlet(labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
    if not alpha > 0:
        raise ValueError(f"dirichlet alpha must be > 0, got {alpha}")
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        p = rng.dirichlet(np.full(num_clients, alpha))
        cuts = (np.cumsum(p)[:-1] * len(idx)).astype(np.int64)
        for i, chunk in enumerate(np.split(idx, cuts)):
            parts[i].append(chunk)
    out = [np.concatenate(p) for p in parts]
    for i in range(num_clients):  # repair rule: no client is left empty
        if len(out[i]) == 0:
            donor = int(np.argmax([len(p) for p in out]))  # has >= 2 samples since N <= n
            j = int(rng.integers(len(out[donor])))
            out[i] = out[donor][j : j + 1]
            out[donor] = np.delete(out[donor], j)
    return out
