"""What every peer's runner shares (issue 38): the spec, the data as tensors, the clients' index lists, the very
model EdgeSync trains, the test, and the result file. Needs only numpy and torch, so that it runs in each
peer's own virtual environment (benchmarks/peers/setup.sh NAME) without EdgeSync installed.

A runner is `python benchmarks/peers/run_NAME.py --spec SPEC.json --out RESULT.json`; it writes `result()`.
The helpers that need no torch live in spec_io.py (EdgeSync's runner uses them alone, so that its own process
holds no torch beside the `edgesync run` it starts).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import torch
from torch import nn

from spec_io import ROOT, Timer, args, eval_rounds, result, write  # noqa: F401  (every runner's helpers, torch-free)

MEAN, STD = 0.2860, 0.3530  # edgesync/data/arrays.py: FASHION_MNIST_MEAN/STD, pixels scaled to [0, 1]


def load_spec(path: str | Path) -> dict:
    spec = json.loads(Path(path).read_text())
    torch.set_num_threads(int(spec.get("threads", 1)))
    torch.manual_seed(int(spec["seed"]))
    np.random.seed(int(spec["seed"]))
    return spec


def model(spec: dict) -> nn.Module:
    """A fresh edgesync/models/cnn.py SmallCNN, loaded from its file (it imports only torch), seeded by the spec."""
    loader = importlib.util.spec_from_file_location("edgesync_cnn", ROOT / "edgesync" / "models" / "cnn.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    torch.manual_seed(int(spec["seed"]))
    return module.SmallCNN(num_classes=10)


def images(x: np.ndarray) -> torch.Tensor:
    """uint8 (N, 28, 28) -> normalised float (N, 1, 28, 28), as EdgeSync's `to_tensor`."""
    return ((torch.from_numpy(x).float() / 255.0 - MEAN) / STD).unsqueeze(1)


def data(spec: dict) -> dict:
    """The training and test tensors (normalised), and each client's training indices (the partition file)."""
    arrays = np.load(spec["data"])
    parts = json.loads(Path(spec["partition"]).read_text())
    if len(parts) != spec["clients"]:
        raise SystemExit(f"{spec['partition']}: {len(parts)} clients, the spec says {spec['clients']}")
    return {"x_train": images(arrays["x_train"]), "y_train": torch.from_numpy(arrays["y_train"]).long(),
            "x_test": images(arrays["x_test"][: spec["test_size"]]),
            "y_test": torch.from_numpy(arrays["y_test"][: spec["test_size"]]).long(),
            "parts": [np.asarray(p, dtype=np.int64) for p in parts]}


@torch.no_grad()
def evaluate(net: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1000) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of `net` on (x, y)."""
    was = net.training
    net.eval()
    hits, loss = 0, 0.0
    for i in range(0, len(y), batch):
        out = net(x[i:i + batch])
        loss += nn.functional.cross_entropy(out, y[i:i + batch], reduction="sum").item()
        hits += (out.argmax(1) == y[i:i + batch]).sum().item()
    net.train(was)
    return hits / len(y), loss / len(y)


