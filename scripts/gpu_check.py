"""The GPU check's two helpers (scripts/gpu_check.sh runs them):

    python scripts/gpu_check.py cifar DIR           # generated CIFAR-10 batches in DIR/cifar-10-batches-py
    python scripts/gpu_check.py section RUN NAME    # one "## NAME" section of RUN/report.md, for the report

The generated data has CIFAR-10's format, sizes per image and classes, with random pixels: it exercises every
CUDA path of the ResNet-18 scenario (data to the device, forward and backward, DGS's sparsified updates, the
evaluation) where the real archive cannot be downloaded; its accuracies mean nothing.
"""
from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np

TRAIN_PER_BATCH, TEST = 2000, 1000


def write_cifar(base: Path) -> Path:
    folder = base / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        n = TEST if name == "test_batch" else TRAIN_PER_BATCH
        batch = {b"batch_label": name.encode(), b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                 b"labels": rng.integers(0, 10, n).tolist()}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    (folder / "batches.meta").write_bytes(pickle.dumps({b"label_names": [str(i).encode() for i in range(10)]},
                                                       protocol=2))
    return folder


def section(run: Path, name: str) -> str:
    lines = (run / "report.md").read_text().splitlines()
    try:
        start = lines.index(f"## {name}")
    except ValueError:
        return f"(no '{name}' section in {run / 'report.md'})"
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start + 1:end]).strip()


if __name__ == "__main__":
    if sys.argv[1:2] == ["cifar"] and len(sys.argv) == 3:
        print(write_cifar(Path(sys.argv[2])))
    elif sys.argv[1:2] == ["section"] and len(sys.argv) == 4:
        print(section(Path(sys.argv[2]), sys.argv[3]))
    else:
        sys.exit(__doc__)
