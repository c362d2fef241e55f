"""What a run trains: data splits per client, the initial model, a client's trainer, evaluation data.

Shared by the coordinator (which splits the data and owns θ₀) and the clients (which build trainers
from what the coordinator sends), so both sides agree on every detail.

A scenario with `tune:` holds a validation set out of the training data (`validation_indices`): a
stratified sample (each class in proportion) drawn with a fixed seed, VALIDATION_SPLIT_SEED, not the
run's, so every entry, seed and run of the scenario holds out the same samples. Its clients train only
on the rest (`client_splits`), in the tuning runs and in the final runs alike; the tuning runs
(`eval.on: validation`) evaluate on it, the final runs on the test set.

A `natural` partition (LEAF's datasets) gives each client one user's training samples, less any held out
for validation; `client_test_splits` gives it that user's test samples, for per-client evaluation.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from edgesync.algorithms.machinery.base import ModelState
from edgesync.runtime.bookkeeping.client_eval import ClientEvalSets, client_eval_sets
from edgesync.data.datasets import ArrayDataset, load_dataset, to_tensor
from edgesync.data.partition import NEEDS_GROUPS, natural_users, partition
from edgesync.models import build_model
from edgesync.params import get_buffers, get_params
from edgesync.config import Scenario
from edgesync.config.data import DatasetSpec, PartitionSpec
from edgesync.config.tune import DEFAULT_VALIDATION_FRACTION
from edgesync.trainer import StepHook, Trainer

_DEVICE_RE = re.compile(r"cpu|auto|cuda(?::(\d+))?")  # what a scenario's or `edgesync client`'s device may be


@lru_cache(maxsize=2)
def dataset(name: str, root: str | None, train_size: int | None) -> ArrayDataset:
    data = load_dataset(name, root)
    if train_size is not None and train_size < len(data.train_y):
        data.train_x, data.train_y = data.train_x[:train_size], data.train_y[:train_size]
        if data.train_groups is not None:  # each kept sample keeps its user (LEAF's: the first users, whole)
            data.train_groups = data.train_groups[:train_size]
    return data


def scenario_dataset(spec: DatasetSpec) -> ArrayDataset:
    return dataset(spec.id, spec.root, spec.train_size)


VALIDATION_SPLIT_SEED = 0x7A11D  # the validation split's own seed: the same split whatever the run's seed


def validation_split(labels: np.ndarray, size: int, seed: int = VALIDATION_SPLIT_SEED) -> np.ndarray:
    """`size` indices into `labels`, sorted, stratified: each class gets its share of `size` (largest
    remainders round up, ties to the lower class), its samples drawn at random with `seed`."""
    if not 1 <= size < len(labels):
        raise ValueError(f"a validation set of {size} samples needs 1 ≤ size < the {len(labels):,} training "
                         "samples, and some left to train on")
    classes, counts = np.unique(labels, return_counts=True)
    quota = counts * size / len(labels)
    take = np.floor(quota).astype(np.int64)
    order = np.argsort(-(quota - take), kind="stable")
    take[order[:size - int(take.sum())]] += 1
    rng = np.random.default_rng(seed)
    chosen = [rng.permutation(np.flatnonzero(labels == c))[:k] for c, k in zip(classes, take)]
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def validation_size(scenario: Scenario, n_train: int) -> int:
    """How many training samples the scenario's `tune` holds out (0 without `tune`)."""
    tune = scenario.tune
    if tune is None:
        return 0
    if tune.validation_size is not None:
        return tune.validation_size
    return max(1, round((tune.validation_fraction or DEFAULT_VALIDATION_FRACTION) * n_train))


def validation_indices(scenario: Scenario, labels: np.ndarray) -> np.ndarray:
    """The training-set indices the scenario holds out for validation; none without `tune`."""
    size = validation_size(scenario, len(labels))
    if size == 0:
        return np.empty(0, dtype=np.int64)
    try:
        return validation_split(labels, size)
    except ValueError as exc:
        raise ValueError(f"tune: {exc} (dataset.train_size: {scenario.dataset.train_size})") from None


def client_splits(scenario: Scenario, labels: np.ndarray, users: np.ndarray | None = None) -> list[np.ndarray]:
    """Training-sample indices for each client, never one of the validation set (`validation_indices`).

    Clients that share a partition spec form a group. With one group (the usual case) the
    scenario's partitioner splits the whole training set (less the validation set). With several (some
    clients have their own `partition:`), it is first shuffled into disjoint pools sized by group, then
    each pool is split among its group by that group's partitioner: splits stay disjoint.

    `users` is each training sample's natural id (the dataset's train_groups, aligned with labels), which a
    `natural` partition needs; it splits the whole training set by user, so it cannot share it with a group.
    A `flwr` partition (a flwr-datasets partitioner) sees the pool's labels and, where given, users.
    """
    specs, groups = _partition_groups(scenario)
    rng = np.random.default_rng([scenario.seed, 0xDA7A])
    trainable = trainable_indices(scenario, labels)
    if len(groups) == 1:
        pools = [trainable]
    else:
        order = trainable[rng.permutation(len(trainable))]
        sizes = [len(members) * len(trainable) // len(specs) for members in groups.values()]
        pools = np.split(order, np.cumsum(sizes)[:-1])
    splits: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * len(specs)
    for (key, members), pool, g in zip(groups.items(), pools, range(len(groups))):
        spec = specs[members[0]]
        parts = partition(labels[pool], len(members), spec.kind, seed=scenario.seed + g,
                          alpha=spec.alpha, shards_per_client=spec.shards_per_client,
                          groups=None if users is None else users[pool], partitioner=spec.partitioner,
                          partitioner_args=spec.args, preshuffle=spec.preshuffle)
        for rank, part in zip(members, parts):
            splits[rank] = np.sort(pool[part]).astype(np.int64)
    return splits


def _partition_groups(scenario: Scenario) -> tuple[list[PartitionSpec], dict[str, list[int]]]:
    """Each client's partition spec, and the clients that share one (spec as JSON -> ranks), checked."""
    specs: list[PartitionSpec] = [c.partition or scenario.partition for c in scenario.clients]
    groups: dict[str, list[int]] = {}
    for rank, spec in enumerate(specs):
        groups.setdefault(spec.model_dump_json(), []).append(rank)
    if len(groups) > 1 and any(spec.kind in NEEDS_GROUPS for spec in specs):
        raise ValueError("partition kind natural gives every client its own user's samples and cannot share the "
                         "training set with clients of another partition: give all clients one natural partition")
    return specs, groups


def trainable_indices(scenario: Scenario, labels: np.ndarray) -> np.ndarray:
    """The training-set indices the clients may train on: all but the validation set, sorted."""
    # without a validation set this is every index, and client_splits' pools are what they always were
    return np.setdiff1d(np.arange(len(labels)), validation_indices(scenario, labels))


def client_users(scenario: Scenario, data: ArrayDataset) -> np.ndarray | None:
    """The natural id (an index into data.group_names) each client's samples are from, for a `natural`
    partition; None for any other. The same draw as client_splits: users with a trainable sample, seed + 0."""
    specs, _ = _partition_groups(scenario)
    if specs[0].kind not in NEEDS_GROUPS:  # natural is all the clients' partition or none's
        return None
    if data.train_groups is None:
        raise ValueError(f"partition kind natural: dataset {data.name} has no natural ids (users)")
    pool = trainable_indices(scenario, data.train_y)
    return natural_users(data.train_groups[pool], len(scenario.clients), scenario.seed)


def client_test_splits(scenario: Scenario, data: ArrayDataset) -> list[np.ndarray] | None:
    """For a `natural` partition, each client's test-set indices: all its user's test samples (the whole
    test set, not cut to eval.test_size; empty for a user LEAF put in train only); None for any other."""
    users = client_users(scenario, data)
    if users is None:
        return None
    assert data.test_groups is not None, "a dataset with train_groups has test_groups"
    return [np.flatnonzero(data.test_groups == user).astype(np.int64) for user in users]


def initial_model(scenario: Scenario, data: ArrayDataset) -> ModelState:
    """θ₀ from the scenario's seed: every algorithm of a run starts from the same model."""
    torch.manual_seed(scenario.seed)
    model = build_model(scenario.model.id, num_classes=data.num_classes, in_channels=data.input_shape[0])
    return ModelState(params=get_params(model), buffers=get_buffers(model),
                      sizes=tuple(p.numel() for p in model.parameters()))


@dataclass
class Workload:
    """What a coordinating runtime prepares before any client trains: the data, every client's split,
    θ₀ and the set it evaluates on. One preparation for the live coordinator, the simulator and
    Flower, so they split, initialise and evaluate identically."""

    data: ArrayDataset
    splits: list[np.ndarray]
    initial: ModelState
    # (N, C, H, W), normalised (token data: (N, L) indices): the test set, or (eval.on: validation) the
    # validation set
    eval_x: torch.Tensor
    eval_y: torch.Tensor  # (N,)
    eval_on: str = "test"
    client_sets: ClientEvalSets | None = None  # what each client's accuracy is measured on at the end (client_eval.py)


def prepare_workload(scenario: Scenario) -> Workload:
    """Load the data, split it, build θ₀ and the evaluation tensors: everything that can fail early.

    The test set is its first `eval.test_size` samples; the validation set is used whole (its size is
    `tune`'s)."""
    data = scenario_dataset(scenario.dataset)
    if scenario.eval.on == "validation":
        held = validation_indices(scenario, data.train_y)
        x, y = data.train_x[held], data.train_y[held]
    else:
        n_test = min(scenario.eval.test_size or len(data.test_y), len(data.test_y))
        x, y = data.test_x[:n_test], data.test_y[:n_test]
    splits = client_splits(scenario, data.train_y, data.train_groups)
    eval_x, eval_y = to_tensor(x, data.mean, data.std), torch.as_tensor(y, dtype=torch.int64)
    # a tuning run measures its clients on the validation set too: never on a user's test samples
    own_tests = client_test_splits(scenario, data) if scenario.eval.on == "test" else None
    return Workload(data, splits, initial_model(scenario, data), eval_x, eval_y, scenario.eval.on,
                    client_eval_sets(data, splits, own_tests, eval_x, eval_y))


def resolve_device(device: str) -> torch.device:
    """A client's torch device from `cpu`, `cuda`, `cuda:N` or `auto` (cuda:0 when a CUDA GPU is usable, else cpu).

    A malformed name is a ValueError, a GPU this machine does not have a RuntimeError; both say what was
    asked for, so a lab finds the mistake at set-up rather than as a CUDA error in the middle of a run.
    """
    m = _DEVICE_RE.fullmatch(device) if isinstance(device, str) else None
    if m is None:
        raise ValueError(f"device must be cpu, cuda:N or auto, got {device!r}")
    if device == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"device {device!r} was asked for but this machine has no usable CUDA GPU")
    index, count = int(m.group(1) or 0), torch.cuda.device_count()
    if index >= count:  # CUDA_VISIBLE_DEVICES renumbers the GPUs a process sees from 0
        usable = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
        raise RuntimeError(f"device {device!r} was asked for but this machine has {count} usable CUDA "
                           f"GPU{'s' if count != 1 else ''} ({usable})")
    return torch.device("cuda", index)


def trainer_seed(seed: int, rank: int) -> int:
    """The seed of client `rank`'s mini-batch sampling: the same live, in the simulator and under Flower."""
    return seed * 1000 + rank


def make_trainer(data: ArrayDataset, model_name: str, indices: np.ndarray, batch_size: int, seed: int,
                 device: torch.device, hook: StepHook) -> Trainer:
    x = to_tensor(data.train_x[indices], data.mean, data.std).to(device)
    y = torch.as_tensor(data.train_y[indices], dtype=torch.int64).to(device)
    model = build_model(model_name, num_classes=data.num_classes, in_channels=data.input_shape[0])
    return Trainer(model=model, x=x, y=y, batch_size=batch_size, seed=seed, device=device, hook=hook)
