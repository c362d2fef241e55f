"""A diverging algorithm ends early, marked as such, and the run goes on with the next one."""
from __future__ import annotations

import json

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario


@pytest.mark.slow
def test_divergence_ends_that_algorithm_only(tmp_path, monkeypatch):
    scenario = load_scenario({
        "name": "diverge", "runtime": "sim", "clients": ["x1", "x1"], "dataset": {"train_size": 1000},
        "sim": {"base_step_s": 0.01}, "eval": {"every_s": 0.5, "test_size": 200},
        "algorithms": [{"name": "asgd", "lr": 1e30}, {"name": "ssgd", "lr": 0.1}],
        "stop": {"time_budget_s": 2.0, "target_acc": None},
    })
    run_scenario(scenario, tmp_path / "run", progress=False)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    asgd = [r for r in rows if r["algorithm"] == "asgd"]
    assert asgd[-1]["diverged"] is True and asgd[-1]["time_s"] < 2.0  # stopped at the first bad evaluation
    assert [r["time_s"] for r in rows if r["algorithm"] == "ssgd"][-1] == 2.0  # the next one ran in full
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["asgd"]["diverged"] is True and summary["ssgd"]["diverged"] is False
