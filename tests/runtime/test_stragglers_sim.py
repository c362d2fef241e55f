"""Straggler mitigations in the simulator, from the run folder: one ×10 client among four. SSGD with a backup
worker closes each round at the first three gradients and discards the ×10 client's; local SGD with a deadline
closes its rounds at the deadline (the simulator's `due` events) and drops the late report; with partial work
the ×10 client reports the steps it finished instead. The report counts what was thrown away."""
from __future__ import annotations

import pytest

from edgesync.config import load_scenario
from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario

BASE_STEP = 0.01
H = 4  # local steps: a ×1 client's round takes 0.04 s of compute, the ×10 client's 0.4 s


def scenario(**overrides) -> dict:
    data = {
        "name": "stragglers", "seed": 1, "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 800},
        "clients": [{"profile": "x1"}, {"profile": "x1"}, {"profile": "x1"}, {"profile": "x10"}],
        "algorithms": [
            {"name": "ssgd", "label": "ssgd_backup", "backup_workers": 1, "lr": 0.05, "batch_size": 8},
            {"name": "local_sgd", "label": "fedavg_deadline", "local_steps": H, "deadline_s": 0.1, "lr": 0.05,
             "batch_size": 8},
            {"name": "local_sgd", "label": "fedavg_partial", "local_steps": H, "deadline_s": 0.1, "lr": 0.05,
             "batch_size": 8, "partial_work": "accept"},
        ],
        "stop": {"time_budget_s": 1.5, "target_acc": None},
        "eval": {"every_s": 0.75, "test_size": 200},
        "sim": {"base_step_s": BASE_STEP, "server_time": "zero"},
    }
    data.update(overrides)
    return data


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("stragglers") / "run"
    run_scenario(load_scenario(scenario()), out, progress=False)
    return out


def rows_of(run_dir, name, label):
    return [r for r in read_jsonl(run_dir / name) if r.get("algorithm") == label]


def test_backup_workers_discard_the_straggler_and_count_its_steps(run_dir):
    clients = {r["client"]: r for r in rows_of(run_dir, "clients.jsonl", "ssgd_backup")}
    closes = [r for r in rows_of(run_dir, "updates.jsonl", "ssgd_backup") if "contributors" in r]
    assert len(closes) > 50  # ×1 rounds of one 10 ms step each, 1.5 s
    assert all(3 not in r["contributors"] for r in closes[1:])  # the ×10 client never makes the first three
    # every step it finished was thrown away (one more may be under way at the end), none counted in a round
    assert clients[3]["discarded_updates"] >= 5 and clients[3]["rounds"] == 0
    assert clients[3]["steps"] - 1 <= clients[3]["wasted_steps"] <= clients[3]["steps"]
    assert all(clients[c]["wasted_steps"] == 0 for c in (0, 1, 2))


def test_a_deadline_closes_rounds_in_virtual_time(run_dir):
    rows = rows_of(run_dir, "updates.jsonl", "fedavg_deadline")
    starts = {r["round"]: r["time_s"] for r in rows if "participants" in r}
    closes = [r for r in rows if "contributors" in r]
    late = [r for r in closes if r.get("dropped")]
    assert late, "the ×10 client (0.4 s a round) never makes a 0.1 s deadline"
    for r in late:  # closed at its deadline, 0.1 s after it started, with the ×1 clients' reports
        assert max(r["reported_s"]) <= starts[r["round"]] + 0.1 + 1e-9
        assert r["dropped"] == [3] and r["contributors"] == [0, 1, 2]
    clients = {r["client"]: r for r in rows_of(run_dir, "clients.jsonl", "fedavg_deadline")}
    assert clients[3]["wasted_steps"] == H * clients[3]["discarded_updates"] > 0


def test_partial_work_reports_what_was_finished(run_dir):
    steps = [r for r in rows_of(run_dir, "updates.jsonl", "fedavg_partial") if "contributors" in r]
    assert steps and all(3 in r["contributors"] for r in steps)  # every round waits for what it finished
    clients = {r["client"]: r for r in rows_of(run_dir, "clients.jsonl", "fedavg_partial")}
    assert clients[3]["wasted_steps"] == 0
    # 0.1 s a round: the ×1 clients run their 4 steps, the ×10 client (0.1 s a step) at most one
    assert clients[3]["steps"] <= clients[3]["rounds"] < clients[0]["steps"] / H + 2


def test_the_report_shows_the_compute_thrown_away(run_dir):
    report = (run_dir / "report.md").read_text()
    assert "## Compute thrown away" in report
    assert "`ssgd_backup`" in report.split("## Compute thrown away")[1].split("##")[0]
