"""`check_dataset`: a dataset loader loaded as a run loads it (runtime/bookkeeping/workload.py: every client
loads it on its own machine) and trained on:

- loads: the scenario's `dataset: {name, args}` validates and its loader returns an ArrayDataset;
- arrays: both splits non-empty, uint8 images (N, H, W) or (N, C, H, W) of one shape, int64 labels in
  [0, num_classes), as many as images, and a mean and std the runtimes can normalise with;
- deterministic load: two loads give the same arrays (clients that loaded different data would split it
  differently);
- trains: a tiny simulator run on it (two clients, FedAvg, a small CNN for any image size) lowers the test loss.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from edgesync.config import Scenario, ScenarioError, load_scenario
from edgesync.data.arrays import ArrayDataset, to_tensor
from edgesync.data.datasets import load_dataset
from edgesync.metrics.recorder import METRICS_FILE
from edgesync.testing import tiny_task
from edgesync.testing.rules import ARRAYS, DETERMINISTIC_LOAD, LOADS, TRAINS, ContractViolation
from edgesync.testing.tiny_task import ANY_SIZE_MODEL, TRAIN_SIZE, rows

FIELDS = ("train_x", "train_y", "test_x", "test_y", "num_classes", "mean", "std")


def check_dataset(name: str, *, args: dict[str, Any] | None = None) -> None:
    """Check a dataset loader against the contract; ContractViolation names the first rule it breaks. `name`
    and `args` as a scenario's `dataset:` section gives them (a `package.module:loader` reference, an entry
    point's or a built-in name)."""
    sc = _loaded(name, args)
    what = f"dataset {sc.dataset.id!r}"
    first = _load(sc, what)
    _check_arrays(first, what)
    _check_same(first, _load(sc, what), what)
    _check_trains(sc, what)


def _loaded(name: str, args: dict[str, Any] | None) -> Scenario:
    section = {"name": name, **({"args": args} if args else {}), "train_size": TRAIN_SIZE}
    try:
        return load_scenario(tiny_task.scenario("sim", dataset=section, model={"name": ANY_SIZE_MODEL}))
    except ScenarioError as exc:
        raise ContractViolation(LOADS, f"the tiny task's scenario refuses dataset {section}: {exc}") from None


def _load(sc: Scenario, what: str) -> ArrayDataset:
    try:
        return load_dataset(sc.dataset.id, sc.dataset.root)
    except Exception as exc:  # noqa: BLE001 - the loader's failure, whatever it is, is the finding
        raise ContractViolation(LOADS, f"{what} cannot be loaded: {type(exc).__name__}: {exc}") from exc


def _check_arrays(data: ArrayDataset, what: str) -> None:
    for split in ("train", "test"):
        x, y = getattr(data, f"{split}_x"), getattr(data, f"{split}_y")
        if not (isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim in (3, 4)):
            shown = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
            raise ContractViolation(ARRAYS, f"{what}: {split}_x is {shown}, expected uint8 images (N, H, W) or "
                                            "(N, C, H, W)")
        if not (isinstance(y, np.ndarray) and y.dtype == np.int64 and y.ndim == 1):
            shown = f"{y.dtype} {y.shape}" if isinstance(y, np.ndarray) else type(y).__name__
            raise ContractViolation(ARRAYS, f"{what}: {split}_y is {shown}, expected int64 labels (N,)")
        if len(x) == 0 or len(x) != len(y):
            raise ContractViolation(ARRAYS, f"{what}: the {split} split has {len(x)} images and {len(y)} labels, "
                                            "expected as many of each, at least one")
        if not isinstance(data.num_classes, int) or data.num_classes < 2:
            raise ContractViolation(ARRAYS, f"{what}: num_classes is {data.num_classes!r}, expected an int ≥ 2")
        low, high = int(y.min()), int(y.max())
        if low < 0 or high >= data.num_classes:
            raise ContractViolation(ARRAYS, f"{what}: {split}_y holds labels {low} to {high}, outside [0, "
                                            f"{data.num_classes}) of its num_classes {data.num_classes}")
        try:
            normalised = to_tensor(x[:2], data.mean, data.std)
        except ValueError as exc:
            raise ContractViolation(ARRAYS, f"{what}: the runtimes cannot normalise its {split} images: {exc}") from None
        if not np.isfinite(normalised.numpy()).all():
            raise ContractViolation(ARRAYS, f"{what}: its std {data.std!r} makes normalised {split} images "
                                            "non-finite")
    if data.train_x.shape[1:] != data.test_x.shape[1:]:
        raise ContractViolation(ARRAYS, f"{what}: train images are {data.train_x.shape[1:]}, test images "
                                        f"{data.test_x.shape[1:]}: one shape for both")


def _check_same(first: ArrayDataset, second: ArrayDataset, what: str) -> None:
    for field in FIELDS:
        a, b = getattr(first, field), getattr(second, field)
        same = np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
        if not same:
            raise ContractViolation(DETERMINISTIC_LOAD, f"two loads of {what} differ in {field}: every client loads "
                                                        "it on its own machine, so a loader must give the same data "
                                                        "each time (seed what it draws)")


def _check_trains(sc: Scenario, what: str) -> None:
    with tiny_task.run_folders(None, "dataset") as folder:
        try:
            tiny_task.run_simulated(sc, folder / "run")
        except Exception as exc:  # noqa: BLE001
            raise ContractViolation(TRAINS, f"a tiny simulator run on {what} failed: {type(exc).__name__}: "
                                            f"{exc}") from exc
        metrics = rows(folder / "run", METRICS_FILE)
    first, last = metrics[0], metrics[-1]
    if not last["test_loss"] < first["test_loss"]:
        raise ContractViolation(TRAINS, f"a tiny simulator run on {what} (two clients, FedAvg, {last['updates']} "
                                        f"rounds) did not lower the test loss: {first['test_loss']} at the start, "
                                        f"{last['test_loss']} at the end: do the test labels follow the same rule "
                                        "as the training labels?")
