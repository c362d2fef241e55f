"""flwr-datasets' partitioners as the partition kind `flwr`: `{kind: flwr, partitioner: DirichletPartitioner,
args: {alpha: 0.3, partition_by: label}}` splits the training set with flwr_datasets.partitioner's class of that
name, called with `args` as keyword arguments.

What a partitioner sees: a `datasets.Dataset` of the samples the clients of one partition group share (their
pool; client_splits in runtime/bookkeeping/workload.py), with the columns
- `label`: the sample's training label (int64);
- `user`: its natural id (LEAF's user), only for datasets that have them (`groups` given);
- `index`: its position in the pool, which maps each partition back to sample indices.
`partition_by` and the other column names in `args` name `label` or `user`.

EdgeSync supplies, and `args` may not give:
- `num_partitions`: the number of clients of the group. Partitioners that derive the number of partitions
  from their data or arguments (NaturalIdPartitioner: one per id; SizePartitioner: one per size) take none,
  and must then make exactly as many partitions as there are clients.
`args` may give `seed` (an integer): every partitioner accepts it here. The seed is `args.seed` when given,
else the seed EdgeSync passes (the scenario's seed plus the group's number, as for every kind); it is handed
to partitioners whose constructor takes `seed` and it drives the preshuffle.

Preshuffle (on unless `preshuffle` is false): the rows are shuffled with `Dataset.shuffle(seed=seed)`, the
order ``np.random.default_rng(seed).permutation(n)``, before partitioning, which is what flwr-datasets'
FederatedDataset does with its default `shuffle=True`, so a partitioner sees the data as under Flower. IidPartitioner, for one, cuts the rows in their
order and has no seed of its own: without the preshuffle its parts are contiguous runs of the pool.

Each client's part is its partition's `index` column, sorted ascending (int64), as `partition` returns.
A partition with no samples is an error: every EdgeSync client needs one.
"""
from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

FLWR_KIND = "flwr"
# flwr_datasets.partitioner's horizontal partitioners (they split samples) whose arguments are JSON values
USABLE = ("ContinuousPartitioner", "DirichletPartitioner", "DistributionPartitioner", "ExponentialPartitioner",
          "GroupedNaturalIdPartitioner", "IidPartitioner", "InnerDirichletPartitioner", "LinearPartitioner",
          "NaturalIdPartitioner", "PathologicalPartitioner", "ShardPartitioner", "SizePartitioner",
          "SquarePartitioner")
NOT_USABLE = {  # the rest of flwr_datasets.partitioner.__all__, and why
    "IdToSizeFncPartitioner": "takes a Python function (partition_id_to_size_fn), which a scenario cannot give; "
                              "LinearPartitioner, SquarePartitioner and ExponentialPartitioner are its usable forms",
    "VerticalEvenPartitioner": "splits columns (vertical federated learning), not samples",
    "VerticalSizePartitioner": "splits columns (vertical federated learning), not samples",
    "Partitioner": "the abstract base class",
}
COLUMNS = ("label", "user")  # the columns a partitioner may name; `user` only where the dataset has natural ids
SET_BY_EDGESYNC = ("num_partitions",)
ARRAY_ARGS = {"DistributionPartitioner": ("distribution_array",)}  # a nested list in args, made a NumPy array


def usable_names() -> str:
    return ", ".join(USABLE)


def partitioner_class(name: str) -> type:
    """flwr_datasets.partitioner's class `name` (imported here: flwr-datasets takes seconds to import)."""
    if name not in USABLE:
        why = f" ({NOT_USABLE[name]})" if name in NOT_USABLE else ""
        raise ValueError(f"partition.partitioner: {name!r} is not a usable flwr-datasets partitioner{why}; "
                         f"usable: {usable_names()}")
    from flwr_datasets import partitioner

    return getattr(partitioner, name)


def check_args(name: str, args: Mapping[str, Any]) -> None:
    """What can be checked before the data is known: the partitioner exists, every key of `args` is one of its
    constructor's arguments (or `seed`), none is EdgeSync's, every required one is there, column names exist."""
    params = _parameters(partitioner_class(name))
    for key in SET_BY_EDGESYNC:
        if key in args:
            raise ValueError(f"partition.args.{key}: EdgeSync sets it to the number of clients that share the "
                             "partition; remove it")
    unknown = sorted(set(args) - set(params) - {"seed"})
    if unknown:
        own = [k for k in params if k not in SET_BY_EDGESYNC and k != "seed"]
        raise ValueError(f"partition.args.{unknown[0]}: {name} takes no such argument; it takes "
                         f"{', '.join(own) + ' and ' if own else 'only '}seed")
    missing = [k for k, p in params.items()
               if p.default is inspect.Parameter.empty and k not in args and k not in SET_BY_EDGESYNC]
    if missing:
        raise ValueError(f"partition.args: {name} needs {', '.join(missing)}")
    seed = args.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"partition.args.seed: must be an integer, got {seed!r} (runs replay exactly: "
                         "flwr-datasets' seed None, a fresh unpredictable draw, is refused)")
    column = args.get("partition_by")
    if "partition_by" in params and column not in COLUMNS:
        raise ValueError(f"partition.args.partition_by: {column!r} is no column EdgeSync gives a partitioner; "
                         f"columns: label, user (datasets with natural ids only)")


def flwr_partition(labels: np.ndarray, num_clients: int, name: str, args: Mapping[str, Any] | None, seed: int,
                   groups: np.ndarray | None = None, preshuffle: bool = True) -> list[np.ndarray]:
    """Split indices 0..len(labels)-1 among num_clients clients with flwr-datasets' partitioner `name`; see the
    module docstring. Errors of flwr-datasets are ValueErrors that name `partition.args` and the partitioner."""
    args = dict(args or {})
    check_args(name, args)
    cls = partitioner_class(name)
    params = _parameters(cls)
    where = f"partition.args of flwr-datasets' {name} ({_shown(args)}; {num_clients} clients)"
    seed = int(args.pop("seed", seed))
    kwargs = {k: np.asarray(v) if k in ARRAY_ARGS.get(name, ()) else v for k, v in args.items()}
    if "num_partitions" in params:
        kwargs["num_partitions"] = num_clients
    if "seed" in params:
        kwargs["seed"] = seed
    dataset = _dataset(labels, groups, seed if preshuffle else None, args.get("partition_by"))
    try:
        with warnings.catch_warnings():  # datasets' sort asks pyarrow with an option pyarrow 25 deprecates
            warnings.filterwarnings("ignore", "Specifying null_placement", FutureWarning)
            part = cls(**kwargs)
            part.dataset = dataset
            made = part.num_partitions
            if made != num_clients:
                raise ValueError(f"it makes {made} partitions for {num_clients} clients: the scenario needs "
                                 f"{made} clients sharing this partition, or other arguments")
            parts = [part.load_partition(i)[:]["index"].to_numpy() for i in range(num_clients)]
    except (ValueError, TypeError, KeyError, AssertionError) as exc:
        raise ValueError(f"{where}: {type(exc).__name__}: {exc}") from exc
    empty = [i for i, p in enumerate(parts) if len(p) == 0]
    if empty:
        hint = "; raise min_partition_size" if "min_partition_size" in params else ""
        raise ValueError(f"{where}: client(s) {', '.join(map(str, empty[:10]))} got no samples, and every client "
                         f"needs one{hint}")
    return [np.sort(p).astype(np.int64) for p in parts]


def _parameters(cls: type) -> dict[str, inspect.Parameter]:
    params = dict(inspect.signature(cls.__init__).parameters)
    params.pop("self", None)
    return params


def _dataset(labels: np.ndarray, groups: np.ndarray | None, seed: int | None, partition_by: str | None):
    """The rows a partitioner sees (arrow-formatted: flwr-datasets reads whole columns, which is fast on arrow
    and a row-by-row loop on datasets 4's default format)."""
    import datasets

    labels = np.asarray(labels)
    n = len(labels)
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != labels.shape or not np.issubdtype(groups.dtype, np.integer):
            raise ValueError(f"groups must be a 1-D integer array with one id per sample ({n}), got "
                             f"{groups.dtype} of shape {groups.shape}")
    elif partition_by == "user":
        raise ValueError("partition.args.partition_by: user, but this dataset has no natural ids (users): use a "
                         "dataset with users (LEAF's femnist, shakespeare, sent140, celeba) or partition_by: label")
    columns = {"index": np.arange(n, dtype=np.int64), "label": labels.astype(np.int64)}
    if groups is not None:
        columns["user"] = groups.astype(np.int64)
    dataset = datasets.Dataset.from_dict(columns).with_format("arrow")
    # FederatedDataset's shuffle exactly: an indices mapping over the rows in their order (Dataset.unique, which
    # GroupedNaturalIdPartitioner's groups follow, reads the rows in that order, not the shuffled one)
    return dataset if seed is None else dataset.shuffle(seed=seed)


def _shown(args: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items()) or "no args"
