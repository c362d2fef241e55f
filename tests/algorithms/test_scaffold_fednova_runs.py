"""SCAFFOLD (both options) and FedNova end to end on real Fashion-MNIST (1,000 samples): in the simulator beside
FedAvg (three clients, one ×2, six rounds of 5 local steps), and SCAFFOLD live over loopback TCP
(tests/runtime/loopback_run.py), its clients' c_i kept between instructions over real sockets. Every run
finishes its rounds, counts its bytes and beats chance (0.1)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from edgesync.algorithms.scaffold import ScaffoldServer
from edgesync.config import load_scenario
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from loopback_run import LoopbackRun, small_scenario  # noqa: E402

ROUNDS = 6
BATCH = 16
LABELS = ["fedavg", "scaffold", "scaffold_full", "fednova"]


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory) -> Path:
    """One simulated run of FedAvg, SCAFFOLD (option II and option I) and FedNova; its report is not drawn."""
    out = tmp_path_factory.mktemp("scaffold_fednova") / "run"
    common = {"lr": 0.05, "local_steps": 5, "batch_size": BATCH}
    mp = pytest.MonkeyPatch()
    mp.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
    try:
        run_scenario(load_scenario({
            "name": "scaffold-fednova", "seed": 1, "runtime": "sim",
            "dataset": {"name": "fashion_mnist", "train_size": 1000},
            "clients": ["x1", "x1", "x2"],
            "algorithms": [{"name": "local_sgd", "label": "fedavg", "weighted": True, **common},
                           {"name": "scaffold", **common},
                           {"name": "scaffold", "label": "scaffold_full", "control_option": 1, **common},
                           {"name": "fednova", **common}],
            "stop": {"time_budget_s": 100.0, "max_updates": ROUNDS, "target_acc": None},
            "eval": {"every_s": 100.0, "test_size": 500},  # at the start and at the end
            "sim": {"base_step_s": 0.05, "server_time": "zero"},
        }), out, progress=False)
    finally:
        mp.undo()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("label", LABELS)
def test_each_runs_its_rounds_in_the_simulator_and_beats_chance(sim_dir, label):
    metrics = [r for r in read_jsonl(sim_dir / "metrics.jsonl") if r["algorithm"] == label]
    assert metrics[0]["updates"] == 0 and metrics[0]["test_acc"] < 0.2
    assert metrics[-1]["updates"] == ROUNDS and metrics[-1]["test_acc"] > 0.3  # chance: 0.1
    summary = json.loads((sim_dir / "summary.json").read_text())[label]
    assert summary["updates"] == ROUNDS and not summary["diverged"]
    assert summary["bytes_up"] > 0 and summary["bytes_down"] > 0


@pytest.mark.slow
def test_scaffold_sends_twice_fedavgs_bytes_each_way_and_fednova_fedavgs(sim_dir):
    summary = json.loads((sim_dir / "summary.json").read_text())
    fedavg = summary["fedavg"]
    for label in ("scaffold", "scaffold_full"):  # x and c down, Δy and Δc up: per update, twice FedAvg's
        ours = summary[label]
        assert ours["bytes_up"] / ours["updates"] == pytest.approx(2 * fedavg["bytes_up"] / fedavg["updates"], rel=2e-3)
        assert ours["bytes_down"] / ours["updates"] == pytest.approx(2 * fedavg["bytes_down"] / fedavg["updates"],
                                                                      rel=2e-3)
    assert summary["fednova"]["bytes_up"] == pytest.approx(fedavg["bytes_up"], rel=1e-4)
    assert summary["fednova"]["bytes_down"] == pytest.approx(fedavg["bytes_down"], rel=1e-4)


@pytest.mark.slow
def test_option_1_pays_a_pass_over_each_shard_every_round_and_no_control_variate_restarts(sim_dir):
    clients = {(r["algorithm"], r["client"]): r for r in read_jsonl(sim_dir / "clients.jsonl")}
    passes = 0
    for rank in range(3):
        cheap, full = clients[("scaffold", rank)], clients[("scaffold_full", rank)]
        assert cheap["rounds"] == full["rounds"] == ROUNDS and cheap["steps"] == ROUNDS * 5
        shard = (full["samples"] - cheap["samples"]) // ROUNDS  # n_i: every round's pass reads the whole shard
        assert shard > 0 and full["samples"] - cheap["samples"] == ROUNDS * shard
        assert full["steps"] - cheap["steps"] == ROUNDS * math.ceil(shard / BATCH)  # ⌈n_i/B⌉ steps a round
        passes += ROUNDS * shard
    summary = json.loads((sim_dir / "summary.json").read_text())
    assert summary["scaffold_full"]["samples"] == summary["scaffold"]["samples"] + passes
    rows = [r for r in read_jsonl(sim_dir / "updates.jsonl") if r.get("algorithm") in ("scaffold", "scaffold_full")]
    assert not [r for r in rows if "control_reset" in r]


@pytest.mark.slow
def test_scaffold_runs_live_over_loopback_with_its_clients_control_variates(tmp_path, monkeypatch):
    # Prepare: two clients (×1, ×2) over real TCP sockets, four rounds of 5 local steps; the coordinator runs in a
    # thread of this process, so its server half's view of each arriving update can be recorded
    arrived, controls = [], []
    weight, apply = ScaffoldServer.weight, ScaffoldServer.apply

    def record_weight(self, update):
        arrived.append((update.meta["scaffold"]["client"], update.meta["version"], update.meta.get("control_round")))
        return weight(self, update)

    def record_apply(self, mean):
        apply(self, mean)
        controls.append(float(self.control.abs().max()))

    monkeypatch.setattr(ScaffoldServer, "weight", record_weight)
    monkeypatch.setattr(ScaffoldServer, "apply", record_apply)
    scenario = small_scenario(algorithms=[{"name": "scaffold", "lr": 0.05, "local_steps": 5, "batch_size": BATCH}],
                              stop={"time_budget_s": 60, "max_updates": 4, "target_acc": None})
    run = LoopbackRun(scenario, tmp_path / "run")
    # Execute
    run.start()
    run.join(120)
    # Assert
    assert run.error is None, run.error
    assert not run.client_errors, run.client_errors
    metrics = read_jsonl(run.run_dir / "metrics.jsonl")
    assert metrics[-1]["updates"] == 4 and metrics[-1]["test_acc"] > 0.2  # chance: 0.1
    vector = 4 * 184_586  # the CNN's float32 parameters, in bytes
    assert 4 * 2 * 2 * vector < metrics[-1]["bytes_up"] < 4 * 2 * 2 * vector * 1.01  # 4 rounds × 2 clients × (Δy, Δc)
    assert 4 * 2 * 2 * vector < metrics[-1]["bytes_down"]  # (x, c) to each client each round, and the next round's
    # each client's c_i came back over the sockets in its next update: from the round before (None: from 0)
    assert sorted(arrived) == [(c, r, r - 1 if r else None) for c in (0, 1) for r in range(4)]
    assert len(controls) == 4 and min(controls) > 0  # c moved every round
    assert not [r for r in read_jsonl(run.run_dir / "updates.jsonl") if "control_reset" in r]
