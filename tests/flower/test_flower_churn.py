"""Availability and device traces under EdgeSync's ServerApp, on in-process SuperNodes (fake_grid.py).

A node reads the algorithm's clock from the wall-clock start its messages carry; the coordinator follows the
same schedules, takes a node offline at its time and takes it back (set up afresh) at its online time."""
from __future__ import annotations

import statistics

import pytest

from edgesync.metrics.recorder import read_jsonl

from flower_scenario import small_scenario
from test_flower_adapter import run_on

TOLERANCE_S = 0.1  # a ClientApp reads the clock from the wall clock; the coordinator acts on its loop's next turn


@pytest.mark.slow
@pytest.mark.timing  # how long the node was offline, and its steps' speeds before and after the trace
def test_a_node_goes_offline_at_its_time_and_a_traced_node_follows_its_trace(fake_grid, tmp_path):
    scenario = small_scenario(
        clients=[{"availability": {"kind": "trace", "online": [[0, 1.5], [3, 100]]}},
                 {"profile": {"kind": "trace", "steps": [[0, 1], [2, 4]]}}],
        algorithms=[{"name": "asgd", "lr": 0.05},
                    {"name": "local_sgd", "label": "fedavg", "clients_per_round": 2, "local_steps": 2, "lr": 0.05}],
        stop={"time_budget_s": 4.5, "target_acc": None})
    run_on(fake_grid([{"partition-id": 0}, {"partition-id": 1}]), scenario, tmp_path / "run")
    rows = read_jsonl(tmp_path / "run" / "updates.jsonl")

    for label in ("asgd", "fedavg"):  # the schedule starts again with each algorithm
        presence = [(r["presence"], r["time_s"]) for r in rows if r["algorithm"] == label and "presence" in r]
        assert [p for p, _ in presence] == ["offline", "online"], (label, presence)
        (_, gone), (_, back) = presence
        assert abs(gone - 1.5) < TOLERANCE_S and 3.0 <= back < 3.0 + 1.0, (label, presence)
        mine = [r for r in rows if r["algorithm"] == label and r.get("client") == 0 and "presence" not in r]
        assert [r for r in mine if "lag" in r and gone + TOLERANCE_S < r["time_s"] < back] == []  # none while offline
        assert any("lag" in r and r["time_s"] > back for r in mine) or label == "fedavg"  # ASGD trains it again
    draws = [r for r in rows if r["algorithm"] == "fedavg" and "participants" in r]
    for draw in draws:  # a round never waits for the offline node: it draws the online ones only
        offline = gone <= draw["time_s"] < back  # (fedavg's: from its offline time until it is set up again)
        assert draw["participants"] == ([1] if offline else [0, 1]) and draw["online"] == (1 if offline else 2), draw
    assert any(gone <= d["time_s"] < back for d in draws), draws

    clients = {(r["algorithm"], r["client"]): r for r in read_jsonl(tmp_path / "run" / "clients.jsonl")}
    assert clients["asgd", 0]["lost"] == 1 and clients["asgd", 0]["rejoined"] == 1
    assert 1.3 < clients["asgd", 0]["offline_s"] < 1.7
    timeline, base = clients["asgd", 1]["step_timeline"], clients["asgd", 1]["base_step_s"]
    before = statistics.median(s for t, s in timeline if 0.2 <= t < 2.0) / base
    after = statistics.median(s for t, s in timeline if 2.1 <= t) / base
    assert 0.9 < before < 1.5 and 3.6 < after < 4.6, (before, after)
