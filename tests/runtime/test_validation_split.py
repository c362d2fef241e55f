"""The validation set `tune` holds out of the training data: disjoint from every client's split, drawn from
the training arrays only (never the test set), stratified, and the same for every call, entry and seed."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from edgesync.data.datasets import to_tensor
from edgesync.data.partition import partition
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.bookkeeping.workload import (VALIDATION_SPLIT_SEED, client_splits, prepare_workload, scenario_dataset,
                                       validation_indices, validation_split)
from edgesync.config import load_scenario


def scenario(tune: dict | None = {"grid": {"lr": [0.05]}, "validation_size": 97}, **extra):
    data = {"name": "split", "seed": 1, "runtime": "sim", "dataset": {"name": "fashion_mnist", "train_size": 1000},
            "clients": 3, "algorithms": [{"name": "asgd"}], "eval": {"test_size": 200}, **extra}
    if tune is not None:
        data["tune"] = tune
    return load_scenario(data)


@pytest.fixture(scope="module")
def labels():
    return scenario_dataset(scenario().dataset).train_y


def test_the_split_is_stratified_sorted_and_exactly_the_size_asked_for():
    labels = np.repeat(np.arange(4), [50, 30, 15, 5])  # 100 samples, uneven classes
    held = validation_split(labels, 20)
    assert len(held) == 20 and len(np.unique(held)) == 20 and np.all(np.diff(held) > 0)
    assert held.min() >= 0 and held.max() < len(labels)
    # each class its share of 20: 10, 6, 3, 1
    assert np.bincount(labels[held], minlength=4).tolist() == [10, 6, 3, 1]
    # largest remainders round up: 7 of 100 → 3.5, 2.1, 1.05, 0.35 → 3, 2, 1, 0 plus one for class 0 (0.5)
    assert np.bincount(labels[validation_split(labels, 7)], minlength=4).tolist() == [4, 2, 1, 0]


def test_the_split_depends_on_its_own_seed_only(labels):
    a, b = validation_split(labels, 97), validation_split(labels, 97)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, validation_split(labels, 97, seed=VALIDATION_SPLIT_SEED + 1))
    # every run seed, and every entry, holds out the same samples
    held = [validation_indices(scenario(seed=s, algorithms=[{"name": n}]), labels)
            for s, n in [(0, "asgd"), (1, "ssgd"), (7, "dgs")]]
    assert all(np.array_equal(held[0], h) for h in held[1:]) and np.array_equal(held[0], a)


@pytest.mark.parametrize("extra", [
    {},
    {"partition": {"kind": "dirichlet", "alpha": 0.3}},
    {"partition": {"kind": "shards", "shards_per_client": 2}},
    {"clients": ["x1", {"partition": {"kind": "dirichlet"}}, "x1"]},  # two groups: pools shuffled first
    {"partition": {"kind": "flwr", "partitioner": "DirichletPartitioner",  # flwr-datasets' (data/flwr_partitioners.py)
                   "args": {"alpha": 0.3, "partition_by": "label"}}},
], ids=["iid", "dirichlet", "shards", "two-groups", "flwr"])
def test_no_client_trains_on_a_validation_sample(labels, extra):
    for seed in (0, 1, 5):
        sc = scenario(**{"seed": seed, **extra})
        held = validation_indices(sc, labels)
        splits = client_splits(sc, labels)
        assert len(held) == 97
        assert set(held) <= set(range(len(labels)))  # the original training indices
        used = np.concatenate(splits)
        assert not set(used) & set(held)
        assert len(used) == len(set(used))  # still disjoint between clients
        if "partition" not in extra and "clients" not in extra:  # iid: equal shares of every sample left
            left = set(range(len(labels))) - set(held)
            assert set(used) <= left and len(left) - len(used) < len(splits)


def test_without_tune_nothing_is_held_out_and_the_splits_are_unchanged(labels):
    sc = scenario(tune=None)
    assert len(validation_indices(sc, labels)) == 0
    # what client_splits gave before validation sets existed: the partitioner on every training sample
    before = [np.sort(part) for part in partition(labels, 3, "iid", seed=sc.seed)]
    assert all(np.array_equal(a, b) for a, b in zip(client_splits(sc, labels), before))


def test_the_fraction_sizes_the_set_and_defaults_to_a_tenth(labels):
    assert len(validation_indices(scenario({"grid": {"lr": [0.1]}}), labels)) == 100
    assert len(validation_indices(scenario({"grid": {"lr": [0.1]}, "validation_fraction": 0.25}), labels)) == 250


def test_a_tuning_run_evaluates_on_training_samples_and_a_final_run_on_the_test_set():
    data = scenario_dataset(scenario().dataset)
    tuning = prepare_workload(scenario(eval={"test_size": 200, "on": "validation"}))
    base = scenario()
    held = validation_indices(base, data.train_y)
    assert tuning.eval_on == "validation" and len(tuning.eval_y) == 97
    assert torch.equal(tuning.eval_x, to_tensor(data.train_x[held], data.mean, data.std))
    assert torch.equal(tuning.eval_y, torch.as_tensor(data.train_y[held]))
    final = prepare_workload(base)
    assert final.eval_on == "test" and len(final.eval_y) == 200
    assert torch.equal(final.eval_x, to_tensor(data.test_x[:200], data.mean, data.std))
    # the validation images are training images, not test images
    test_images = {img.tobytes() for img in data.test_x}
    assert not any(data.train_x[i].tobytes() in test_images for i in held)
    # both runs' clients train on the same samples, none of them held out
    for work in (tuning, final):
        assert not set(np.concatenate(work.splits)) & set(held)
    assert all(np.array_equal(a, b) for a, b in zip(tuning.splits, final.splits))


def test_a_validation_set_as_large_as_the_training_data_is_refused(labels):
    with pytest.raises(ValueError, match=r"tune: a validation set of 1000 samples .* 1,000 training samples.*"
                                         r"train_size: 1000"):
        validation_indices(scenario({"grid": {"lr": [0.1]}, "validation_size": 1000}), labels)


def test_the_live_coordinator_holds_out_the_same_samples_and_tests_on_them(loopback):
    """Live clients train on the indices the coordinator sends: those of client_splits, validation excluded."""
    run = loopback(tune={"grid": {"lr": [0.05]}, "validation_size": 97},
                   eval={"every_s": 0.5, "test_size": 200, "on": "validation"},
                   algorithms=[{"name": "asgd", "lr": 0.05}]).start()
    run.join()
    assert run.error is None and not run.client_errors
    labels = scenario_dataset(run.scenario.dataset).train_y
    held = validation_indices(run.scenario, labels)
    sent = run.coordinator.phases.splits
    assert all(np.array_equal(a, b) for a, b in zip(sent, client_splits(run.scenario, labels)))
    assert not set(np.concatenate(sent)) & set(held)
    rows = read_jsonl(run.run_dir / "metrics.jsonl")
    assert len(rows) >= 2 and all(abs(r["test_acc"] * 97 - round(r["test_acc"] * 97)) < 1e-3 for r in rows)
    assert run.coordinator.workload.eval_on == "validation" and len(run.coordinator.workload.eval_y) == 97
