"""The columns of a Hugging Face split into an `ArrayDataset`'s arrays: the feature into images or token
sequences, the labels into class indices, the natural ids into users (hf.py says which column is which).

Works on each split's Arrow table, so a column of number lists becomes one numpy array without a Python
object per number; every value that cannot be used is an error naming the split's file, the column, the row
and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from edgesync.data import images

GLOB_CHARS = "*?["


@dataclass(frozen=True)
class FeatureArgs:
    """What hf's args say about the input column: its name or glob, a pixel list's image shape, and for image
    columns the size and grayscale-or-colour asked for."""

    feature: str
    shape: tuple[int, ...] | None
    size: tuple[int, int] | None
    grayscale: bool | None


@dataclass(frozen=True)
class Split:
    """One split of the files: its name, how errors name it, its rows, HF's features (ClassLabel names, Image)
    and the folder a relative image path starts from."""

    name: str
    where: str
    table: pa.Table
    features: Any  # datasets.Features
    base: Path

    @classmethod
    def of(cls, ds: Any, name: str, where: str, base: Path) -> "Split":
        return cls(name, where, ds.with_format("arrow")[:], ds.features, base)

    def require(self, feature: str | None, label: str, natural_id: str | None) -> None:
        for key, column in (("feature", feature), ("label", label), ("natural_id", natural_id)):
            if column is not None and column not in self.table.column_names:
                raise ValueError(f"dataset hf: {self.where}: no column {column!r} (args.{key}); its columns: "
                                 f"{', '.join(self.table.column_names)}")

    def column(self, name: str, key: str) -> pa.Array:
        """A column in one piece; a row without a value is an error naming it (args.`key` named the column)."""
        values = self.table.column(name).combine_chunks()
        if values.null_count:
            row = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            raise ValueError(f"dataset hf: {self.where}, column {name!r} (args.{key}), row {row}: no value")
        return values.storage if isinstance(values.type, pa.ExtensionType) else values


def feature_values(split: Split, opts: FeatureArgs) -> tuple[str, np.ndarray]:
    """(kind, inputs) of a split: "image" and uint8 (N, H, W) or (N, C, H, W), or "tokens" and int64 (N, L)."""
    if any(c in opts.feature for c in GLOB_CHARS):  # one number per column, the columns making the vector
        columns = [c for c in split.table.column_names if fnmatch(c, opts.feature)]
        if not columns:
            raise ValueError(f"dataset hf: {split.where}: args.feature {opts.feature!r} matches no column; its "
                             f"columns: {', '.join(split.table.column_names)}")
        _no_image_options(opts, f"columns {opts.feature!r}")
        return _from_numbers(np.stack([_scalars(split, c) for c in columns], axis=1), split,
                             f"columns {opts.feature!r}", opts)
    column, where = opts.feature, f"column {opts.feature!r}"
    kind = split.table.schema.field(column).type
    kind = kind.storage_type if isinstance(kind, pa.ExtensionType) else kind
    if _is_image(split.features.get(column), kind):
        return "image", _images(split, column, opts)
    _no_image_options(opts, where)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        raise ValueError(f"dataset hf: {split.where}: {where} (args.feature) holds text; hf reads images and lists "
                         "of numbers (pixels or token indices), and has no tokenizer: store token indices instead")
    if not _is_list(kind):
        raise ValueError(f"dataset hf: {split.where}: {where} (args.feature) holds one {kind} per row; expected an "
                         "image or a list of numbers per row (for one number per column, give a glob: pixel*)")
    return _from_numbers(_nested(split, column), split, where, opts)


def _is_image(feature: Any, kind: pa.DataType) -> bool:
    """HF's Image feature, encoded bytes, or the {bytes, path} struct HF writes images as."""
    if getattr(feature, "_type", None) == "Image":
        return True
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return True
    return pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0


def _is_list(kind: pa.DataType) -> bool:
    return pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)


def _no_image_options(opts: FeatureArgs, where: str) -> None:
    for key in ("size", "grayscale"):
        if getattr(opts, key) is not None:
            raise ValueError(f"dataset hf: args.{key} applies to an image column, and {where} (args.feature) holds "
                             "numbers: leave it out (give args.shape for pixel lists)")


def _images(split: Split, column: str, opts: FeatureArgs) -> np.ndarray:
    sources = []
    for row, value in enumerate(split.column(column, "feature").to_pylist()):
        where = f"{split.where}, column {column!r}, row {row}"
        if isinstance(value, dict):  # HF's {bytes, path}: bytes when embedded, else a file
            data = value.get("bytes") or (split.base / value["path"] if value.get("path") else None)
        else:
            data = value
        if data is None:
            raise ValueError(f"dataset hf: {where}: an image with neither bytes nor a path")
        sources.append(images.ImageSource(where, data))
    return images.stack(sources, opts.grayscale, opts.size)


def _scalars(split: Split, column: str) -> np.ndarray:
    values = split.column(column, "feature")
    if not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
        raise ValueError(f"dataset hf: {split.where}: column {column!r} (matched by args.feature) holds "
                         f"{values.type}; expected one number per row")
    return values.to_numpy(zero_copy_only=False)


def _nested(split: Split, column: str) -> np.ndarray:
    """A column of equal-length (nested) number lists as an array (N, L) or (N, H, W)."""
    values = split.column(column, "feature")
    shape, rows = [], len(values)
    while _is_list(values.type):
        lengths = pc.list_value_length(values).fill_null(0).to_numpy(zero_copy_only=False)
        if len(lengths) and (lengths != lengths[0]).any():
            at = int(np.flatnonzero(lengths != lengths[0])[0])
            per_row = max(1, len(lengths) // max(rows, 1))
            raise ValueError(f"dataset hf: {split.where}, column {column!r} (args.feature): rows of different "
                             f"lengths: row {at // per_row} has a list of {lengths[at]}, row 0 of {lengths[0]}; "
                             "every row needs the same (one image size, one sequence length)")
        shape.append(int(lengths[0]) if len(lengths) else 0)
        values = pc.list_flatten(values)
    if values.null_count:
        at = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"dataset hf: {split.where}, column {column!r} (args.feature), row "
                         f"{at // max(1, int(np.prod(shape)))}: a missing number in its list")
    return values.to_numpy(zero_copy_only=False).reshape(rows, *shape)


def _from_numbers(values: np.ndarray, split: Split, where: str, opts: FeatureArgs) -> tuple[str, np.ndarray]:
    rows = len(values)
    if values.ndim == 2 and opts.shape is None:
        if not np.issubdtype(values.dtype, np.integer):
            raise ValueError(f"dataset hf: {split.where}: {where} (args.feature) holds lists of {values.dtype}; "
                             "token sequences are integers, and pixel lists need args.shape ([H, W] or [C, H, W])")
        if values.size and values.min() < 0:
            row = int(np.argwhere(values < 0)[0][0])
            raise ValueError(f"dataset hf: {split.where}, {where} (args.feature), row {row}: a negative token "
                             "index; expected integers ≥ 0")
        return "tokens", values.astype(np.int64)
    if values.ndim == 2:
        if int(np.prod(opts.shape)) != values.shape[1]:
            raise ValueError(f"dataset hf: args.shape {list(opts.shape)} holds {int(np.prod(opts.shape))} values, "
                             f"but each row of {where} in {split.where} has {values.shape[1]}")
        values = values.reshape(rows, *opts.shape)
    elif values.ndim == 3:
        if opts.shape is not None and tuple(opts.shape) != values.shape[1:]:
            raise ValueError(f"dataset hf: args.shape {list(opts.shape)}, but each row of {where} in "
                             f"{split.where} is a {values.shape[1]}×{values.shape[2]} list of lists")
    else:
        raise ValueError(f"dataset hf: {split.where}: {where} (args.feature) holds {values.ndim - 1}-level lists; "
                         "expected flat pixel lists with args.shape, or (H, W) lists of lists")
    if values.ndim == 4 and values.shape[1] == 1:
        values = values[:, 0]  # one channel: grayscale (N, H, W)
    return "image", _pixels(values, split, where)


def _pixels(values: np.ndarray, split: Split, where: str) -> np.ndarray:
    """Integers 0..255 as they are; floats in [0, 1] as round(x·255)."""
    if np.issubdtype(values.dtype, np.integer):
        bad, expected = (values < 0) | (values > 255), "integers 0..255"
    elif np.issubdtype(values.dtype, np.floating):
        bad, expected = ~((values >= 0.0) & (values <= 1.0)), "floats in [0, 1]"  # NaN fails too
    else:
        raise ValueError(f"dataset hf: {split.where}: {where} (args.feature) holds {values.dtype}; expected pixel "
                         "values, integers 0..255 or floats in [0, 1]")
    if bad.any():
        at = np.argwhere(bad)[0]
        raise ValueError(f"dataset hf: {split.where}, {where} (args.feature), row {at[0]}: a pixel value "
                         f"{values[tuple(at)].item()!r}; expected {expected}")
    if np.issubdtype(values.dtype, np.floating):
        return np.rint(values * 255.0).astype(np.uint8)
    return values.astype(np.uint8)


def label_values(train: Split, test: Split | None, column: str) -> tuple[tuple, int, tuple[str, ...]]:
    """((train labels, test labels), number of classes, class names) as int64 class indices."""
    splits = [s for s in (train, test) if s is not None]
    feature = train.features.get(column)
    raw = [s.column(column, "label") for s in splits]
    kinds = {_label_kind(s, column, r.type) for s, r in zip(splits, raw)}
    if len(kinds) > 1:
        raise ValueError(f"dataset hf: column {column!r} (args.label) holds {raw[0].type} in {train.where} but "
                         f"{raw[1].type} in {splits[1].where}; expected the same in every split")
    kind = kinds.pop()
    arrays = [r.to_numpy(zero_copy_only=False) for r in raw]
    if kind == "text":  # class names: sorted, over every split, so train and test agree
        names, inverse = np.unique(np.concatenate(arrays).astype(str), return_inverse=True)
        cut = len(arrays[0])
        return _pair(inverse[:cut], inverse[cut:], test), len(names), tuple(str(n) for n in names)
    for split, values in zip(splits, arrays):
        if kind == "float" and (bad := values != np.round(values)).any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"dataset hf: {split.where}, column {column!r} (args.label), row {row}: "
                             f"{values[row].item()!r}, not an integer; expected integer classes 0..K-1 or strings")
        limit = len(getattr(feature, "names", None) or ()) or None  # a ClassLabel's classes, where it has them
        bad = (values < 0) | (values >= limit if limit else False)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            extra = " (HF's ClassLabel writes -1 for a missing label)" if limit and values[row] == -1 else ""
            raise ValueError(f"dataset hf: {split.where}, column {column!r} (args.label), row {row}: class "
                             f"{values[row].item()!r}{extra}; expected classes 0..K-1")
    labels = [values.astype(np.int64) for values in arrays]
    names = tuple(getattr(feature, "names", None) or ())
    num_classes = len(names) or int(max(int(v.max()) for v in labels if len(v)) + 1)
    return _pair(labels[0], labels[1] if test is not None else None, test), num_classes, names


def _label_kind(split: Split, column: str, kind: pa.DataType) -> str:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return "int"
    if pa.types.is_floating(kind):
        return "float"
    raise ValueError(f"dataset hf: {split.where}: column {column!r} (args.label) holds {kind}; expected integer "
                     "classes 0..K-1 or strings")


def _pair(train: np.ndarray, test: np.ndarray | None, test_split: Split | None) -> tuple:
    train = np.asarray(train, dtype=np.int64)
    return train, (np.asarray(test, dtype=np.int64) if test_split is not None else None)


def natural_ids(train: Split, test: Split | None, column: str) -> tuple[tuple, tuple[str, ...]]:
    """((train groups, test groups), user names): ids sorted, numbers as numbers, one index per id in both
    splits."""
    arrays = [s.column(column, "natural_id").to_numpy(zero_copy_only=False) for s in (train, test) if s is not None]
    values = np.concatenate(arrays)
    if not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        values = values.astype(str)
    names, inverse = np.unique(values, return_inverse=True)
    cut = len(arrays[0])
    return _pair(inverse[:cut], inverse[cut:], test), tuple(str(n) for n in names.tolist())
