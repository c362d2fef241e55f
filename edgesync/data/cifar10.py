"""CIFAR-10 from its python archive: where to find it, a direct reader, and the loader.

The archive (ARCHIVE_URL, ``cifar-10-python.tar.gz``, 163 MB) holds one folder, ``cifar-10-batches-py/``,
with ``data_batch_1`` … ``data_batch_5`` (10 000 training images each) and ``test_batch`` (10 000 test
images): each a pickled dict (written by Python 2) whose ``b"data"`` is a uint8 array (N, 3072), one row per
32×32 colour image, channel-major (the 1024 red values row by row, then the green, then the blue), and whose
``b"labels"`` is a list of N ints 0..9. A row therefore reshapes straight to (3, 32, 32), the layout the
models take; the loader returns uint8 (N, 3, 32, 32) and `to_tensor` normalises with the per-channel mean
and std. The batches are read directly, from the extracted folder or from inside the archive without
extracting it, so torchvision (which converts to (N, 32, 32, 3) for PIL) is not needed.

A pickle can name any callable to run while it loads; `_BatchUnpickler` lets a batch name only numpy's
array reconstruction, so a file in a data folder cannot run code.

Where the data is looked for (see `find_cifar10`), as for Fashion-MNIST:
  1. $EDGESYNC_DATA: when set it wins, and a wrong value is an error (no silent fallback);
  2. else the `root` argument when given (a scenario's dataset.root, a client's --data-root): the only
     place looked in, so a wrong root is an error too, never replaced by another copy of the data;
  3. else <repo>/data/cifar-10 (where `python -m edgesync.data --dataset cifar10 --ensure` downloads it).
A directory counts if it is ``cifar-10-batches-py`` itself (it holds the six batches), holds that folder,
or holds ``cifar-10-python.tar.gz``; the folder wins over the archive (no decompression).
"""

from __future__ import annotations

import codecs
import io
import os
import pickle
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgesync.data.arrays import (CIFAR10_MEAN, CIFAR10_STD, REPO_DATA_DIR, ArrayDataset, DataNotFoundError,
                                  explicit_root_error)
from edgesync.data.fashion_mnist import ENV_VAR

ARCHIVE = "cifar-10-python.tar.gz"
ARCHIVE_URL = f"https://www.cs.toronto.edu/~kriz/{ARCHIVE}"
FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
BATCHES = (*TRAIN_BATCHES, TEST_BATCH)
REPO_DIR = REPO_DATA_DIR / "cifar-10"
NUM_CLASSES = 10
IMAGE_SHAPE = (3, 32, 32)  # (C, H, W); a batch row holds C·H·W = 3072 values in this order
WHAT_TO_PUT = (f"{ARCHIVE} ({ARCHIVE_URL}) or the folder it extracts to, {FOLDER}/ "
               f"({', '.join(BATCHES)})")


@dataclass(frozen=True)
class Source:
    """Where the six batches are: a folder holding them, or the archive."""

    path: Path
    is_archive: bool


def find_cifar10(root: str | os.PathLike | None = None, origin: str | None = None) -> Source:
    """Where CIFAR-10 is (see the module docstring for the order). `origin` names where an explicit
    `root` came from ("dataset.root", "--data-root"), for the error raised when it does not hold the data."""
    env = os.environ.get(ENV_VAR)
    if env:
        found, why = _probe(Path(env))
        if found is not None:
            return found
        raise DataNotFoundError(
            f"${ENV_VAR}={env} does not hold CIFAR-10: {why}. Put {WHAT_TO_PUT} into it, or unset "
            f"{ENV_VAR} to use the default place, {REPO_DIR}."
        )
    if root is not None:
        found, why = _probe(Path(root))
        if found is None:
            raise explicit_root_error(root, origin, f"{why}; CIFAR-10 needs {WHAT_TO_PUT} there")
        return found
    found, why = _probe(REPO_DIR)
    if found is not None:
        return found
    raise DataNotFoundError(
        f"CIFAR-10 not found. Looked in:\n  - ${ENV_VAR}: not set\n  - {REPO_DIR}: {why}\n"
        f"Fix: put {WHAT_TO_PUT} into {REPO_DIR} (or into a folder named by ${ENV_VAR} or dataset.root); "
        f"with internet, `python -m edgesync.data --dataset cifar10 --ensure` downloads it there."
    )


def load_cifar10(root: str | os.PathLike | None = None, origin: str | None = None) -> ArrayDataset:
    """Load CIFAR-10 (50 000 train / 10 000 test, uint8 (N, 3, 32, 32), labels 0..9) from
    `find_cifar10(root, origin)`: training images in batch order 1..5, then the test batch."""
    source = find_cifar10(root, origin)
    batches = _read_archive(source.path) if source.is_archive else _read_folder(source.path)
    train = [batches[b] for b in TRAIN_BATCHES]
    return ArrayDataset(
        train_x=np.concatenate([x for x, _ in train]),
        train_y=np.concatenate([y for _, y in train]),
        test_x=batches[TEST_BATCH][0],
        test_y=batches[TEST_BATCH][1],
        num_classes=NUM_CLASSES,
        mean=CIFAR10_MEAN,
        std=CIFAR10_STD,
        name="cifar10",
    )


def download_cifar10(dest: Path) -> Path:
    """Download CIFAR-10 with torchvision into dest (needs internet): the archive, extracted to
    dest/cifar-10-batches-py; returns that folder."""
    import torchvision

    torchvision.datasets.CIFAR10(root=str(dest), train=True, download=True)
    return Path(dest) / FOLDER


def read_batch(data: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch -> (images uint8 (N, 3, 32, 32), labels int64 (N,)); `where` names it in errors."""
    try:
        batch = _BatchUnpickler(data).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise ValueError(f"{where}: not a CIFAR-10 batch pickle: {type(e).__name__}: {e}") from e
    if not isinstance(batch, dict):
        raise ValueError(f"{where}: expected a pickled dict with b'data' and b'labels', got {type(batch).__name__}")
    images, labels = _key(batch, "data", where), _key(batch, "labels", where)
    row = int(np.prod(IMAGE_SHAPE))
    if not isinstance(images, np.ndarray) or images.dtype != np.uint8 or images.ndim != 2 or images.shape[1] != row:
        got = f"{images.dtype} {images.shape}" if isinstance(images, np.ndarray) else type(images).__name__
        raise ValueError(f"{where}: b'data' must be a uint8 array (N, {row}), got {got}")
    y = np.asarray(labels, dtype=np.int64)
    if y.shape != (len(images),):
        raise ValueError(f"{where}: {len(images)} images but b'labels' has shape {y.shape}, expected ({len(images)},)")
    if y.size and (y.min() < 0 or y.max() >= NUM_CLASSES):
        raise ValueError(f"{where}: labels span {y.min()}..{y.max()}, expected 0..{NUM_CLASSES - 1}")
    return images.reshape(len(images), *IMAGE_SHAPE), y


class _BatchUnpickler(pickle.Unpickler):
    """Unpickles a batch and refuses everything else a pickle may name (which would run on load)."""

    # numpy's array rebuilders, wherever this numpy keeps them (numpy.core before 2.0, numpy._core since):
    # the batches, written by numpy 1 under Python 2, name numpy.core.multiarray._reconstruct; an array
    # pickled at protocol 5 (a batch re-pickled today) names numpy's _frombuffer instead.
    _RECONSTRUCT = np.empty(0).__reduce_ex__(2)[0]
    _FROMBUFFER = np.empty(0).__reduce_ex__(5)[0]
    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
        ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
        ("numpy.core.numeric", "_frombuffer"): _FROMBUFFER,
        ("numpy._core.numeric", "_frombuffer"): _FROMBUFFER,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): codecs.encode,  # Python 3's bytes at pickle protocol < 3
    }

    def __init__(self, data: bytes):
        # encoding="bytes": Python 2 str (the keys, the array's raw data) stays bytes, as CIFAR's page reads it
        super().__init__(io.BytesIO(data), encoding="bytes")

    def find_class(self, module: str, name: str):
        try:
            return self._ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing {module}.{name}: a CIFAR-10 batch holds only numpy arrays, "
                                         "lists and strings") from None


def _key(batch: dict, name: str, where: str):
    """batch[b"name"] (Python 2's pickles) or batch["name"] (a batch re-pickled under Python 3)."""
    for key in (name.encode(), name):
        if key in batch:
            return batch[key]
    keys = ", ".join(repr(k) for k in batch)
    raise ValueError(f"{where}: no {name.encode()!r} in the batch (its keys: {keys})")


def _read_folder(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {b: read_batch((folder / b).read_bytes(), str(folder / b)) for b in BATCHES}


def _read_archive(archive: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The six batches from inside the archive, in one streaming pass (no extraction to disk)."""
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    try:
        with tarfile.open(archive, "r|gz") as tar:
            for member in tar:
                name = Path(member.name)
                if member.isfile() and name.name in BATCHES and name.parent.name == FOLDER:
                    f = tar.extractfile(member)
                    assert f is not None  # a regular file always has contents
                    found[name.name] = read_batch(f.read(), f"{archive}:{member.name}")
    except (tarfile.TarError, EOFError, zlib.error, OSError) as e:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"{archive}: cannot read the archive: {type(e).__name__}: {e}") from e
    missing = [b for b in BATCHES if b not in found]
    if missing:
        raise ValueError(f"{archive}: the archive lacks {', '.join(f'{FOLDER}/{b}' for b in missing)}; "
                         f"expected the archive from {ARCHIVE_URL}")
    return found


def _probe(base: Path) -> tuple[Source | None, str]:
    """(where the batches are, "") or (None, why not) for base, base/cifar-10-batches-py, base/ARCHIVE."""
    if not base.is_dir():
        return None, "no such directory"
    missing_here: list[str] = []
    for folder in (base, base / FOLDER):
        present = [b for b in BATCHES if (folder / b).is_file()]
        if len(present) == len(BATCHES):
            return Source(folder, is_archive=False), ""
        if present and not missing_here:  # a partial folder: say which batches it lacks
            missing_here = [f"{folder}/{b}" for b in BATCHES if b not in present]
    if (base / ARCHIVE).is_file():
        return Source(base / ARCHIVE, is_archive=True), ""
    if missing_here:
        return None, f"missing {', '.join(missing_here)}, and no {ARCHIVE}"
    return None, f"neither {FOLDER}/ nor {ARCHIVE} in it"
