"""A model that learned and then fell back to chance, with a finite loss, is diverged: the entry ends there
(`stop.collapse_evals` evaluations in a row at chance), in the simulator and live alike, instead of training on
to its budget (issue 34: a live run collapsed to chance ran its whole budget)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from edgesync.config import load_scenario
from edgesync.config.stop_eval import StopSpec
from edgesync.metrics.recorder import RunRecorder, read_jsonl
from edgesync.runtime.bookkeeping.accounting import AlgorithmAccount
from edgesync.runtime.runs import run_scenario


def _account(tmp_path, **stop) -> AlgorithmAccount:
    recorder = RunRecorder(tmp_path / "run")
    return AlgorithmAccount(SimpleNamespace(key="asgd"), StopSpec(target_acc=None, **stop), recorder,
                            chance_acc=0.1)


def _feed(account: AlgorithmAccount, accs: list[float]) -> list[bool]:
    """Whether the entry should stop after each evaluation, at a finite loss."""
    stops = []
    for i, acc in enumerate(accs):
        account.log_eval({"algorithm": "asgd", "time_s": float(i), "updates": i}, acc, 2.3)
        stops.append(account.should_stop(float(i), i))
    return stops


def test_three_evaluations_at_chance_after_learning_end_the_entry(tmp_path):
    # worked by hand (chance 0.1: learned once best ≥ 0.2; at chance at ≤ 0.12): 0.10 and 0.11 before learning
    # count nothing; after 0.62, the run 0.10, 0.12 is broken by 0.30; then 0.10, 0.09, 0.11 is the third in a row
    account = _account(tmp_path)
    stops = _feed(account, [0.10, 0.11, 0.45, 0.62, 0.10, 0.12, 0.30, 0.10, 0.09, 0.11])
    assert stops == [False] * 9 + [True]
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert rows[-1]["diverged"] is True and rows[-1]["collapsed"] is True
    assert not any(r.get("diverged") for r in rows[:-1])


def test_a_model_that_never_learned_is_not_called_diverged(tmp_path):
    assert not any(_feed(_account(tmp_path), [0.10] * 8))  # learned nothing: it runs to its budget


def test_the_rule_follows_its_setting(tmp_path):
    assert _feed(_account(tmp_path, collapse_evals=1), [0.5, 0.1]) == [False, True]
    assert not any(_feed(_account(tmp_path / "off", collapse_evals=None), [0.5] + [0.1] * 6))


@pytest.mark.slow
def test_the_simulator_ends_a_collapsed_entry_and_runs_the_next(tmp_path, monkeypatch):
    # the evaluation is replaced by a model that learns, then forgets: the wiring (classes → chance) is what runs
    accs = iter([0.1, 0.5, 0.7, 0.1, 0.1, 0.1] + [0.1] * 100)
    monkeypatch.setattr("edgesync.runtime.sim.simulator.evaluate_state",
                        lambda *args: (next(accs), 2.3))
    scenario = load_scenario({
        "name": "collapse", "runtime": "sim", "clients": ["x1", "x1"], "dataset": {"train_size": 500},
        "sim": {"base_step_s": 0.01}, "eval": {"every_s": 0.1, "test_size": 100},
        "algorithms": [{"name": "asgd"}], "stop": {"time_budget_s": 2.0, "target_acc": None}})
    run_scenario(scenario, tmp_path / "run", progress=False)
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert rows[-1]["diverged"] is True and rows[-1]["time_s"] < 1.0  # three at chance after learning: 0.5 s
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["asgd"]["diverged"] is True
