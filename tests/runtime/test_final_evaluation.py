"""One final evaluation per entry (issue 32): an entry that ends at its time budget has each evaluation in
metrics.jsonl once — at t = 0, every eval.every_s, and its final model once — live, in the simulator (both
backends) and in a fresh `edgesync run scenarios/quickstart.yaml`. The resumed run's and the Flower
ServerApp's are in test_final_evaluation_resume.py and tests/flower/test_flower_final_evaluation.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

from evaluation_rows import assert_one_row_per_evaluation, rows_by_entry
from threaded_clients import threaded_clients  # noqa: F401 - a fixture

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
def test_a_fresh_quickstart_writes_one_row_per_evaluation(tmp_path, threaded_clients):
    """`make quickstart`'s command, shortened: 2 s per entry (an evaluation due at the budget, as its
    90 s and 2 s are), two clients, a slice of the data, mini-batches of 8 and a fixed 100 ms ×1 step (the
    rows are checked, not learning or pacing). The command runs in this process (typer's CliRunner) with
    its clients in threads (threaded_clients.py): processes are not what is checked."""
    import logging

    from typer.testing import CliRunner

    from edgesync.cli.app import app

    budget_s, every_s = 2.0, 1.0
    out = tmp_path / "run"
    args = ["run", str(REPO / "scenarios" / "quickstart.yaml"), "--out", str(out), "-q",
            "--set", f"stop.time_budget_s={budget_s}", "--set", f"eval.every_s={every_s}",
            "--set", "eval.test_size=200", "--set", "dataset.train_size=2000", "--set", "clients=[x1, x10]",
            "--set", "algorithms.0.batch_size=8", "--set", "algorithms.1.batch_size=8",
            "--set", "emulation.base_step_ms=100"]
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        result = CliRunner().invoke(app, args)
    finally:  # `edgesync run` points the root logger at the run's log (runs.log_to): put pytest's back
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:], root.level = handlers, level
    assert result.exit_code == 0, (result.output[-3000:], result.exception)
    entries = rows_by_entry(out)
    assert set(entries) == {"ssgd", "asgd"}
    for key, rows in entries.items():
        assert_one_row_per_evaluation(key, rows, budget_s=budget_s, every_s=every_s)
