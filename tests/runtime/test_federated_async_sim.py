"""FedAsync and FedBuff end to end in the simulator on real Fashion-MNIST (3 clients, one ×2).

Each trains the CNN for 3 virtual seconds (5 local steps of mini-batches of 16 per pull, FedBuff flushing
every 3 contributions): accuracy rises well above chance, and updates.jsonl has the lag and gap of every
applied update (FedBuff: of every contribution), some of them stale.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """One run for the module (its logs and summary are checked, not its report: not drawn)."""
    out = tmp_path_factory.mktemp("federated_async") / "run"
    mp = pytest.MonkeyPatch()
    mp.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
    try:
        run_scenario(load_scenario({
            "name": "federated-async", "seed": 1, "runtime": "sim",
            "dataset": {"name": "fashion_mnist", "train_size": 1000},
            "clients": ["x1", "x1", "x2"],
            "algorithms": [{"name": "fedasync", "lr": 0.05, "local_steps": 5, "batch_size": 16},
                           {"name": "fedbuff", "lr": 0.05, "local_steps": 5, "buffer_size": 3, "batch_size": 16}],
            "stop": {"time_budget_s": 3.0, "target_acc": None},
            "eval": {"every_s": 3.0, "test_size": 500},  # at the start and the end: the first and last are checked
            "sim": {"base_step_s": 0.05, "server_time": "zero"},
        }), out, progress=False)
    finally:
        mp.undo()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fedasync", "fedbuff"])
def test_accuracy_rises_above_chance_and_lag_and_gap_are_logged(run_dir, name):
    metrics = [r for r in read_jsonl(run_dir / "metrics.jsonl") if r["algorithm"] == name]
    assert metrics[0]["test_acc"] < 0.3 and metrics[-1]["test_acc"] > 0.4  # chance: 0.1; here about 0.6
    rows = [r for r in read_jsonl(run_dir / "updates.jsonl") if r["algorithm"] == name]
    # 3 s of 0.05 s steps, 5 per pull: 12 pulls from each ×1 client, 6 from the ×2 one
    flushes = {"fedasync": 1, "fedbuff": 3}[name]
    assert len(rows) >= 25 and metrics[-1]["updates"] == len(rows) // flushes
    assert all(r["lag"] >= 0 and r["gap"] >= 0 and r["gap_normalized"] is not None for r in rows)
    assert any(r["lag"] > 0 for r in rows) and any(r["gap"] > 0 for r in rows)
    assert json.loads((run_dir / "summary.json").read_text())[name]["mean_lag"] > 0  # the report's staleness
