"""A real tuned run in the simulator: the tuning runs train on train − validation and are tested on the
validation set, each entry's best point is chosen from them, and the final runs use it, tested on the test set."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import yaml

from edgesync.config.tune import DEFAULT_TUNING_SEED
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.bookkeeping.checkpoint import CheckpointError
from edgesync.runtime.runs import run_scenario
from edgesync.runtime.tuning import tune_entries
from edgesync.runtime.bookkeeping.workload import client_splits, scenario_dataset, validation_indices
from edgesync.config import load_scenario

VALIDATION, TEST = 97, 200  # 97 is prime: an accuracy k/97 is not j/200 unless it is 0 or 1
GRID = {"lr": [0.02, 0.1], "momentum": [0.5, 0.9]}
SCENARIO = {
    "name": "tuned", "seed": 1, "runtime": "sim",
    "dataset": {"name": "fashion_mnist", "train_size": 1000},
    "clients": ["x1", "x2"],
    # mini-batches of 8: what is checked is how points are run, chosen and used, not how well they learn
    "algorithms": [{"name": "asgd", "lr": 0.05, "batch_size": 8},
                   {"name": "dgc_async", "lr": 0.015, "momentum": 0.7, "rate": 0.05, "batch_size": 8}],
    "stop": {"time_budget_s": 2.0, "target_acc": 0.3},
    "eval": {"every_s": 0.5, "test_size": TEST},
    "sim": {"base_step_s": 0.1, "server_time": "zero"},
    "tune": {"grid": GRID, "validation_size": VALIDATION, "seed": 4, "stop": {"time_budget_s": 1.5}},
}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The run folder of SCENARIO, run once for the module, and the tuning log lines."""
    out = tmp_path_factory.mktemp("tuned") / "run"
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("edgesync.tune")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        summary = run_scenario(load_scenario(SCENARIO), out, progress=False)
    finally:
        logger.removeHandler(handler)
    return out, summary, records


def integral(x: float) -> bool:
    return abs(x - round(x)) < 1e-3


@pytest.mark.slow
def test_the_tuning_runs_are_an_ordinary_run_folder_with_every_point(tuned):
    out, _, records = tuned
    labels = ["asgd@lr=0.02", "asgd@lr=0.1"] + [f"dgc_async@lr={lr},momentum={m}" for lr in GRID["lr"]
                                                for m in GRID["momentum"]]
    assert list(json.loads((out / "tuning" / "summary.json").read_text())) == labels
    assert (out / "tuning" / "report.md").exists()
    ran = yaml.safe_load((out / "tuning" / "scenario.yaml").read_text())
    assert ran["eval"]["on"] == "validation" and ran["seed"] == 4 and ran["stop"]["time_budget_s"] == 1.5
    assert records[0].startswith("tuning: 6 tuning runs: asgd 2 (not applicable: momentum), dgc_async 4; "
                                 f"trained on {1000 - VALIDATION} samples, chosen by final_acc on {VALIDATION} "
                                 "validation samples")
    assert "validation accuracy" in (out / "tuning" / "report.md").read_text()


def test_tuning_runs_are_tested_on_the_validation_set_and_final_runs_on_the_test_set(tuned):
    out, _, _ = tuned
    tuning_rows = read_jsonl(out / "tuning" / "metrics.jsonl")
    final_rows = read_jsonl(out / "metrics.jsonl")
    assert len(tuning_rows) > 6 and len(final_rows) > 2
    # accuracies are counts over the evaluation set: k/97 on validation, k/200 on the test set
    assert all(integral(r["test_acc"] * VALIDATION) for r in tuning_rows)
    assert all(integral(r["test_acc"] * TEST) for r in final_rows)
    assert not all(integral(r["test_acc"] * VALIDATION) for r in final_rows)
    assert max(r["time_s"] for r in tuning_rows) == 1.5 and max(r["time_s"] for r in final_rows) == 2.0


def test_each_entry_gets_its_best_point_and_the_final_runs_use_it(tuned):
    out, summary, _ = tuned
    record = json.loads((out / "tuning.json").read_text())
    validation = json.loads((out / "tuning" / "summary.json").read_text())
    assert record["validation"] == {"size": VALIDATION, "fraction": 0.097, "train_samples": 1000,
                                    "trained_on": 1000 - VALIDATION, "split_seed": record["validation"]["split_seed"],
                                    "stratified": True}
    assert record["metric"] == "final_acc" and record["seed"] == 4 and record["runs"] == 6
    final = yaml.safe_load((out / "scenario.yaml").read_text())
    for i, label in enumerate(["asgd", "dgc_async"]):
        entry = record["entries"][label]
        rows = {p["label"]: validation[p["label"]] for p in entry["points"]}
        assert [p["figure"] for p in entry["points"]] == [rows[p["label"]]["final_acc"] for p in entry["points"]]
        # the documented rule by hand: highest final accuracy, then highest best accuracy, then grid order
        assert not any(r["diverged"] for r in rows.values())
        order = list(rows)
        best = min(order, key=lambda k: (-rows[k]["final_acc"], -rows[k]["best_acc"], order.index(k)))
        assert entry["chosen_label"] == best and entry["figure"] == rows[best]["final_acc"]
        for key, value in entry["chosen"].items():
            assert final["algorithms"][i][key] == value  # the final run's recorded config
    assert record["entries"]["asgd"]["not_applicable"] == ["momentum"]
    assert record["entries"]["dgc_async"]["untuned"] == {"lr": 0.015, "momentum": 0.7}
    assert final["algorithms"][1]["rate"] == 0.05 and final["tune"]["grid"] == GRID and final["eval"]["on"] == "test"
    assert list(summary) == ["asgd", "dgc_async"]
    report = (out / "report.md").read_text()
    assert "## Tuning" in report and report.index("## Tuning") < report.index("## Clients")
    for label in ("asgd", "dgc_async"):
        chosen = ", ".join(f"{k}={v}" for k, v in record["entries"][label]["chosen"].items())
        assert f"| `{label}` | {chosen} |" in report


def test_the_final_runs_clients_train_on_what_the_tuning_runs_trained_on(tuned):
    out, _, _ = tuned
    final = load_scenario(yaml.safe_load((out / "scenario.yaml").read_text()))
    tuning = load_scenario(yaml.safe_load((out / "tuning" / "scenario.yaml").read_text()))
    labels = scenario_dataset(final.dataset).train_y
    held = validation_indices(final, labels)
    assert np.array_equal(held, validation_indices(tuning, labels)) and len(held) == VALIDATION
    for sc in (final, tuning):
        assert not set(np.concatenate(client_splits(sc, labels))) & set(held)


def test_a_resumed_folder_reuses_its_finished_tuning(tuned):
    out, _, _ = tuned
    scenario = load_scenario(yaml.safe_load((out / "scenario.yaml").read_text()))

    def must_not_run(*args):
        raise AssertionError("finished tuning was run again")

    final, resume = tune_entries(scenario, out, must_not_run, progress=False, resume=True)
    record = json.loads((out / "tuning.json").read_text())
    assert resume  # the final runs had started: they resume
    assert [a.lr for a in final.algorithms] == [record["entries"][k]["chosen"]["lr"] for k in ("asgd", "dgc_async")]
    other = load_scenario({**SCENARIO, "tune": {**SCENARIO["tune"], "grid": {"lr": [0.3]}}})
    with pytest.raises(CheckpointError, match="tuning.json was written for other tuning runs"):
        tune_entries(other, out, must_not_run, progress=False, resume=True)


def test_the_tuning_runs_use_one_seed_and_the_choice_serves_every_seed(tmp_path, monkeypatch):
    # the reports (the tuning runs' and the final runs') are the module run's to check; here the logs
    monkeypatch.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
    out = tmp_path / "seeds"
    scenario = {**SCENARIO, "seeds": [1, 2], "tune": {"grid": {"lr": [0.02, 0.1]}, "validation_size": VALIDATION}}
    summary = run_scenario(load_scenario(scenario), out, progress=False)
    tuning = yaml.safe_load((out / "tuning" / "scenario.yaml").read_text())
    assert tuning["seeds"] is None and tuning["seed"] == DEFAULT_TUNING_SEED  # one seed, none of the final runs'
    assert list(json.loads((out / "tuning" / "summary.json").read_text())) == [
        "asgd@lr=0.02", "asgd@lr=0.1", "dgc_async@lr=0.02", "dgc_async@lr=0.1"]
    record = json.loads((out / "tuning.json").read_text())
    final = yaml.safe_load((out / "scenario.yaml").read_text())
    assert final["seeds"] == [1, 2]
    assert [a["lr"] for a in final["algorithms"]] == [record["entries"][k]["chosen"]["lr"] for k in ("asgd", "dgc_async")]
    runs = {r["algorithm"] for r in read_jsonl(out / "metrics.jsonl")}
    assert runs == {"asgd@seed=1", "asgd@seed=2", "dgc_async@seed=1", "dgc_async@seed=2"}
    assert {"asgd@seed=1", "asgd@seed=2"} <= set(summary)
