"""ESync's State Server in both runtimes: queries travel as messages, n_i adapts to each client."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario


def per_client(run_dir, label: str) -> dict[int, list[dict]]:
    rounds = defaultdict(list)
    for row in read_jsonl(run_dir / "updates.jsonl"):
        if row["algorithm"] == label:
            rounds[row["client"]].append(row)
    return rounds


def mean(rows, key):
    return sum(r[key] for r in rows) / len(rows)


@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_simulated_esync_keeps_fast_clients_busy(tmp_path, monkeypatch, mode):
    scenario = load_scenario({
        "name": "esync-sim", "runtime": "sim", "clients": ["x1", "x1", "x10"],
        "dataset": {"train_size": 1200}, "eval": {"every_s": 1.0, "test_size": 200},
        # zero: the blocking bounds below are in steps, with an idealised coordinator's instant replies
        "sim": {"base_step_s": 0.01, "server_time": "zero"},
        # mini-batches of 8: what is checked is how steps and queries interleave, not what they learn
        "algorithms": [{"name": "esync", "lr": 0.05, "mode": mode, "batch_size": 8}],
        "stop": {"time_budget_s": 2.0, "target_acc": None},
    })
    run_scenario(scenario, tmp_path / "run", progress=False)
    rounds = per_client(tmp_path / "run", "esync")
    straggler, fast = rounds[2], rounds[0] + rounds[1]
    # A x10 step is 0.1 s: the fast clients fit about ten 0.01 s steps into each round. Non-blocking,
    # the straggler has started a second step when its READY comes; §4.2 aborts that step at once.
    assert mean(straggler, "n_i") == pytest.approx(1.0, abs=0.1)
    assert mean(fast, "n_i") >= 8
    # Nobody waits for more than one fast step: the State Server stops them just in time.
    assert max(r["blocking_s"] for r in fast) <= 0.01 + 1e-9
    assert max(r["blocking_s"] for r in straggler) <= 0.01 + 1e-9
    if mode == "nonblocking":
        assert mean(straggler[1:], "aborted") == pytest.approx(1.0)  # its second step, every round
        assert all(r["aborted"] <= 1 for r in fast)
    else:
        assert all("aborted" not in r for r in straggler + fast)
    clients = {c["client"]: c for c in read_jsonl(tmp_path / "run" / "clients.jsonl")}
    ratio = clients[0]["compute_s"] / clients[0]["wall_s"]
    assert ratio >= (0.85 if mode == "blocking" else 0.5)
    # Queries are bytes on the wire too: more messages than one update per round each way.
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())["esync"]
    assert summary["updates"] == len(straggler)


@pytest.mark.timing  # the budgets follow the clients' measured speeds: a busy machine changes them
@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_live_esync_over_real_sockets(loopback, mode):
    run = loopback(clients=["x1", "x10"], algorithms=[{"name": "esync", "lr": 0.05, "mode": mode}],
                   stop={"time_budget_s": 4.0, "target_acc": None})
    run.start().join()
    assert run.error is None, run.error
    rounds = per_client(run.run_dir, "esync")
    assert len(rounds[0]) == len(rounds[1]) >= 5
    # The x1 client trains several steps per round while the x10 client does one or two.
    assert mean(rounds[0], "n_i") > 2 * mean(rounds[1], "n_i")
    assert mean(rounds[1], "n_i") <= 2.0
    metrics = read_jsonl(run.run_dir / "metrics.jsonl")
    assert metrics[-1]["updates"] == len(rounds[0])
    if mode == "nonblocking":
        # READY reaches the x10 client while it sleeps through its second step: that step is aborted.
        assert all(r["n_i"] == 1 for r in rounds[1])
        assert sum(r["aborted"] for r in rounds[1]) >= len(rounds[1]) / 2
