"""Fashion-MNIST from its IDX files: a small IDX reader, where to find the files, and the loader.

IDX layout (http://yann.lecun.com/exdb/mnist/): magic = 0x00 0x00 <dtype code> <ndim>, then ndim
big-endian uint32 dims, then the data in C order, big-endian. Files may be gzip'd (``.gz``) or raw.

Where the files are looked for (see `find_root`):
  1. $EDGESYNC_DATA: when set it wins, and a wrong value is an error (no silent fallback);
  2. else the `root` argument when given (a scenario's dataset.root, a client's --data-root): the only
     place looked in, so a wrong root is an error too, never replaced by another copy of the data;
  3. else, searched in order, /usr/share/datasets/fashion-mnist (Debian package ``dataset-fashion-mnist``)
     and <repo>/data/fashion-mnist (where `make setup` / `python -m edgesync.data --ensure` downloads them).
A directory counts if it holds the four files, each gzip'd or not, directly or under FashionMNIST/raw/
(torchvision's layout).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from edgesync.data.arrays import (FASHION_MNIST_MEAN, FASHION_MNIST_STD, REPO_DATA_DIR, ArrayDataset,
                                  DataNotFoundError, explicit_root_error)

ENV_VAR = "EDGESYNC_DATA"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
REPO_DIR = REPO_DATA_DIR / "fashion-mnist"
FILES = {  # role -> file name without .gz
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
NUM_CLASSES = 10

_IDX_DTYPES = {  # IDX type code -> big-endian numpy dtype
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (gzip'd if the name ends in .gz) into a writable native-endian array."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            buf = f.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError; EOFError: gzip stream cut short
        raise ValueError(f"{path}: cannot read IDX file: {e}") from e
    if len(buf) < 4 or buf[0] != 0 or buf[1] != 0:
        raise ValueError(f"{path}: bad IDX magic {buf[:4].hex()!r}, expected 0000<dtype><ndim>")
    code, ndim = buf[2], buf[3]
    if code not in _IDX_DTYPES:
        known = ", ".join(f"0x{c:02x}" for c in _IDX_DTYPES)
        raise ValueError(f"{path}: unknown IDX dtype code 0x{code:02x}, expected one of {known}")
    header = 4 + 4 * ndim
    if len(buf) < header:
        raise ValueError(f"{path}: truncated IDX header: {ndim} dims need {header} bytes, file has {len(buf)}")
    dims = tuple(int(d) for d in np.frombuffer(buf, dtype=">u4", count=ndim, offset=4))
    dtype = _IDX_DTYPES[code]
    expected = header + int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(buf) != expected:
        raise ValueError(
            f"{path}: IDX size mismatch for dims {dims} of {dtype.name}: expected {expected} bytes, "
            f"file has {len(buf)} ({'truncated' if len(buf) < expected else 'trailing bytes'})"
        )
    data = np.frombuffer(buf, dtype=dtype, offset=header).reshape(dims)
    return data.astype(dtype.newbyteorder("="))  # copy: native byte order and writable


def find_root(root: str | os.PathLike | None = None, origin: str | None = None) -> Path:
    """The directory holding the four Fashion-MNIST files (see the module docstring for the order).

    `origin` names where an explicit `root` came from ("dataset.root", "--data-root"), for the error
    raised when it does not hold the files."""
    tried: list[str] = []
    env = os.environ.get(ENV_VAR)
    if env:
        found, why = _probe(Path(env))
        if found is not None:
            return found
        raise DataNotFoundError(
            f"${ENV_VAR}={env} does not hold Fashion-MNIST: {why}. "
            f"Point {ENV_VAR} at a directory with the four files {', '.join(FILES.values())} "
            "(each may be .gz), or unset it to use the default places."
        )
    if root is not None:
        found, why = _probe(Path(root))
        if found is None:
            raise explicit_root_error(root, origin, why)
        return found
    tried.append(f"${ENV_VAR}: not set")
    for base in (DEBIAN_DIR, REPO_DIR):
        found, why = _probe(base)
        if found is not None:
            return found
        tried.append(f"{base}: {why}")
    places = "\n  - ".join(tried)
    raise DataNotFoundError(
        f"Fashion-MNIST not found. Looked in:\n  - {places}\n"
        f"Fix: run `make setup` (downloads into {REPO_DIR}), or install the Debian package "
        f"dataset-fashion-mnist, or set {ENV_VAR} to a directory holding {', '.join(FILES.values())} "
        "(gzip'd or not)."
    )


def load_fashion_mnist(root: str | os.PathLike | None = None, origin: str | None = None) -> ArrayDataset:
    """Load Fashion-MNIST (60000 train / 10000 test, 28x28 uint8, labels 0..9) with our IDX reader, from
    `find_root(root, origin)`."""
    d = find_root(root, origin)
    arrays = {role: read_idx(_file(d, stem)) for role, stem in FILES.items()}
    for split in ("train", "test"):
        x, y = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise ValueError(
                f"{d}: {split} images {x.shape} / labels {y.shape} do not match; expected (N, H, W) and (N,)"
            )
        if y.size and (y.min() < 0 or y.max() >= NUM_CLASSES):
            raise ValueError(f"{d}: {split} labels span {y.min()}..{y.max()}, expected 0..{NUM_CLASSES - 1}")
    return ArrayDataset(
        train_x=arrays["train_images"].astype(np.uint8, copy=False),
        train_y=arrays["train_labels"].astype(np.int64),
        test_x=arrays["test_images"].astype(np.uint8, copy=False),
        test_y=arrays["test_labels"].astype(np.int64),
        num_classes=NUM_CLASSES,
        mean=FASHION_MNIST_MEAN,
        std=FASHION_MNIST_STD,
        name="fashion_mnist",
    )


def _file(d: Path, stem: str) -> Path:
    """The raw file if present (faster to read), else the .gz one."""
    raw = d / stem
    return raw if raw.is_file() else d / f"{stem}.gz"


def _probe(base: Path) -> tuple[Path | None, str]:
    """(directory holding all four files, "") or (None, why not) for base and base/FashionMNIST/raw."""
    if not base.is_dir():
        return None, "no such directory"
    missing_here: list[str] = []
    for d in (base, base / "FashionMNIST" / "raw"):
        missing = [s for s in FILES.values() if not (d / s).is_file() and not (d / f"{s}.gz").is_file()]
        if not missing:
            return d, ""
        missing_here = missing_here or missing
    return None, f"missing {', '.join(missing_here)}[.gz] (also looked under FashionMNIST/raw/)"
