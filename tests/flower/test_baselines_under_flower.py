"""The standard FL baselines under Flower: FedProx, FedAvgM, FedAdam, FedYogi, FedAdagrad, SCAFFOLD and FedNova, one
entry each of one scenario, driven by the ServerApp's coordinator through the real ClientApp on two in-process
SuperNodes (fake_grid.py: one start-up for all seven). Each is synchronous and asks the server nothing
mid-instruction, so each runs there as it does on EdgeSync's own clients."""
from __future__ import annotations

import math

from edgesync.metrics.recorder import read_jsonl

from flower_scenario import small_scenario
from test_flower_adapter import run_on

BASELINES = ["fedprox", "fedavgm", "fedadam", "fedyogi", "fedadagrad", "scaffold", "fednova"]
ROUNDS = 2


def test_every_baseline_trains_over_flower(fake_grid, tmp_path):
    scenario = small_scenario(dataset={"name": "fashion_mnist", "train_size": 600}, clients=["x1", "x1"],
                              algorithms=[{"name": name, "lr": 0.05, "local_steps": 4} for name in BASELINES],
                              stop={"time_budget_s": 120, "max_updates": ROUNDS, "target_acc": None},
                              eval={"every_s": 30.0, "test_size": 200})
    summary = run_on(fake_grid([{}, {}]), scenario, tmp_path / "run")
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    for name in BASELINES:
        first, *_, last = [r for r in rows if r["algorithm"] == name]
        assert first["updates"] == 0 and last["updates"] == summary[name]["updates"] == ROUNDS, name
        assert math.isfinite(last["test_loss"]) and last["test_loss"] < first["test_loss"], (name, first, last)
        assert last["test_acc"] > first["test_acc"] + 0.1, (name, first, last)  # θ₀ is at chance, 0.1
    # SCAFFOLD's c_i went from one ClientApp message to the next in context.state: a c_i lost between rounds
    # would have restarted the control variates (a control_reset row)
    assert not [u for u in read_jsonl(tmp_path / "run" / "updates.jsonl") if "control_reset" in u]
