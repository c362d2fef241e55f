"""In-memory image datasets: the `ArrayDataset` container and `load_dataset` by name.

Sources: our own IDX reader for Fashion-MNIST (``fashion_mnist``, see fashion_mnist.py) and torchvision as
the second source (``mnist``, ``torchvision_fashion_mnist``). Every dataset is held as uint8 images
(N, H, W) plus int64 labels; `to_tensor` normalizes a batch to float32 (N, 1, H, W) when it is needed.
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

DATASET_NAMES = ("fashion_mnist", "mnist", "torchvision_fashion_mnist")

REPO_DATA_DIR = Path(__file__).resolve().parents[2] / "data"  # <repo>/data, git-ignored


@dataclass
class ArrayDataset:
    """A train/test split held in memory as uint8 images and int64 labels."""

    train_x: np.ndarray  # (N, H, W) uint8
    train_y: np.ndarray  # (N,) int64
    test_x: np.ndarray  # (M, H, W) uint8
    test_y: np.ndarray  # (M,) int64
    num_classes: int
    mean: float  # of the pixels scaled to [0, 1], used by to_tensor
    std: float
    name: str

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """(C, H, W) of one sample as the models see it (grayscale: C = 1)."""
        _, h, w = self.train_x.shape
        return (1, h, w)


def to_tensor(x_uint8: np.ndarray, mean: float, std: float) -> torch.Tensor:
    """uint8 images (N, H, W) -> normalized float32 tensor (N, 1, H, W): (x / 255 - mean) / std."""
    if x_uint8.dtype != np.uint8 or x_uint8.ndim != 3:
        raise ValueError(
            f"to_tensor expects uint8 images of shape (N, H, W), got {x_uint8.dtype} {x_uint8.shape}"
        )
    x = np.ascontiguousarray(x_uint8)
    if not x.flags.writeable:  # torch.from_numpy warns on read-only arrays
        x = x.copy()
    t = torch.from_numpy(x).to(torch.float32)  # (N, H, W)
    return t.div_(255.0).sub_(mean).div_(std).unsqueeze(1)  # (N, 1, H, W)


def load_dataset(name: str, root: str | os.PathLike | None = None) -> ArrayDataset:
    """Load a dataset by name (one of DATASET_NAMES); `root` is where to look (see each loader)."""
    if name == "fashion_mnist":
        from edgesync.data.fashion_mnist import load_fashion_mnist

        return load_fashion_mnist(root)
    if name == "mnist":
        return _load_torchvision("MNIST", Path(root) if root is not None else REPO_DATA_DIR, name)
    if name == "torchvision_fashion_mnist":
        return _load_torchvision("FashionMNIST", _torchvision_fashion_root(root), name)
    raise ValueError(f"unknown dataset {name!r}; known names: {', '.join(DATASET_NAMES)}")


def download_fashion_mnist(dest: Path) -> Path:
    """Download Fashion-MNIST with torchvision into dest/FashionMNIST/raw (needs internet); return that dir."""
    import torchvision

    torchvision.datasets.FashionMNIST(root=str(dest), train=True, download=True)  # fetches all four files
    return Path(dest) / "FashionMNIST" / "raw"


def _torchvision_fashion_root(root: str | os.PathLike | None) -> Path:
    """The root torchvision's FashionMNIST wants: the dir that holds FashionMNIST/raw/."""
    from edgesync.data.fashion_mnist import DataNotFoundError, find_root

    found = find_root(root)
    if found.name == "raw" and found.parent.name == "FashionMNIST":
        return found.parent.parent
    raise DataNotFoundError(
        f"Fashion-MNIST found at {found}, but torchvision needs its own layout "
        "<root>/FashionMNIST/raw/ with the files uncompressed; use the dataset 'fashion_mnist' "
        "(our IDX reader) for this directory, or run `make setup`"
    )


def _load_torchvision(class_name: str, root: Path, name: str) -> ArrayDataset:
    """Load torchvision's MNIST or FashionMNIST (download=False) into an ArrayDataset."""
    import torchvision
    from edgesync.data.fashion_mnist import DataNotFoundError

    cls = getattr(torchvision.datasets, class_name)
    try:
        train = cls(root=str(root), train=True, download=False)
        test = cls(root=str(root), train=False, download=False)
    except RuntimeError as e:  # torchvision: "Dataset not found. You can use download=True ..."
        raise DataNotFoundError(
            f"torchvision {class_name} not found under {root / class_name / 'raw'} "
            f"(uncompressed IDX files expected): {e}"
        ) from e
    mean, std = (MNIST_MEAN, MNIST_STD) if class_name == "MNIST" else (FASHION_MNIST_MEAN, FASHION_MNIST_STD)
    return ArrayDataset(
        train_x=train.data.numpy(),
        train_y=train.targets.numpy().astype(np.int64),
        test_x=test.data.numpy(),
        test_y=test.targets.numpy().astype(np.int64),
        num_classes=len(train.classes),
        mean=mean,
        std=std,
        name=name,
    )
