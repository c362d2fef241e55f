"""Straggler mitigations under Flower: the ServerApp's coordinator keeps the rounds (a backup worker; a deadline
it wakes for, `due()`), and the real ClientApp stops its local steps by a partial-work deadline — on three
in-process SuperNodes (fake_grid.py), one of them a ×10 device."""
from __future__ import annotations

from edgesync.metrics.recorder import read_jsonl

from flower_scenario import small_scenario
from test_flower_adapter import run_on


def test_backup_workers_and_partial_work_over_flower(fake_grid, tmp_path):
    scenario = small_scenario(
        dataset={"name": "fashion_mnist", "train_size": 600}, clients=["x1", "x1", "x10"],
        algorithms=[{"name": "ssgd", "label": "backup", "lr": 0.05, "backup_workers": 1},
                    {"name": "local_sgd", "label": "partial", "lr": 0.05, "local_steps": 6, "deadline_median": 1.0,
                     "partial_work": "accept"}],
        stop={"time_budget_s": 120, "max_updates": 6, "target_acc": None}, eval={"every_s": 30.0, "test_size": 200})
    summary = run_on(fake_grid([{}, {}, {}]), scenario, tmp_path / "run")
    assert summary["backup"]["updates"] == summary["partial"]["updates"] == 6
    rows = read_jsonl(tmp_path / "run" / "updates.jsonl")
    backup = [r for r in rows if r["algorithm"] == "backup" and "contributors" in r]
    assert all(len(r["contributors"]) == 2 for r in backup)  # each round closed at its first two gradients
    # partial work: round 0 sets its deadline from its own reports (nobody timed) and drops the ×10 device's 6
    # steps if they come after it; from then on every client is told the time left to 1 × the median round time, and the ×10 device
    # reports what it ran in it: fewer steps, none discarded
    clients = {(r["algorithm"], r["client"]): r for r in read_jsonl(tmp_path / "run" / "clients.jsonl")}
    slow = clients[("partial", 2)]
    assert slow["wasted_steps"] <= 6  # round 0's at most (a loaded host may let it make round 0)
    # (on a loaded host its round-0 steps may outlast the entry: then it reports in no round)
    assert slow["rounds"] == 0 or slow["steps"] < clients[("partial", 0)]["steps"]
    partial = [r for r in rows if r["algorithm"] == "partial" and "contributors" in r]
    assert len(partial) == 6 and all({0, 1} <= set(r["contributors"]) for r in partial)
