"""LEAF's Sent140 and CelebA end to end in the simulator, on small files written in LEAF's real layout (the real
data cannot be downloaded here): each run trains LEAF's model on each client's own user (`partition: natural`)
and measures every client on its user's own test samples. Tiny budgets: a couple of seconds each."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesync.config import load_scenario
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.testing.leaf_files import write_celeba, write_sent140


@pytest.mark.parametrize("name, model, write, users", [
    ("sent140", "leaf_sent140_lstm", write_sent140, 6),
    ("celeba", "leaf_celeba_cnn", write_celeba, 4),
])
def test_leaf_users_train_leafs_model_in_the_simulator(tmp_path: Path, name, model, write, users) -> None:
    root = tmp_path / name
    write(root, users=users)
    sc = load_scenario({
        "name": f"{name}_natural", "seed": 0, "runtime": "sim", "clients": 3,
        "dataset": {"name": name, "root": str(root)}, "model": {"name": model}, "partition": {"kind": "natural"},
        "algorithms": [{"name": "local_sgd", "label": "fedavg", "lr": 0.1, "batch_size": 4, "local_steps": 2}],
        # a fixed 10 ms base step and no coordinator cost model (no calibration: these runs are about the data)
        "sim": {"base_step_s": 0.01, "server_time": "zero"},
        "stop": {"budget_base_steps": 24}, "eval": {"every_s": 0.06, "test_size": 50}})
    run = tmp_path / "run"
    summary = run_scenario(sc, run, progress=False)
    split = json.loads((run / "partition.json").read_text())[""]
    assert split["dataset"] == name and split["num_classes"] == 2 and len(split["clients"]) == 3
    assert all(c["kind"] == "natural" and c["samples"] > 0 for c in split["clients"])
    assert sum(c["samples"] for c in split["clients"]) < split["train_samples"]  # a seeded draw of 3 users
    rows = read_jsonl(run / "clients.jsonl")
    assert len(rows) == 3 and all(r["final_acc_on"] == "own" and 0.0 <= r["final_acc"] <= 1.0 for r in rows)
    assert summary["fedavg"]["updates"] > 0 and summary["fedavg"]["client_eval"] == "own"
