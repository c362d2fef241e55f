"""Hugging Face datasets from local files: the built-in dataset `hf`.

A scenario points at the files and names the columns; nothing is downloaded (the Hub is switched off):

    dataset:
      name: hf
      args: {path: data/writers.parquet, feature: pixels, shape: [28, 28], label: label, natural_id: user}

`path` is a folder `save_to_disk` wrote (a DatasetDict or a single Dataset, read with `datasets.load_from_disk`),
or Parquet, CSV or JSON-lines files (`.parquet`, `.csv`, `.json`/`.jsonl`, gzip'd too; read with
`datasets.load_dataset`): one path or glob, a list of them (all training data), or a mapping `{train: …,
test: …}`. `python -m edgesync.data --dataset hf --args '{"path": …}'` loads it and says what it holds.

- `feature`: an image column (HF's Image, or encoded image bytes) → uint8 (N, H, W) when every image is
  grayscale, else (N, 3, H, W); a column of fixed-length number lists: pixel vectors with `shape` [H, W] or
  [C, H, W] (integers 0..255, or floats in [0, 1] stored as round(x·255)), 2-D lists as (H, W) images, or,
  without `shape`, integer lists as token sequences (kind "tokens"); or a glob of columns (`pixel*`) whose
  numbers, in the file's column order, make one vector per row (a CSV of one pixel per column).
- `label`: integers 0..K-1 (HF's ClassLabel: its names kept), integral floats, or strings (mapped to the
  sorted names' indices, the names kept in class_names).
- `natural_id` (optional): each row's user, for the `natural` partition: ids sorted (numbers as numbers), the
  same id in train and test the same user; the samples are then ordered by user, as LEAF's are.
- `train_split` (default train) and `test_split` (default: `test` where there is one): other splits are not
  read. Without a test split, `test_fraction` (default 0.2) of each user's samples (of each class's, without
  `natural_id`) is held out, drawn with `split_seed`.
Text columns are refused (no tokenizer here). Every bad value names the file, split, column and row.
"""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from edgesync.data.arrays import ArrayDataset, DataNotFoundError
from edgesync.data.hf_columns import GLOB_CHARS, FeatureArgs, Split, feature_values, label_values, natural_ids
from edgesync.data.images import one_shape, pixel_moments
from edgesync.data.local_files import LoaderArgs, check_root, held_out, parse_args, resolve

NAME = "hf"
FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json",
           ".ndjson": "json", ".arrow": "arrow"}
COMPRESSED = (".gz", ".bz2", ".xz", ".zst")
SAVED_MARKERS = ("dataset_dict.json", "state.json")  # what save_to_disk leaves in a DatasetDict's, a Dataset's folder

Paths = str | list[str]


class HfArgs(LoaderArgs):
    path: Paths | dict[str, Paths] = Field(description=(
        "a folder save_to_disk wrote, or Parquet, CSV or JSON-lines files: a path or glob, a list of them, or "
        "{split: path or list}"))
    feature: str = Field("image", description="the input column's name, or a glob of column names (pixel*)")
    label: str = Field("label", description="the label column's name")
    natural_id: str | None = Field(None, description="the name of the column of each row's user, or null")
    shape: tuple[int, int] | tuple[int, int, int] | None = Field(None, description=(
        "[H, W] or [C, H, W]: the image a row's flat number list holds (channels first)"))
    train_split: str = Field("train", description="the name of the training split")
    test_split: str | None = Field(None, description="the name of the test split (default: test, where there is one)")


def check_hf_args(args: dict[str, Any], root: str | None = None, origin: str | None = None) -> HfArgs:
    """The arguments checked as the loader checks them, and the path found: what a scenario's check runs."""
    check_root(root, origin, NAME)
    parsed = parse_args(HfArgs, NAME, args)
    if parsed.shape is not None and min(parsed.shape) < 1:
        raise ValueError(f"dataset {NAME}: args.shape: got {list(parsed.shape)}; expected positive sizes, "
                         f"{HfArgs.model_fields['shape'].description}")
    for paths in _path_entries(parsed.path).values():
        for path in paths:
            _expand(path, root, origin)
    return parsed


def load_hf(root: str | os.PathLike | None = None, origin: str | None = None, **args: Any) -> ArrayDataset:
    """The dataset `args` describe (see the module docstring); `root` is where relative paths start."""
    opts = check_hf_args(args, None if root is None else str(root), origin)
    train, test = _pick_splits(_read(opts, root, origin), opts)
    if not train.table.num_rows:
        raise ValueError(f"dataset {NAME}: {train.where}: no rows; expected the training samples")
    glob_feature = any(c in opts.feature for c in GLOB_CHARS)
    for split in (train, test):
        if split is not None:
            split.require(None if glob_feature else opts.feature, opts.label, opts.natural_id)
    train_x, test_x, kind = _inputs(train, test, FeatureArgs(opts.feature, opts.shape, opts.size, opts.grayscale))
    (train_y, test_y), num_classes, class_names = label_values(train, test, opts.label)
    (train_g, test_g), group_names = natural_ids(train, test, opts.natural_id) if opts.natural_id else ((None, None),
                                                                                                         ())
    if test is None:  # hold out a share of each user's (or class's) samples
        mask = held_out(train_y if train_g is None else train_g, opts.fraction, opts.split_seed,
                        "class" if train_g is None else "user")
        train_x, train_y, test_x, test_y = train_x[~mask], train_y[~mask], train_x[mask], train_y[mask]
        if train_g is not None:
            train_g, test_g = train_g[~mask], train_g[mask]
    elif opts.test_fraction is not None:
        raise ValueError(f"dataset {NAME}: args.test_fraction: the files have a test split {test.name!r}, and the "
                         "fraction only applies without one; leave it out")
    if train_g is not None:  # ordered by user, as LEAF's are: train_size then keeps the first users whole
        train_x, train_y, train_g = _by_user(train_x, train_y, train_g)
        test_x, test_y, test_g = _by_user(test_x, test_y, test_g)
    mean, std = pixel_moments(train_x) if kind == "image" else (0.0, 1.0)
    return ArrayDataset(train_x=train_x, train_y=train_y, test_x=test_x, test_y=test_y, num_classes=num_classes,
                        mean=mean, std=std, name=NAME, kind=kind, train_groups=train_g, test_groups=test_g,
                        group_names=group_names, class_names=class_names)


def _inputs(train: Split, test: Split | None, columns: FeatureArgs) -> tuple[np.ndarray, np.ndarray | None, str]:
    """(train inputs, test inputs, kind); both splits' inputs of one kind and shape."""
    kind, train_x = feature_values(train, columns)
    if test is None:
        return train_x, None, kind
    if not test.table.num_rows:  # an empty test split: no rows to read, the training inputs' shape
        return train_x, np.zeros((0, *train_x.shape[1:]), dtype=train_x.dtype), kind
    test_kind, test_x = feature_values(test, columns)
    if kind == test_kind == "image":
        train_x, test_x = one_shape(train_x, test_x, train.where, test.where)
    if test_kind != kind or (len(test_x) and train_x.shape[1:] != test_x.shape[1:]):
        raise ValueError(f"dataset {NAME}: args.feature {columns.feature!r} gives {kind} {train_x.shape[1:]} per row "
                         f"in {train.where} but {test_kind} {test_x.shape[1:]} in {test.where}; expected the same")
    return train_x, test_x, kind


def _by_user(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.argsort(groups, kind="stable")  # each user's samples stay in file order
    return x[order], y[order], groups[order]


def _pick_splits(splits: dict[str, Split], opts: HfArgs) -> tuple[Split, Split | None]:
    names = ", ".join(splits) or "none"
    if opts.train_split not in splits:
        raise ValueError(f"dataset {NAME}: args.train_split: no split {opts.train_split!r} in {opts.path}; its "
                         f"splits: {names}")
    if opts.test_split is not None and opts.test_split not in splits:
        raise ValueError(f"dataset {NAME}: args.test_split: no split {opts.test_split!r} in {opts.path}; its "
                         f"splits: {names} (leave test_split out to hold out test_fraction of the training data)")
    test = opts.test_split or "test"
    if test == opts.train_split:
        raise ValueError(f"dataset {NAME}: args.test_split: {test!r} is the training split too")
    return splits[opts.train_split], splits.get(test)


def _path_entries(path: Paths | dict[str, Paths]) -> dict[str, list[str]]:
    """{split: [path or glob, …]}; a path or list without split names is the training data."""
    if isinstance(path, dict):
        return {split: [p] if isinstance(p, str) else list(p) for split, p in path.items()}
    return {"train": [path] if isinstance(path, str) else list(path)}


def _expand(path: str, root: str | os.PathLike | None, origin: str | None) -> list[Path]:
    """The files (or saved folder) one entry of args.path stands for: a glob matches at least one."""
    if not any(c in path for c in GLOB_CHARS):
        return [resolve(path, root, origin, NAME)]
    base = Path(root) if root is not None else Path.cwd()
    pattern = str(base / Path(path).expanduser())
    found = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    if not found:
        raise DataNotFoundError(f"dataset {NAME}: args.path {path}: no file matches {pattern}")
    return found


def _read(opts: HfArgs, root: str | os.PathLike | None, origin: str | None) -> dict[str, Split]:
    """Every split of args.path, each as one Arrow table in memory."""
    datasets = _datasets()
    entries = {split: [f for p in paths for f in _expand(p, root, origin)]
               for split, paths in _path_entries(opts.path).items()}
    if any(p.is_dir() for paths in entries.values() for p in paths):
        if not (len(entries) == 1 and len(folder := next(iter(entries.values()))) == 1):
            raise ValueError(f"dataset {NAME}: args.path: a folder save_to_disk wrote is given alone, not in a list "
                             "or per split (it holds its splits itself)")
        return _read_saved(datasets, folder[0])
    files = [p for paths in entries.values() for p in paths]
    formats = {p: _format_of(p) for p in files}
    if len(set(formats.values())) > 1:
        shown = ", ".join(f"{p.name} ({f})" for p, f in formats.items())
        raise ValueError(f"dataset {NAME}: args.path: files of different formats ({shown}); give files of one format")
    fmt = next(iter(formats.values()))
    # a cache of its own, dropped once read: nothing left in ~/.cache, nothing stale
    with tempfile.TemporaryDirectory(prefix="edgesync-hf-") as cache, _offline(datasets):
        try:
            loaded = datasets.load_dataset(fmt, data_files={s: [str(p) for p in ps] for s, ps in entries.items()},
                                           cache_dir=cache, keep_in_memory=True)
        except (datasets.exceptions.DatasetsError, ValueError, OSError) as e:
            shown = ", ".join(str(p) for p in files)
            raise ValueError(f"dataset {NAME}: {shown}: cannot read them as {fmt}: {e.__cause__ or e}") from None
    return {split: Split.of(ds, split, _where(entries[split], split), files[0].parent)
            for split, ds in loaded.items()}


def _read_saved(datasets: Any, folder: Path) -> dict[str, Split]:
    if not any((folder / marker).is_file() for marker in SAVED_MARKERS):
        raise ValueError(f"dataset {NAME}: args.path {folder}: a folder is read only when save_to_disk wrote it (it "
                         f"holds {' or '.join(SAVED_MARKERS)}); for Parquet, CSV or JSON-lines files give the files: "
                         "a path or glob, a list, or {train: …, test: …}")
    try:
        with _offline(datasets):
            loaded = datasets.load_from_disk(str(folder), keep_in_memory=True)
    except (datasets.exceptions.DatasetsError, ValueError, OSError) as e:
        raise ValueError(f"dataset {NAME}: {folder}: cannot read it as a saved dataset: {e}") from None
    if isinstance(loaded, datasets.Dataset):  # a single Dataset: all of it is training data
        return {"train": Split.of(loaded, "train", f"{folder} (a single Dataset, read as split 'train')", folder)}
    return {split: Split.of(ds, split, f"{folder} (split {split!r})", folder) for split, ds in loaded.items()}


def _format_of(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSED:
        suffixes = suffixes[:-1]
    fmt = FORMATS.get(suffixes[-1] if suffixes else "")
    if fmt is None:
        raise ValueError(f"dataset {NAME}: args.path: {path}: not a file hf reads by its name; expected one ending "
                         f"in {', '.join(FORMATS)} (compressed: {', '.join(COMPRESSED)}), or a saved dataset's folder")
    return fmt


def _where(files: list[Path], split: str) -> str:
    shown = str(files[0]) if len(files) == 1 else f"{files[0]} and {len(files) - 1} more file(s)"
    return f"{shown} (split {split!r})"


def _datasets() -> Any:
    """The `datasets` package, told not to reach the Hub where it is imported first here (it reads these then)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise ImportError("dataset hf needs Hugging Face's datasets package: pip install 'edgesync[hf]' (or the "
                          "pins in requirements.txt)") from None
    datasets.disable_progress_bars()  # a client's log is no place for a progress bar per split
    return datasets


@contextmanager
def _offline(datasets: Any) -> Iterator[None]:
    """No network while local files load, also where `datasets` was imported online: load_dataset otherwise
    pings the Hub's download counter even for a local Parquet file (datasets/load.py, increase_load_count)."""
    saved = datasets.config.HF_HUB_OFFLINE, datasets.config.HF_UPDATE_DOWNLOAD_COUNTS
    datasets.config.HF_HUB_OFFLINE, datasets.config.HF_UPDATE_DOWNLOAD_COUNTS = True, False
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, datasets.config.HF_UPDATE_DOWNLOAD_COUNTS = saved
