"""`edgesync run --parallel N`: a simulated sweep's variants and seeds as Ray tasks, two at a time; the run
folder is the one-at-a-time run's (wall-clock stamps apart), including what the run measured."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.usefixtures("local_ray")]  # conftest.py: Ray here, 2 CPUs


def rows(run_dir: Path, file: str) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "wall_clock"}
            for line in (run_dir / file).read_text().splitlines()]


def test_seeds_and_a_sweep_two_at_a_time_write_the_one_at_a_time_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGESYNC_CACHE", str(tmp_path / "cache"))  # empty: the step time is measured once
    data = {"name": "parallel", "runtime": "sim", "seeds": [0, 1],
            "dataset": {"name": "fashion_mnist", "train_size": 1200}, "clients": ["x1", "x3", "x1"],
            "algorithms": [{"name": "asgd", "lr": 0.05}, {"name": "local_sgd", "lr": 0.05, "local_steps": 2}],
            "sweep": {"algorithms.0.lr": [0.05, 0.1]},
            "stop": {"time_budget_s": 0.6, "target_acc": None}, "eval": {"every_s": 0.2, "test_size": 200},
            "sim": {"server_time": "zero"}}
    parallel = tmp_path / "parallel"
    summary = run_scenario(load_scenario(data), parallel, progress=False, parallel=2)
    assert not (parallel / "parts").exists()
    one_at_a_time = tmp_path / "serial"
    assert run_scenario(load_scenario(data), one_at_a_time, progress=False) == summary
    for file in ("metrics.jsonl", "updates.jsonl", "clients.jsonl"):
        assert rows(parallel, file) == rows(one_at_a_time, file), file
    labels = {r["algorithm"] for r in rows(parallel, "metrics.jsonl")}
    assert len(labels) == 2 * 2 * 2  # two entries × two lr values × two seeds
    resolved = [yaml.safe_load((d / "scenario.yaml").read_text())["sim"] for d in (parallel, one_at_a_time)]
    assert resolved[0]["measured_step_s"] == resolved[1]["measured_step_s"] != {}
