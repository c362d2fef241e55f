"""One final evaluation per entry (issue 32): an entry that ends at its time budget has each evaluation in
metrics.jsonl once — at t = 0, every eval.every_s, and its final model once — live, in the simulator (both
backends) and in a fresh `edgesync run scenarios/quickstart.yaml`. The resumed run's and the Flower
ServerApp's are in test_final_evaluation_resume.py and tests/flower/test_flower_final_evaluation.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

from evaluation_rows import assert_one_row_per_evaluation, rows_by_entry

REPO = Path(__file__).resolve().parents[2]


def test_a_live_entry_ended_by_its_time_budget_writes_its_final_evaluation_once(loopback):
    """The budget (2 s) is a multiple of every_s: an evaluation is due the moment the entry stops."""
    run = loopback(algorithms=[{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}],
                   stop={"time_budget_s": 2.0, "target_acc": None}, eval={"every_s": 0.5, "test_size": 200})
    run.start()
    run.join()
    assert run.error is None and not run.client_errors, (run.error, run.client_errors)
    entries = rows_by_entry(run.run_dir)
    assert set(entries) == {"ssgd", "asgd"}
    for key, rows in entries.items():
        assert_one_row_per_evaluation(key, rows, budget_s=2.0, every_s=0.5)


@pytest.mark.parametrize("backend", ["serial", pytest.param("ray", marks=[pytest.mark.slow, pytest.mark.ray])])
@pytest.mark.parametrize("budget_s", [3.0, 2.8])  # an evaluation due at the budget, and none
def test_a_simulated_entry_writes_each_evaluation_once(tmp_path, monkeypatch, request, backend, budget_s):
    if backend == "ray":
        request.getfixturevalue("local_ray")
    scenario = {"name": "final-sim", "seed": 1, "runtime": "sim",
                "dataset": {"name": "fashion_mnist", "train_size": 1000}, "clients": ["x1", "x3"],
                "algorithms": [{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}],
                "stop": {"time_budget_s": budget_s, "target_acc": None}, "eval": {"every_s": 0.5, "test_size": 200},
                "sim": {"base_step_s": 0.1, "server_time": "zero", "backend": backend}}
    run_scenario(load_scenario(scenario), tmp_path / "run", progress=False)
    entries = rows_by_entry(tmp_path / "run")
    assert set(entries) == {"ssgd", "asgd"}
    for key, rows in entries.items():
        assert_one_row_per_evaluation(key, rows, budget_s=budget_s, every_s=0.5)
        assert rows[-1]["time_s"] == budget_s  # the simulator's final model is the one at the budget


@pytest.mark.slow
def test_a_fresh_quickstart_writes_one_row_per_evaluation(tmp_path):
    """`make quickstart`'s command, shortened: 2 s per entry (an evaluation due at the budget, as its
    90 s and 2 s are), two clients, a slice of the data."""
    budget_s, every_s = 2.0, 1.0
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "edgesync.cli", "run", "scenarios/quickstart.yaml", "--out", str(out), "-q",
           "--set", f"stop.time_budget_s={budget_s}", "--set", f"eval.every_s={every_s}",
           "--set", "eval.test_size=200", "--set", "dataset.train_size=2000", "--set", "clients=[x1, x10]"]
    result = subprocess.run(cmd, cwd=REPO, env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}, capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    entries = rows_by_entry(out)
    assert set(entries) == {"ssgd", "asgd"}
    for key, rows in entries.items():
        assert_one_row_per_evaluation(key, rows, budget_s=budget_s, every_s=every_s)
