"""Datasets by name: `load_dataset`, and torchvision as the second source.

Sources: our own IDX reader for Fashion-MNIST (``fashion_mnist``, see fashion_mnist.py), our own reader of
CIFAR-10's python archive (``cifar10``, see cifar10.py), our own reader of LEAF's JSON files (``femnist``,
``shakespeare``, ``sent140``, ``celeba``, see leaf.py), torchvision (``mnist``, ``torchvision_fashion_mnist``), and a user's own files,
named with their `dataset.args` (``hf``: Hugging Face datasets from local files, see hf.py; ``image_folder``: a
folder per class, see image_folder.py). Every dataset is an
`ArrayDataset` (arrays.py): uint8 images, (N, H, W) grayscale or (N, 3, H, W) colour, or (Shakespeare,
Sent140) int64 token sequences (N, 80) and (N, 25), plus int64 labels; LEAF's also say each sample's user. `ArrayDataset` and
`to_tensor` are importable from here too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from edgesync.data.arrays import (FASHION_MNIST_MEAN, FASHION_MNIST_STD, MNIST_MEAN, MNIST_STD, REPO_DATA_DIR,
                                  ArrayDataset, DataNotFoundError, explicit_root_error, to_tensor)
from edgesync.data.cifar10 import download_cifar10, load_cifar10
from edgesync.data.fashion_mnist import find_root, load_fashion_mnist
from edgesync.data.hf import check_hf_args, load_hf
from edgesync.data.image_folder import check_image_folder_args, load_image_folder
from edgesync.data.leaf import FORMATS as LEAF_FORMATS
from edgesync.data.leaf import NUM_LETTERS, load_leaf
from edgesync.data.leaf_celeba import IMAGE_SIDE as CELEBA_SIDE
from edgesync.data.leaf_sent140 import MAX_WORDS as SENT140_WORDS
from edgesync.data.leaf_sent140 import TOKEN_INDICES as SENT140_TOKENS
from edgesync.extensions import ExtensionError, find_outside

__all__ = ["DATASET_NAMES", "FILE_DATASETS", "INPUT_SHAPES", "TOKEN_INDICES", "ArrayDataset", "check_dataset_args", "download_cifar10",
           "download_fashion_mnist", "load_dataset", "outside_loader", "to_tensor"]

# (C, H, W) of one image of each dataset as the models see it, or (L,) of a token sequence, known without
# loading the data
INPUT_SHAPES = {
    "fashion_mnist": (1, 28, 28),
    "mnist": (1, 28, 28),
    "torchvision_fashion_mnist": (1, 28, 28),
    "cifar10": (3, 32, 32),
    "femnist": (1, 28, 28),
    "shakespeare": (80,),
    "sent140": (SENT140_WORDS,),
    "celeba": (3, CELEBA_SIDE, CELEBA_SIDE),
}
# How many token indices a built-in token dataset's samples take (0..n-1), known without loading the data: the
# scenario check matches it with the token model's (models.TOKEN_INDICES)
TOKEN_INDICES = {"shakespeare": NUM_LETTERS, "sent140": SENT140_TOKENS}
# Built-in datasets of a user's own files, named with their args: (check the args and find the path, load). Their
# input shape is known only once the files are read, so INPUT_SHAPES has none, and the scenario's model/input
# check leaves them alone, as it does outside datasets.
FILE_DATASETS: dict[str, tuple[Callable[..., object], Callable[..., ArrayDataset]]] = {
    "hf": (check_hf_args, load_hf),
    "image_folder": (check_image_folder_args, load_image_folder),
}
DATASET_NAMES = (*INPUT_SHAPES, *FILE_DATASETS)


def check_dataset_args(name: str, args: dict, root: str | None = None, origin: str | None = None) -> None:
    """For a dataset of FILE_DATASETS: its args checked and its path found, as the loader will (a ValueError or
    DataNotFoundError says what is wrong); for the others, nothing to check here."""
    if name in FILE_DATASETS:
        FILE_DATASETS[name][0](args, root, origin)


def outside_loader(name: str) -> Callable[..., ArrayDataset] | None:
    """The loader an outside dataset name stands for (a `package.module:loader` reference or an entry point of
    edgesync.datasets, edgesync/extensions.py); None for neither."""
    if (outside := find_outside(name, "dataset")) is None:
        return None
    found = outside[0]
    if not callable(found):
        raise ExtensionError(f"dataset {name!r}: names a {type(found).__name__}, not a callable that loads a dataset")
    return found


def load_dataset(name: str, root: str | os.PathLike | None = None, origin: str | None = None) -> ArrayDataset:
    """Load a dataset by name (one of DATASET_NAMES, or an outside one: `name` or `name{args as JSON}`, as
    models.model_id writes it; hf and image_folder take their args so too). `root` is where to look: when
    given, the only place (see each loader; hf and image_folder: where a relative args.path starts);
    `origin` names where it came from for the error when it holds no data."""
    base, brace, rest = name.partition("{")
    if base in FILE_DATASETS:
        return FILE_DATASETS[base][1](root, origin, **(json.loads(brace + rest) if brace else {}))
    if name not in DATASET_NAMES:
        return _load_outside(name, root)
    if name == "fashion_mnist":
        return load_fashion_mnist(root, origin)
    if name == "cifar10":
        return load_cifar10(root, origin)
    if name in LEAF_FORMATS:
        return load_leaf(name, root, origin)
    if name == "mnist":
        return _load_torchvision("MNIST", root, origin, name)
    if name == "torchvision_fashion_mnist":
        return _load_torchvision("FashionMNIST", _torchvision_fashion_root(root, origin), None, name)
    raise ValueError(f"unknown dataset {name!r}; known names: {', '.join(DATASET_NAMES)}")


def _load_outside(ident: str, root: str | os.PathLike | None) -> ArrayDataset:
    name, brace, rest = ident.partition("{")
    loader = outside_loader(name)
    if loader is None:
        raise ValueError(f"unknown dataset {name!r}; known names: {', '.join(DATASET_NAMES)}, an installed entry "
                         "point of edgesync.datasets, or a 'package.module:loader' reference")
    try:
        data = loader(root=None if root is None else str(root), **(json.loads(brace + rest) if brace else {}))
    except TypeError as exc:
        raise ExtensionError(f"dataset {name!r}: {exc}") from None
    if not isinstance(data, ArrayDataset):
        raise ExtensionError(f"dataset {name!r}: its loader returned a {type(data).__name__}, not an ArrayDataset "
                             "(edgesync.api)")
    return data


def download_fashion_mnist(dest: Path) -> Path:
    """Download Fashion-MNIST with torchvision into dest/FashionMNIST/raw (needs internet); return that dir."""
    import torchvision

    torchvision.datasets.FashionMNIST(root=str(dest), train=True, download=True)  # fetches all four files
    return Path(dest) / "FashionMNIST" / "raw"


def _torchvision_fashion_root(root: str | os.PathLike | None, origin: str | None) -> Path:
    """The root torchvision's FashionMNIST wants: the dir that holds FashionMNIST/raw/."""
    found = find_root(root, origin)
    if found.name == "raw" and found.parent.name == "FashionMNIST":
        return found.parent.parent
    raise DataNotFoundError(
        f"Fashion-MNIST found at {found}, but torchvision needs its own layout "
        "<root>/FashionMNIST/raw/ with the files uncompressed; use the dataset 'fashion_mnist' "
        "(our IDX reader) for this directory, or run `make setup`"
    )


def _load_torchvision(class_name: str, root: str | os.PathLike | None, origin: str | None,
                      name: str) -> ArrayDataset:
    """Load torchvision's MNIST or FashionMNIST (download=False) into an ArrayDataset; without a root,
    from <repo>/data."""
    import torchvision

    if root is not None and not Path(root).is_dir():
        raise explicit_root_error(root, origin, "no such directory")
    where = Path(root) if root is not None else REPO_DATA_DIR
    cls = getattr(torchvision.datasets, class_name)
    try:
        train = cls(root=str(where), train=True, download=False)
        test = cls(root=str(where), train=False, download=False)
    except RuntimeError as e:  # torchvision: "Dataset not found. You can use download=True ..."
        why = f"torchvision {class_name} not found under {where / class_name / 'raw'} (uncompressed IDX files)"
        if origin is not None:
            why = f"{origin} {root}: {why}"
        raise DataNotFoundError(f"{why}: {e}") from e
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
