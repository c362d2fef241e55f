"""What every dataset becomes in memory, and what its loaders share.

`ArrayDataset` holds a train/test split as uint8 images plus int64 labels: grayscale ones as (N, H, W),
colour ones as (N, C, H, W). `to_tensor` normalizes a batch to float32 (N, C, H, W) when it is needed: the
images stay uint8 until then (a quarter of float32's memory), and one channel-first layout serves every model. `DataNotFoundError` is every loader's "the files are
not there", and `explicit_root_error` its wording for a root that was given but does not hold the data:
such a root is the only place looked in, never replaced by another copy found elsewhere. `class_labels` is the
readers' check of a file's list of classes.

A dataset of token sequences (`kind="tokens"`, LEAF's Shakespeare) holds int64 arrays (N, L) of token
indices instead of images; `to_tensor` hands them over as they are, as a torch.long tensor. A naturally
partitioned dataset (LEAF's FEMNIST and Shakespeare: one writer or role per user) also says whose each
sample is: `train_groups` and `test_groups` index into `group_names`; datasets without natural users
leave them None, and every loader written before them is unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081
# Per channel (red, green, blue) over CIFAR-10's 50 000 training images scaled to [0, 1].
CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)

REPO_DATA_DIR = Path(__file__).resolve().parents[2] / "data"  # <repo>/data, git-ignored

# Where an explicit root comes from, for a message whose caller did not say.
EXPLICIT_ROOT_SOURCES = ("a scenario's dataset.root (the coordinator sends it to every client with SETUP) "
                         "or a client's --data-root")


class DataNotFoundError(FileNotFoundError):
    """The dataset files are not where they were looked for; the message says where and the fix."""


def explicit_root_error(root: str | os.PathLike, origin: str | None, why: str) -> DataNotFoundError:
    """The error for an explicit root that does not hold the data: `ORIGIN ROOT: WHY. …`.

    `origin` names where the root came from ("dataset.root", "--data-root"); None says what it can be."""
    came_from = "" if origin else f"It came from {EXPLICIT_ROOT_SOURCES}. "
    return DataNotFoundError(
        f"{origin or 'data root'} {root}: {why}. {came_from}An explicit root is the only place looked in, "
        "so no other copy of the data was used: correct it, or leave it out to search the usual places."
    )


DATASET_KINDS = ("image", "tokens")


@dataclass
class ArrayDataset:
    """A train/test split held in memory as uint8 images (or int64 token sequences) and int64 labels."""

    train_x: np.ndarray  # (N, H, W) or (N, C, H, W) uint8; kind "tokens": (N, L) int64
    train_y: np.ndarray  # (N,) int64
    test_x: np.ndarray  # (M, H, W) or (M, C, H, W) uint8; kind "tokens": (M, L) int64
    test_y: np.ndarray  # (M,) int64
    num_classes: int
    # of the pixels scaled to [0, 1], used by to_tensor: one number (grayscale) or one per channel; unused
    # for tokens
    mean: float | tuple[float, ...]
    std: float | tuple[float, ...]
    name: str
    kind: str = "image"  # one of DATASET_KINDS
    # the natural user of each sample (an index into group_names), for the `natural` partition; None: none
    train_groups: np.ndarray | None = None  # (N,) int64
    test_groups: np.ndarray | None = None  # (M,) int64
    group_names: tuple[str, ...] = ()  # user ids, sorted
    # what each class index stands for, where the files name the classes (hf's string labels, image_folder's
    # folders); () where they are only numbers
    class_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in DATASET_KINDS:
            raise ValueError(f"ArrayDataset {self.name!r}: kind {self.kind!r}, expected one of "
                             f"{', '.join(DATASET_KINDS)}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        """(C, H, W) of one image as the models see it (grayscale: C = 1); (L,) of a token sequence."""
        if self.kind == "tokens":
            return (self.train_x.shape[1],)
        if self.train_x.ndim == 4:
            _, c, h, w = self.train_x.shape
            return (c, h, w)
        _, h, w = self.train_x.shape
        return (1, h, w)


def to_tensor(x_uint8: np.ndarray, mean: float | tuple[float, ...], std: float | tuple[float, ...]) -> torch.Tensor:
    """uint8 images -> normalized float32 tensor (N, C, H, W): (x / 255 - mean) / std.

    Grayscale images (N, H, W) take one mean and std and become (N, 1, H, W); colour images (N, C, H, W)
    take one mean and std per channel. Token sequences, int64 (N, L), become a torch.long tensor of the
    same values: indices are not normalised, and mean and std are not used."""
    if x_uint8.dtype == np.int64 and x_uint8.ndim == 2:
        # a copy, as the images' conversion to float32 is: the tensor never aliases the dataset's arrays
        return torch.from_numpy(np.array(x_uint8, copy=True, order="C"))
    if x_uint8.dtype != np.uint8 or x_uint8.ndim not in (3, 4):
        raise ValueError(
            f"to_tensor expects uint8 images of shape (N, H, W) or (N, C, H, W), or int64 token sequences (N, L), "
            f"got {x_uint8.dtype} {x_uint8.shape}"
        )
    x = _writable(x_uint8)
    t = torch.from_numpy(x).to(torch.float32)
    if x.ndim == 3:
        if not isinstance(mean, (int, float)) or not isinstance(std, (int, float)):
            raise ValueError(f"to_tensor: grayscale images (N, H, W) take one mean and std, got {mean!r} and {std!r}")
        return t.div_(255.0).sub_(mean).div_(std).unsqueeze(1)  # (N, 1, H, W)
    channels = x.shape[1]
    m, s = torch.tensor(mean, dtype=torch.float32).reshape(-1), torch.tensor(std, dtype=torch.float32).reshape(-1)
    if len(m) != channels or len(s) != channels:
        raise ValueError(f"to_tensor: images of {channels} channels need {channels} means and stds, got "
                         f"{mean!r} and {std!r}")
    return t.div_(255.0).sub_(m.view(1, -1, 1, 1)).div_(s.view(1, -1, 1, 1))  # (N, C, H, W)


def class_labels(y: list, num_classes: int, where: str) -> np.ndarray:
    """A file's list of integer classes as int64 (n,), each checked to be in 0..num_classes-1; where names the
    file and user in the error."""
    if not y:  # a user with no samples here (np.asarray would make float64 of it)
        return np.empty(0, dtype=np.int64)
    labels = np.asarray(y)
    if labels.dtype == bool or not np.issubdtype(labels.dtype, np.integer) or labels.shape != (len(y),):
        raise ValueError(f"{where}: y must be a list of integer classes 0..{num_classes - 1}, got {labels.dtype} "
                         f"of shape {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"{where}: y spans {labels.min()}..{labels.max()}, expected classes 0..{num_classes - 1}")
    return labels.astype(np.int64)


def _writable(x: np.ndarray) -> np.ndarray:
    """x as a contiguous writable array (a copy only where needed): torch.from_numpy warns on read-only ones."""
    x = np.ascontiguousarray(x)
    return x if x.flags.writeable else x.copy()
