"""What every peer's runner shares (issue 38): the spec, the data as tensors, the clients' index lists, the very
model EdgeSync trains, the test, and the result file. Needs only numpy and torch, so that it runs in each
peer's own virtual environment (benchmarks/peers/setup.sh NAME) without EdgeSync installed.

A runner is `python benchmarks/peers/run_NAME.py --spec SPEC.json --out RESULT.json`; it writes `result()`.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
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


def eval_rounds(spec: dict) -> set[int]:
    """The rounds after which the global model is tested: every `eval_every`-th and the last."""
    return set(range(spec["eval_every"], spec["rounds"] + 1, spec["eval_every"])) | {spec["rounds"]}


def result(peer: str, version: str, curve: list[dict], spec: dict, **extra) -> dict:
    """The runner's result: its curve (`round`, `acc`, `loss`, and `sim_time_s` on a virtual clock), the final
    accuracy, the virtual time to the spec's target accuracy (None: not reached or no virtual clock)."""
    final = curve[-1]["acc"] if curve else None
    reach = next((p.get("sim_time_s") for p in curve if p["acc"] >= spec["target_acc"]), None)
    return {"peer": peer, "version": version, "workload": spec["workload"], "seed": spec["seed"], "curve": curve,
            "final_acc": final, "sim_time_to_target_s": reach, **extra}


def write(out: str | Path, res: dict) -> None:
    Path(out).write_text(json.dumps(res, indent=1))


class Timer:
    """Wall time of the runner's own work (from after the imports), beside the harness's whole-process time."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.t0


def args(argv: list[str] | None = None):
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    return ap.parse_args(argv if argv is not None else sys.argv[1:])
