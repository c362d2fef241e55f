"""FedProx, FedAvgM, FedAdam, FedYogi and FedAdagrad end to end on real Fashion-MNIST (1,000 samples): all five in
the simulator (three clients, one ×2, six rounds of 5 local steps), and FedAdam live over loopback TCP
(tests/runtime/loopback_run.py). Every run finishes its rounds, counts its bytes and beats chance (0.1)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from edgesync.config import load_scenario
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from loopback_run import LoopbackRun, small_scenario  # noqa: E402

NAMES = ["fedprox", "fedavgm", "fedadam", "fedyogi", "fedadagrad"]
ROUNDS = 6
SERVER_LR = {"fedadam": 0.01, "fedyogi": 0.01, "fedadagrad": 0.01}  # η of the adaptive server step (the default)


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory) -> Path:
    """One simulated run of all five (its logs and summary are checked, not its report: not drawn)."""
    out = tmp_path_factory.mktemp("fl_baselines") / "run"
    entries = [{"name": n, "lr": 0.05, "local_steps": 5, "batch_size": 16,
                **({"global_lr": SERVER_LR[n]} if n in SERVER_LR else {})} for n in NAMES]
    mp = pytest.MonkeyPatch()
    mp.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
    try:
        run_scenario(load_scenario({
            "name": "fl-baselines", "seed": 1, "runtime": "sim",
            "dataset": {"name": "fashion_mnist", "train_size": 1000},
            "clients": ["x1", "x1", "x2"],
            "algorithms": entries,
            "stop": {"time_budget_s": 100.0, "max_updates": ROUNDS, "target_acc": None},
            "eval": {"every_s": 100.0, "test_size": 500},  # at the start and at the end
            "sim": {"base_step_s": 0.05, "server_time": "zero"},
        }), out, progress=False)
    finally:
        mp.undo()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_each_runs_its_rounds_in_the_simulator_and_beats_chance(sim_dir, name):
    metrics = [r for r in read_jsonl(sim_dir / "metrics.jsonl") if r["algorithm"] == name]
    assert metrics[0]["updates"] == 0 and metrics[0]["test_acc"] < 0.2
    assert metrics[-1]["updates"] == ROUNDS and metrics[-1]["test_acc"] > 0.3  # chance: 0.1; here 0.5 to 0.6
    summary = json.loads((sim_dir / "summary.json").read_text())[name]
    assert summary["updates"] == ROUNDS and not summary["diverged"]
    assert summary["bytes_up"] > 0 and summary["bytes_down"] > 0


@pytest.mark.slow
def test_all_five_send_what_fedavg_sends(sim_dir):
    # the server's momentum and moments stay on the server: every round is one model down and one Δ up per client
    summary = json.loads((sim_dir / "summary.json").read_text())
    down = {summary[n]["bytes_down"] for n in NAMES}
    up = [summary[n]["bytes_up"] for n in NAMES]
    assert len(down) == 1
    assert max(up) - min(up) < 1e-4 * min(up)  # the metadata's numbers differ in length by a few bytes


@pytest.mark.slow
def test_fedadam_runs_live_over_loopback(tmp_path):
    # Prepare: two clients (×1, ×2) over real TCP sockets, four rounds of 5 local steps
    scenario = small_scenario(algorithms=[{"name": "fedadam", "lr": 0.05, "local_steps": 5, "batch_size": 16}],
                              stop={"time_budget_s": 60, "max_updates": 4, "target_acc": None})
    run = LoopbackRun(scenario, tmp_path / "run")
    # Execute
    run.start()
    run.join(120)
    # Assert
    assert run.error is None, run.error
    assert not run.client_errors, run.client_errors
    metrics = read_jsonl(run.run_dir / "metrics.jsonl")
    assert metrics[-1]["algorithm"] == "fedadam" and metrics[-1]["updates"] == 4
    assert metrics[-1]["bytes_up"] > 0 and metrics[-1]["bytes_down"] > 0
    assert metrics[-1]["test_acc"] > 0.2  # chance: 0.1
