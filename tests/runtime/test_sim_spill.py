"""Updates in flight past `sim.spill_mb` wait on disk (runtime/sim/spill.py): bit for bit the same run."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from edgesync.algorithms.machinery.base import Update
from edgesync.runtime.runs import run_scenario
from edgesync.runtime.sim.spill import Spill, Spilled
from edgesync.config import load_scenario


def test_an_update_past_the_limit_goes_to_disk_and_comes_back_bit_for_bit():
    spill = Spill(limit_mb=1)  # room for one 0.5 MB update
    first = Update({"grad": torch.randn(131072)}, {"steps": 1})
    second = Update({"grad.val": torch.randn(131072), "grad.idx": torch.arange(131072)}, {"steps": 2})
    kept, waiting = spill.keep(first), spill.keep(second)
    assert kept is first and isinstance(waiting, Spilled) and waiting.path.exists()
    back = spill.take(waiting)
    assert not waiting.path.exists() and back.meta == {"steps": 2}
    assert torch.equal(back.tensors["grad.val"], second.tensors["grad.val"])
    assert back.tensors["grad.idx"].dtype == torch.int64 and torch.equal(back.tensors["grad.idx"], second.tensors["grad.idx"])
    spill.take(kept)
    assert spill.held == 0
    folder = spill.folder
    spill.clear()
    assert not folder.exists()


def run(tmp_path: Path, name: str, spill_mb) -> dict[str, list[dict]]:
    """0.5 virtual s: about 100 update rows, and dozens of updates in flight past a 0.8 MB limit."""
    data = {
        "name": "spill", "seed": 2, "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 1200},
        "clients": ["x1", "x2", "gamma-hetero", {"profile": "x1", "link": {"rate_mbps": 5, "latency_ms": 80}}],
        # mini-batches of 8: what is compared is the bookkeeping of updates in flight, not what they learn
        "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 8},
                       {"name": "fedbuff", "local_steps": 2, "buffer_size": 2, "lr": 0.05, "batch_size": 8}],
        "stop": {"time_budget_s": 0.5, "target_acc": None},
        "eval": {"every_s": 0.25, "test_size": 200},
        "sim": {"base_step_s": 0.02, "server_time": "zero", "spill_mb": spill_mb},
    }
    out = tmp_path / name
    run_scenario(load_scenario(data), out, progress=False)
    return {f: [{k: v for k, v in json.loads(line).items() if k != "wall_clock"}
                for line in (out / f).read_text().splitlines()] for f in ("metrics.jsonl", "updates.jsonl")}


@pytest.mark.slow
def test_a_run_that_spills_writes_the_same_results_as_one_that_keeps_everything(tmp_path, caplog, monkeypatch):
    with monkeypatch.context() as mp:  # what is compared is the logs: only the spilled run renders its report
        mp.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
        kept = run(tmp_path, "kept", None)
    caplog.set_level(logging.INFO, "edgesync.sim")
    spilled = run(tmp_path, "spilled", 0.8)  # one CNN update (0.74 MB) in memory, the rest on disk
    assert "updates in flight waited on disk" in caplog.text
    assert spilled == kept and len(kept["updates.jsonl"]) > 50


@pytest.mark.slow
def test_the_10k_clients_scenario_scaled_down_runs_both_entries(tmp_path, monkeypatch):
    from edgesync.config import load_scenario

    monkeypatch.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)  # the metrics are checked

    path = Path(__file__).resolve().parents[2] / "scenarios" / "sim_10k_clients.yaml"
    # 150 clients, FedAvg drawing 25 a round (the scenario: 100 of 10,000); ASGD's 150 updates in flight
    # (0.74 MB each) are past the 20 MB limit
    sc = load_scenario(path, ["clients.count=150", "algorithms.0.clients_per_round=25", "stop.time_budget_s=3",
                              "stop.max_updates=400", "sim.spill_mb=20", "eval.test_size=200"])
    run_scenario(sc, tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first = {r["algorithm"]: r for r in reversed(rows)}
    last = {r["algorithm"]: r for r in rows}
    assert last["fedavg"]["time_s"] == 3 and last["fedavg"]["updates"] >= 2  # rounds of 25 clients
    assert last["asgd"]["updates"] == 400
    for entry in ("fedavg", "asgd"):  # both learn from θ₀
        assert last[entry]["test_acc"] > first[entry]["test_acc"] + 0.05
