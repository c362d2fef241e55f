"""LEAF's naturally partitioned data end to end, on files written in LEAF's real layout (the real data cannot be
downloaded here): the Shakespeare scenario in the simulator and live, FEMNIST in the simulator. Each run trains
LEAF's model on each client's own user, writes its partition, and measures every client on its user's own test
samples; validation without the data says what is missing and where to put it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgesync.cli.validate import _missing_data
from edgesync.config import load_scenario
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.testing.leaf_files import write_femnist, write_shakespeare

from loopback_run import LoopbackRun

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
# a fixed 10 ms base step and no coordinator cost model (no calibration runs: these tests are about the data),
# and about ten steps per client: the simulator really trains
SHORT = ["stop.budget_base_steps=null", "stop.time_budget_s=0.12", "eval.every_s=0.06", "eval.test_size=200",
         "sim.base_step_s=0.01", "sim.server_time=zero"]


def _scenario(name: str, root: Path, clients: int, *sets: str):
    return load_scenario(SCENARIOS / f"{name}.yaml", [f"dataset.root={root}", f"clients={clients}", *SHORT, *sets])


def test_the_shakespeare_scenario_in_the_simulator_reports_its_split_and_each_roles_accuracy(tmp_path, plots):
    root = tmp_path / "shakespeare"
    write_shakespeare(root, roles=10)
    sc = _scenario("shakespeare_natural", root, 10,
                   "algorithms=[{name: local_sgd, label: fedavg, lr: 0.8, batch_size: 10, local_steps: 2, "
                   "clients_per_round: 5}, {name: esync, lr: 0.8, batch_size: 10}]")
    run = tmp_path / "run"
    summary = run_scenario(sc, run, progress=False)
    split = json.loads((run / "partition.json").read_text())[""]
    assert split["dataset"] == "shakespeare" and split["num_classes"] == 80 and len(split["clients"]) == 10
    assert all(c["kind"] == "natural" and c["samples"] > 0 for c in split["clients"])
    assert sum(c["samples"] for c in split["clients"]) == split["train_samples"]  # ten roles, all of them taken
    for label in ("fedavg", "esync"):
        rows = [r for r in read_jsonl(run / "clients.jsonl") if r["algorithm"] == label]
        assert len(rows) == 10 and all(r["final_acc_on"] == "own" and 0.0 <= r["final_acc"] <= 1.0 for r in rows)
        entry = summary[label]
        assert entry["updates"] > 0 and entry["client_eval"] == "own"
        assert entry["client_acc_worst"] == min(r["final_acc"] for r in rows)
        assert entry["client_acc_mean"] == pytest.approx(sum(r["final_acc"] for r in rows) / 10)
    report = (run / "report.md").read_text()
    assert "## Data partition" in report and "split `natural` among 10 clients" in report
    assert "## Per-client accuracy" in report and "each client's own test split" in report
    assert (run / "plots" / "partition.png").stat().st_size > 1000


def test_femnist_writers_train_leafs_cnn_in_the_simulator_with_fewer_clients_than_writers(tmp_path):
    root = tmp_path / "femnist"
    write_femnist(root, writers=20)
    sc = _scenario("femnist_natural", root, 6,
                   "algorithms=[{name: fedbuff, lr: 0.06, batch_size: 10, local_steps: 2, buffer_size: 3}]")
    summary = run_scenario(sc, tmp_path / "run", progress=False)
    split = json.loads((tmp_path / "run" / "partition.json").read_text())[""]
    assert split["num_classes"] == 62 and len(split["clients"]) == 6  # a seeded draw of 6 of the 20 writers
    assert sum(c["samples"] for c in split["clients"]) < split["train_samples"]
    assert summary["fedbuff"]["updates"] > 0 and summary["fedbuff"]["client_eval"] == "own"


def test_the_shakespeare_scenario_live_trains_the_lstm_and_measures_each_role(tmp_path):
    root = tmp_path / "shakespeare"
    write_shakespeare(root, roles=4)
    sc = _scenario("shakespeare_natural", root, 4, "runtime=live", "stop.time_budget_s=2",
                   "algorithms=[{name: fedprox, lr: 0.8, batch_size: 10, local_steps: 2}]")
    run = LoopbackRun(sc.model_dump(mode="json", exclude_none=True), tmp_path / "run").start()
    run.join()
    assert run.error is None and not run.client_errors
    final = read_jsonl(tmp_path / "run" / "metrics.jsonl")[-1]
    assert final["updates"] > 0 and "client_acc" not in final  # per-client figures go to clients.jsonl
    rows = read_jsonl(tmp_path / "run" / "clients.jsonl")
    assert len(rows) == 4 and all(r["final_acc_on"] == "own" and 0.0 <= r["final_acc"] <= 1.0 for r in rows)


def test_validating_the_natural_scenarios_without_their_data_says_what_is_missing_and_where(monkeypatch, tmp_path):
    monkeypatch.delenv("EDGESYNC_DATA", raising=False)
    for name, title in (("femnist_natural", "FEMNIST"), ("shakespeare_natural", "Shakespeare")):
        note = _missing_data(load_scenario(SCENARIOS / f"{name}.yaml", [f"dataset.root={tmp_path}"]))
        assert note is not None and f"dataset {name.split('_')[0]} is not on this machine" in note
        assert str(tmp_path) in note and "preprocess.sh" in note


def test_every_family_of_algorithm_trains_the_lstm_on_tokens_unchanged(tmp_path):
    """An algorithm sees a flat parameter vector, whatever the model eats: one of each family besides those the
    tests above run (synchronous SSGD, asynchronous ASGD, DGS's sparsified updates, SHAT's shards) trains LEAF's
    LSTM on token sequences and ends with each role measured."""
    root = tmp_path / "shakespeare"
    write_shakespeare(root, roles=4)
    names = ["ssgd", "asgd", "dgs", "shat"]
    entries = ", ".join(f"{{name: {n}, lr: 0.5, batch_size: 10}}" for n in names)
    sc = _scenario("shakespeare_natural", root, 2, f"algorithms=[{entries}]")
    summary = run_scenario(sc, tmp_path / "run", progress=False)
    for name in names:
        assert summary[name]["updates"] > 0, name
        assert summary[name]["client_eval"] == "own" and summary[name]["client_acc_mean"] is not None, name
