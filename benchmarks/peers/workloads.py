"""The peer workloads (issue 38), defined once: every system reads the same spec, data file and partition.

    .venv/bin/python benchmarks/peers/workloads.py W1 --seed 0 [--work benchmarks/peers/.work]

writes, into the work folder (gitignored):
  fmnist.npz          Fashion-MNIST as uint8 arrays (x_train, y_train, x_test, y_test), from EdgeSync's IDX reader;
  partition-W1-s0.json  each client's training indices (Dirichlet 0.5 with the seed, EdgeSync's own partitioner,
                        so EdgeSync's run with the same seed holds exactly these lists);
  spec-W1-s0.json     the spec a peer's runner is given (`--spec`): see `spec()`.

Runs in EdgeSync's environment (it imports edgesync); the peers' runners read only the files.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
WORK = Path(__file__).resolve().parent / ".work"

# The common rules of every workload: FedAvg of the small CNN (edgesync/models/cnn.py) on Fashion-MNIST,
# Dirichlet(0.5) over the clients, plain SGD (no momentum, no weight decay), batch 32, each sampled client runs
# `local_steps` mini-batch steps from the round's model on its own shard (reshuffled each pass), the server
# averages the models weighted by the clients' sample counts. The global model is tested on the whole
# 10,000-image test set every `eval_every` rounds and after the last.
COMMON = {"model": "cnn", "dataset": "fashion_mnist", "alpha": 0.5, "lr": 0.05, "momentum": 0.0,
          "batch_size": 32, "local_steps": 5, "weighting": "samples", "eval_every": 5, "test_size": 10000,
          "threads": 1, "target_acc": 0.7}
WORKLOADS = {
    "W1": {"clients": 100, "per_round": 10, "rounds": 50, "mode": "sync"},
    "W2": {"clients": 1000, "per_round": 10, "rounds": 50, "mode": "sync"},
    # asynchronous aggregation on a virtual clock: one device in ten is ×10 slower; FedBuff with a buffer of
    # `buffer` updates, `concurrency` clients training at once; the run ends after `rounds` server updates.
    "W3": {"clients": 100, "per_round": 10, "rounds": 50, "mode": "async", "buffer": 10, "concurrency": 10,
           "slow_factor": 10, "slow_every": 10, "base_step_s": 0.02},
    # W3 with availability churn: each client is online for `online_s` then offline for `offline_s` (virtual
    # seconds), phases staggered by client; a client that drops while training loses its update.
    "W4": {"clients": 100, "per_round": 10, "rounds": 50, "mode": "async", "buffer": 10, "concurrency": 10,
           "slow_factor": 10, "slow_every": 10, "base_step_s": 0.02, "churn": {"online_s": 4.0, "offline_s": 1.0}},
}


def spec(workload: str, seed: int, work: Path = WORK) -> dict:
    """The spec of one run: the workload's settings, its seed and the paths of its files (absolute)."""
    if workload not in WORKLOADS:
        raise SystemExit(f"unknown workload {workload!r}: expected one of {', '.join(WORKLOADS)}")
    return {"workload": workload, "seed": seed, **COMMON, **WORKLOADS[workload],
            "data": str((work / "fmnist.npz").resolve()),
            "partition": str((work / f"partition-{workload}-s{seed}.json").resolve())}


def write_data(work: Path = WORK) -> Path:
    """fmnist.npz (once): the uint8 images and labels as EdgeSync loads them."""
    out = work / "fmnist.npz"
    if not out.exists():
        from edgesync.data.fashion_mnist import load_fashion_mnist

        d = load_fashion_mnist()
        work.mkdir(parents=True, exist_ok=True)
        tmp = work / "fmnist.tmp.npz"
        np.savez(tmp, x_train=d.train_x, y_train=d.train_y, x_test=d.test_x, y_test=d.test_y)
        tmp.rename(out)
    return out


def write_partition(s: dict) -> Path:
    """The clients' index lists, by EdgeSync's Dirichlet partitioner with the spec's seed."""
    from edgesync.data.partition import partition

    out = Path(s["partition"])
    if not out.exists():
        labels = np.load(s["data"])["y_train"]
        parts = partition(labels, s["clients"], "dirichlet", s["seed"], alpha=s["alpha"])
        out.write_text(json.dumps([p.tolist() for p in parts]))
    return out


def prepare(workload: str, seed: int, work: Path = WORK) -> Path:
    """Data, partition and spec files of one run; returns the spec's path."""
    work.mkdir(parents=True, exist_ok=True)
    write_data(work)
    s = spec(workload, seed, work)
    write_partition(s)
    path = work / f"spec-{workload}-s{seed}.json"
    path.write_text(json.dumps(s, indent=1))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=WORK)
    args = ap.parse_args()
    print(prepare(args.workload, args.seed, args.work))


if __name__ == "__main__":
    main()
