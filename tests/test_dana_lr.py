"""DANA's one learning rate is the one tuned for one worker on validation data (benchmarks/dana_lr.py), and every
place that runs DANA's experiments runs it."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from edgesync.config import load_scenario
from edgesync.reproduce.experiments import DANA_LR, EXPERIMENTS

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "data" / "dana_lr.json"
sys.path.insert(0, str(ROOT / "benchmarks"))

from dana_lr import chosen, render  # noqa: E402


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(RECORD.read_text())["data"]


def test_the_recorded_choice_follows_from_the_recorded_validation_runs(record):
    assert chosen(record["points"]) == record["chosen_lr"]
    assert record["seed"] not in (0, 1, 2, 3, 4)  # never an evaluation seed of reproduce
    assert record["metric"] == "final_acc" and record["validation"]["size"] == 2000


def test_a_choice_on_the_grids_edge_is_reported(record):
    lrs = [p["lr"] for p in record["points"]]
    assert bool(record["at_edge"]) == (record["chosen_lr"] in (min(lrs), max(lrs)))


def test_reproduce_and_the_scenario_run_the_chosen_rate(record):
    assert DANA_LR == record["chosen_lr"] == record["pinned_lr"]
    dana = [e for e in EXPERIMENTS if e.key.startswith("dana")]
    assert {e.key for e in dana} == {"dana", "dana_one", "dana_hetero"}
    for e in dana:
        for mode in (e.quick, e.full):
            scenario = load_scenario(ROOT / e.scenario, list(mode))
            assert {a.lr for a in scenario.algorithms} == {DANA_LR}, (e.key, mode)
    assert {a.lr for a in load_scenario(ROOT / "scenarios" / "dana_scale.yaml").algorithms} == {DANA_LR}


def test_the_table_marks_the_choice_and_says_when_reproduce_runs_another():
    data = {"seed": 100, "validation": {"size": 2000}, "metric": "final_acc", "at_edge": {}, "chosen_lr": 0.01,
            "pinned_lr": 0.02, "points": [{"lr": 0.005, "final_acc": 0.8, "best_acc": 0.81, "diverged": False},
                                          {"lr": 0.01, "final_acc": 0.85, "best_acc": 0.85, "diverged": False},
                                          {"lr": 0.02, "final_acc": None, "best_acc": None, "diverged": True}]}
    table = render(data)
    assert "| 0.01 | 0.8500 | 0.8500 | chosen |" in table and "| 0.02 | — | — | diverged |" in table
    assert "**not** the rate chosen here" in table
    assert chosen(data["points"]) == 0.01
