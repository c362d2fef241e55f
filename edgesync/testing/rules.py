"""The rules the kit checks, by the names its messages start with, and the one exception a broken rule raises."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

# Algorithms (algorithm.py)
LOADS = "loads"                                   # resolves and validates as a scenario's entry
RUNS = "runs to its stop rule"                    # a run ends at stop.max_updates, neither failed nor diverged
REPLAY = "replay determinism"                     # two simulator runs with one seed write the same rows
RUNTIMES = "rows across runtimes"                 # the simulator and live loopback write rows of the same keys
LOST_CLIENT = "a lost client returns"             # a client that leaves and comes back trains again
RESUME = "resume from a checkpoint"               # a run stopped after a checkpoint goes on from it

# Models (model.py)
BUILDS = "builds"                                 # builds as a scenario's model entry with its args would
OUTPUT_SHAPE = "output shape"                     # a batch of the tiny task's images gives [B, num_classes]
SEEDED_INIT = "seeded initial weights"            # the same seed builds the same θ₀
TRAINS_A_STEP = "trains a step"                   # one SGD step runs and changes the weights
ROUND_TRIP = "state round trip"                   # state_dict and the flat vectors the runtimes send restore it

# Datasets (dataset.py)
ARRAYS = "arrays"                                 # uint8 images, int64 labels in range, both splits, non-empty
DETERMINISTIC_LOAD = "deterministic load"         # two loads give the same arrays (each client loads its own)
TRAINS = "trains"                                 # a tiny simulator run on it lowers the test loss

# Device profiles (profile.py)
PARSES = "parses"                                 # parses as a scenario's client profile would
FACTORS = "factors"                               # positive and finite draws; a mean factor of at least 1
REPRODUCIBLE_DRAWS = "reproducible draws"         # one (seed, rank) gives one sequence of factors
MEAN_FACTOR = "mean factor"                       # the draws average to mean_factor (time-invariant kinds)
LEAST_NEXT = "least next factor"                  # least_next() is a lower bound of the next draw
TRAVELS = "travels"                               # pickled, or dumped to a live client and parsed there, it is itself


class ContractViolation(AssertionError):
    """An extension broke a rule of the contract: the message starts with the rule's name, then what differed."""

    def __init__(self, rule: str, detail: str):
        super().__init__(f"{rule}: {detail}")
        self.rule, self.detail = rule, detail

    def __reduce__(self):  # pickled (a pytest-xdist worker's report) with both arguments
        return type(self), (self.rule, self.detail)


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[int, str, Any, Any] | None:
    """(row index, column, value in `a`, value in `b`) of the first cell where two row lists differ; a missing
    row or column reads as '<none>'. None when they are equal."""
    missing = "<none>"
    for index in range(max(len(a), len(b))):
        row_a = a[index] if index < len(a) else {}
        row_b = b[index] if index < len(b) else {}
        for column in [*row_a, *(k for k in row_b if k not in row_a)]:
            value_a, value_b = row_a.get(column, missing), row_b.get(column, missing)
            if value_a != value_b:
                return index, column, value_a, value_b
    return None


def first_difference_in(a: Any, b: Any, path: str = "state") -> str | None:
    """Where two saved states first differ ("state['params']", "state['records'][0].round"), None if nowhere:
    tensors and arrays element by element, containers, dataclasses and objects member by member."""
    if isinstance(a, (torch.Tensor, np.ndarray)) or isinstance(b, (torch.Tensor, np.ndarray)):
        same = (type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
                and (torch.equal(a, b) if isinstance(a, torch.Tensor) else np.array_equal(a, b, equal_nan=True)))
        return None if same else path
    if type(a) is not type(b):
        return path
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path} (keys {sorted(map(repr, a.keys() ^ b.keys()))})"
        parts = [(f"{path}[{k!r}]", a[k], b[k]) for k in a]
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path} (length {len(a)} against {len(b)})"
        parts = [(f"{path}[{i}]", x, y) for i, (x, y) in enumerate(zip(a, b))]
    elif isinstance(a, np.random.Generator):
        return None if a.bit_generator.state == b.bit_generator.state else path
    elif dataclasses.is_dataclass(a) or hasattr(a, "__dict__"):
        members_a, members_b = _members(a), _members(b)
        parts = [(f"{path}.{k}", v, members_b.get(k)) for k, v in members_a.items()]
    else:
        return None if a == b or (a != a and b != b) else path  # NaN is NaN
    return next((found for p, x, y in parts if (found := first_difference_in(x, y, p)) is not None), None)


def _members(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return vars(obj)
