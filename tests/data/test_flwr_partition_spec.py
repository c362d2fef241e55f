"""Partition kind `flwr` in a scenario: the keys it takes and refuses, its errors, its seed, and its splits
through client_splits (a validation hold-out excluded from every client)."""
from __future__ import annotations

import numpy as np
import pytest

from edgesync.config import ScenarioError, load_scenario
from edgesync.config.data import PartitionSpec
from edgesync.data.flwr_partitioners import USABLE
from edgesync.data.partition import partition
from edgesync.runtime.bookkeeping.workload import client_splits, validation_indices

DIRICHLET = {"kind": "flwr", "partitioner": "DirichletPartitioner",
             "args": {"alpha": 0.3, "partition_by": "label", "min_partition_size": 5}}
LABELS = np.random.default_rng(5).permutation(np.repeat(np.arange(10), 100)).astype(np.int64)


def scenario(partition_spec: dict | None = None, tune: dict | None = None, **extra):
    data = {"name": "flwr", "seed": 1, "runtime": "sim", "dataset": {"name": "fashion_mnist", "train_size": 1000},
            "clients": 4, "algorithms": [{"name": "asgd"}], **extra}
    if partition_spec is not None:
        data["partition"] = partition_spec
    if tune is not None:
        data["tune"] = tune
    return load_scenario(data)


def refused(spec: dict) -> str:
    with pytest.raises(ScenarioError) as info:
        scenario(spec)
    return str(info.value)


def test_a_flwr_partition_loads_and_its_dump_loads_again():
    sc = scenario(DIRICHLET)
    assert sc.partition.partitioner == "DirichletPartitioner" and sc.partition.args["alpha"] == 0.3
    assert PartitionSpec(**sc.partition.model_dump()) == sc.partition
    assert PartitionSpec(**scenario().partition.model_dump()) == PartitionSpec()  # iid's defaults: no flwr key


def test_an_unknown_partitioner_lists_the_usable_ones():
    message = refused({"kind": "flwr", "partitioner": "DirichletPartitionr"})
    assert "'DirichletPartitionr' is not a usable flwr-datasets partitioner" in message
    assert all(name in message for name in USABLE)
    assert "splits columns" in refused({"kind": "flwr", "partitioner": "VerticalEvenPartitioner"})
    assert "needs partitioner, one of: " in refused({"kind": "flwr"})


def test_num_partitions_is_edgesyncs():
    message = refused({"kind": "flwr", "partitioner": "IidPartitioner", "args": {"num_partitions": 4}})
    assert "partition.args.num_partitions: EdgeSync sets it to the number of clients" in message


@pytest.mark.parametrize("key,value", [("partitioner", "IidPartitioner"), ("args", {"alpha": 0.3}),
                                       ("preshuffle", False)])
def test_the_flwr_keys_are_refused_outside_kind_flwr(key, value):
    for kind in ("iid", "dirichlet", "natural"):
        assert f"partition.{key} is only for kind flwr" in refused({"kind": kind, key: value})


@pytest.mark.parametrize("key,value", [("alpha", 0.3), ("shards_per_client", 3)])
def test_our_keys_are_refused_with_kind_flwr(key, value):
    message = refused({**DIRICHLET, key: value})
    assert f"partition.{key} is for EdgeSync's own kinds; kind flwr takes the partitioner's arguments in args" in message


@pytest.mark.parametrize("args,expected", [
    ({"alpha": 0.3, "partition_by": "label", "alpah": 1}, "partition.args.alpah: DirichletPartitioner takes no such "
                                                          "argument; it takes partition_by, alpha, min_partition_size"),
    ({"alpha": 0.3}, "partition.args: DirichletPartitioner needs partition_by"),
    ({"alpha": 0.3, "partition_by": "target"}, "partition.args.partition_by: 'target' is no column"),
    ({"alpha": 0.3, "partition_by": "label", "seed": None}, "partition.args.seed: must be an integer"),
])
def test_args_are_checked_when_the_scenario_loads(args, expected):
    assert expected in refused({"kind": "flwr", "partitioner": "DirichletPartitioner", "args": args})


@pytest.mark.parametrize("args,theirs", [
    ({"alpha": -1.0, "partition_by": "label"}, "Alpha values should be strictly greater than zero"),
    ({"partition_by": "label", "num_classes_per_partition": 11}, "is greater than the number of unique classes"),
])
def test_flwr_datasets_own_errors_come_wrapped_with_the_key(args, theirs):
    name = "DirichletPartitioner" if "alpha" in args else "PathologicalPartitioner"
    sc = scenario({"kind": "flwr", "partitioner": name, "args": args})  # valid names: flwr-datasets judges values
    with pytest.raises(ValueError) as info:
        client_splits(sc, LABELS)
    assert str(info.value).startswith(f"partition.args of flwr-datasets' {name} (")
    assert theirs in str(info.value)


def test_a_user_column_needs_a_dataset_with_users():
    sc = scenario({"kind": "flwr", "partitioner": "NaturalIdPartitioner", "args": {"partition_by": "user"}})
    with pytest.raises(ValueError, match="partition_by: user, but this dataset has no natural ids"):
        client_splits(sc, LABELS)
    users = np.arange(1000) % 4
    assert [set(users[s]) for s in client_splits(sc, LABELS, users)] == [{0}, {1}, {2}, {3}]


def test_the_seed_is_the_scenarios_unless_args_give_one():
    split = lambda run_seed, **args: client_splits(  # noqa: E731
        scenario({**DIRICHLET, "args": {**DIRICHLET["args"], **args}}, seed=run_seed), LABELS)
    same = lambda a, b: all(np.array_equal(x, y) for x, y in zip(a, b))  # noqa: E731
    assert same(split(1), split(1)) and not same(split(1), split(2))
    assert same(split(1, seed=7), split(2, seed=7))
    # the scenario's seed reaches flwr-datasets as it reaches our kinds (group 0: seed + 0)
    assert same(split(3), partition(LABELS, 4, "flwr", seed=3, partitioner="DirichletPartitioner",
                                    partitioner_args=DIRICHLET["args"]))


@pytest.mark.parametrize("spec", [
    DIRICHLET,
    {"kind": "flwr", "partitioner": "IidPartitioner"},
    {"kind": "flwr", "partitioner": "ShardPartitioner", "preshuffle": False,
     "args": {"partition_by": "label", "num_shards_per_partition": 2}},
    {"kind": "flwr", "partitioner": "SizePartitioner", "args": {"partition_sizes": [100, 200, 300, 303]}},
], ids=["dirichlet", "iid", "shards", "sizes"])
def test_no_client_trains_on_a_validation_sample(spec):
    sc = scenario(spec, tune={"grid": {"lr": [0.05]}, "validation_size": 97})
    held = validation_indices(sc, LABELS)
    splits = client_splits(sc, LABELS)
    assert len(held) == 97 and len(splits) == 4 and all(len(s) for s in splits)
    used = np.concatenate(splits)
    assert not set(used) & set(held) and len(used) == len(set(used))
    assert all(s.dtype == np.int64 and np.all(np.diff(s) > 0) for s in splits)
    if spec["partitioner"] in ("IidPartitioner", "SizePartitioner"):  # they use every sample left
        assert len(used) == 1000 - 97


def test_clients_with_their_own_flwr_partition_get_their_own_pool():
    clients = ["x1", "x1", {"partition": DIRICHLET}, {"partition": DIRICHLET}]
    sc = scenario(clients=clients, tune={"grid": {"lr": [0.05]}, "validation_size": 50})
    splits = client_splits(sc, LABELS)
    used = np.concatenate(splits)
    assert len(used) == len(set(used)) and not set(used) & set(validation_indices(sc, LABELS))
