"""What the built-in loaders of a user's own files (hf.py, image_folder.py) share: their `dataset.args` checked,
the path resolved, and a seeded test split where the files have none.

A scenario names such a dataset with its arguments (`dataset: {name: hf, args: {path: …, …}}`); the arguments
travel to every process inside the dataset's id (`hf{"path": …}`, models.model_id) and are checked twice with
the same rules: when the scenario is loaded (config/data.py, so `edgesync validate` names a wrong key) and by
the loader. A relative path is taken from `dataset.root` when one is given, else from the working directory;
$EDGESYNC_DATA is not used (the path says where the files are).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edgesync.data.arrays import DataNotFoundError, explicit_root_error

DEFAULT_TEST_FRACTION = 0.2
DEFAULT_SPLIT_SEED = 0

Args = TypeVar("Args", bound="LoaderArgs")


class LoaderArgs(BaseModel):
    """A built-in loader's arguments: unknown keys refused; each field's description says what it expects."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    test_fraction: float | None = Field(None, gt=0, lt=1, description=(
        f"a number between 0 and 1 (exclusive): the share of samples held out as the test split where the files "
        f"have none (default {DEFAULT_TEST_FRACTION})"))
    split_seed: int = Field(DEFAULT_SPLIT_SEED, description="an integer: the seed of that held-out test split")
    size: tuple[int, int] | None = Field(None, description="[H, W], two positive integers: resize every image to it")
    grayscale: bool | None = Field(None, description=(
        "true (make every image one channel), false (three, RGB) or null (as the images are)"))

    @property
    def fraction(self) -> float:
        return DEFAULT_TEST_FRACTION if self.test_fraction is None else self.test_fraction


def parse_args(cls: type[Args], dataset: str, args: dict[str, Any]) -> Args:
    """`args` checked against `cls`; a ValueError whose lines each name `args.KEY`, what it got and what it
    expects."""
    try:
        parsed = cls(**args)
    except ValidationError as e:
        raise ValueError(f"dataset {dataset}: " + "; ".join(_problems(cls, e))) from None
    if parsed.size is not None and min(parsed.size) < 1:
        raise ValueError(f"dataset {dataset}: args.size: got {list(parsed.size)}; expected "
                         f"{LoaderArgs.model_fields['size'].description}")
    return parsed


def _problems(cls: type[LoaderArgs], error: ValidationError) -> list[str]:
    by_key: dict[str, list[dict]] = {}
    for err in error.errors():
        by_key.setdefault(str(err["loc"][0]) if err["loc"] else "", []).append(err)
    out = []
    for key, errs in by_key.items():
        field = cls.model_fields.get(key)
        expected = field.description if field is not None else ""
        first = errs[0]
        if first["type"] == "extra_forbidden":
            out.append(f"args.{key}: not an argument of this dataset; its arguments: {', '.join(cls.model_fields)}")
        elif first["type"] == "missing":
            out.append(f"args.{key}: required, {expected}")
        elif len(errs) == 1:
            out.append(f"args.{key}: {first['msg'][0].lower()}{first['msg'][1:]} (got {first['input']!r}); "
                       f"expected {expected}")
        else:  # a union: every alternative failed, and the description says them all at once
            out.append(f"args.{key}: got {first['input']!r}; expected {expected}")
    return out


def check_root(root: str | os.PathLike | None, origin: str | None, dataset: str) -> None:
    """A root that was given must be a folder: checked first, as every loader does (arrays.explicit_root_error)."""
    if root is not None and not Path(root).is_dir():
        raise explicit_root_error(root, origin, f"no such directory (dataset {dataset} takes its relative "
                                  "args.path from it)")


def resolve(path: str, root: str | os.PathLike | None, origin: str | None, dataset: str) -> Path:
    """`path` as a Path that exists: relative ones from `root` when given, else from the working directory. A
    DataNotFoundError says where it looked."""
    check_root(root, origin, dataset)
    base = Path(root) if root is not None else Path.cwd()
    found = base / Path(path).expanduser()
    if not found.exists():
        came_from = f"{origin or 'the data root'} {root}" if root is not None else "the working directory"
        raise DataNotFoundError(f"dataset {dataset}: args.path {path}: no such file or directory (looked at "
                                f"{found.resolve()}; a relative path is taken from {came_from})")
    return found


def held_out(groups: np.ndarray, fraction: float, seed: int, what: str) -> np.ndarray:
    """A boolean mask of the samples to test on: in each group (a natural id, or a class) round(fraction·n) of
    its n samples, at least one where n ≥ 2 and never all, so every group keeps samples of both splits; drawn
    with `seed`, so the same files and seed give the same split. `what` the groups are names them in the error
    when none has two samples to split."""
    rng = np.random.default_rng(seed)
    test = np.zeros(len(groups), dtype=bool)
    order = np.argsort(groups, kind="stable")
    starts = np.flatnonzero(np.r_[True, groups[order][1:] != groups[order][:-1]]) if len(groups) else []
    for start, end in zip(starts, [*starts[1:], len(groups)]):
        rows = order[start:end]  # one group's samples, in file order; groups in sorted order
        n = len(rows)
        take = min(max(int(np.floor(fraction * n + 0.5)), 1 if n >= 2 else 0), n - 1)
        test[rng.choice(rows, size=take, replace=False)] = True
    if len(groups) and not test.any():
        raise ValueError(f"no test split in the files, and none can be held out: every {what} has a single sample; "
                         "give a test split, or more samples per " + what)
    return test
