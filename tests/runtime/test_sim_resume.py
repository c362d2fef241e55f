"""A simulated run that was stopped goes on entry by entry (runtime/bookkeeping/finished_entries.py): the entries
that finished are kept, the one cut short runs again from its start, and the folder ends as an uninterrupted
run's, row for row."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesync.config import load_scenario
from edgesync.runtime.bookkeeping.checkpoint import CheckpointError
from edgesync.runtime.runs import run_scenario
from edgesync.runtime.sim.simulator import Simulator

pytestmark = pytest.mark.slow
FILES = ("metrics.jsonl", "updates.jsonl", "clients.jsonl", "coordinator.jsonl")


def scenario(**overrides) -> dict:
    data = {"name": "resume", "seed": 3, "runtime": "sim", "seeds": [0, 1],
            "dataset": {"name": "fashion_mnist", "train_size": 600},
            "clients": ["x1", "x2", "x4"],
            "algorithms": [{"name": "asgd", "lr": 0.05}, {"name": "ssgd", "lr": 0.1}],
            "stop": {"time_budget_s": 0.6, "target_acc": None},
            "eval": {"every_s": 0.2, "test_size": 100},
            "sim": {"base_step_s": 0.02, "server_time": "zero"}}
    data.update(overrides)
    return data


def rows(folder: Path) -> dict[str, list[dict]]:
    return {name: [{k: v for k, v in json.loads(line).items() if k != "wall_clock"}
                   for line in (folder / name).read_text().splitlines()] for name in FILES}


def test_a_stopped_simulated_run_resumes_to_the_uninterrupted_runs_rows(tmp_path, monkeypatch):
    whole = tmp_path / "whole"
    run_scenario(load_scenario(scenario()), whole, progress=False)

    # Stopped inside its third entry (seed 1's asgd), after that entry wrote its evaluations, updates and
    # coordinator row but before its clients' rows: the entry did not finish.
    stopped = tmp_path / "stopped"
    original, calls = Simulator._log_clients, []

    def stop_at_the_third(self, end):
        calls.append(self.config.key)
        if len(calls) == 3:
            raise KeyboardInterrupt("stopped")
        return original(self, end)

    monkeypatch.setattr(Simulator, "_log_clients", stop_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        run_scenario(load_scenario(scenario()), stopped, progress=False)
    monkeypatch.setattr(Simulator, "_log_clients", original)
    cut = rows(stopped)
    assert {r["algorithm"] for r in cut["metrics.jsonl"]} == {"asgd@seed=0", "ssgd@seed=0", "asgd@seed=1"}
    assert {r["algorithm"] for r in cut["clients.jsonl"]} == {"asgd@seed=0", "ssgd@seed=0"}

    ran = []
    monkeypatch.setattr(Simulator, "_run_algorithm", lambda self, config, run=Simulator._run_algorithm: (
        ran.append(config.key), run(self, config))[1])
    summary = run_scenario(load_scenario(scenario()), stopped, progress=False, resume=True)
    assert ran == ["asgd@seed=1", "ssgd@seed=1"]  # the finished entries were kept, not run again
    assert rows(stopped) == rows(whole)
    assert summary == json.loads((whole / "summary.json").read_text())


def test_a_resume_refuses_another_scenario_or_a_folder_without_a_run(tmp_path):
    folder = tmp_path / "run"
    run_scenario(load_scenario(scenario(seeds=None)), folder, progress=False)
    with pytest.raises(CheckpointError, match="describes another run than the one asked for"):
        run_scenario(load_scenario(scenario(seeds=None, stop={"time_budget_s": 0.4, "target_acc": None})),
                     folder, progress=False, resume=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no run to resume"):
        run_scenario(load_scenario(scenario(seeds=None)), tmp_path / "empty", progress=False, resume=True)


def test_a_finished_run_resumed_runs_nothing_again(tmp_path, monkeypatch):
    folder = tmp_path / "run"
    run_scenario(load_scenario(scenario(seeds=None)), folder, progress=False)
    before = rows(folder)
    monkeypatch.setattr(Simulator, "_run_algorithm", lambda self, config: pytest.fail(f"{config.key} ran again"))
    run_scenario(load_scenario(scenario(seeds=None)), folder, progress=False, resume=True)
    assert rows(folder) == before
