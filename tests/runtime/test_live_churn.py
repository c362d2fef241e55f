"""Availability, traces and partial participation in the live runtime, over real sockets."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgesync.constants import OFFLINE_PROBE_S
from edgesync.metrics.recorder import read_jsonl

from test_churn_sim import online_intervals, online_throughout

REPO = Path(__file__).resolve().parents[2]
TOLERANCE_S = 0.05  # a client acts on its own view of the algorithm's clock: it runs behind by a message's latency


@pytest.mark.timing  # the traced client's step times, ×1 then ×4 of its base step
def test_a_client_goes_offline_at_its_time_and_returns_set_up_afresh(loopback, caplog):
    caplog.set_level("INFO")
    run = loopback(
        clients=[{"availability": {"kind": "trace", "online": [[0, 1], [2, 100]]}},
                 {"profile": {"kind": "trace", "steps": [[0, 1], [1.5, 4]]}}],
        algorithms=[{"name": "asgd", "lr": 0.05}], stop={"time_budget_s": 3.5, "target_acc": None}).start()
    run.join(60)
    tmp_path = run.run_dir
    rows = read_jsonl(tmp_path / "updates.jsonl")
    presence = [(r["client"], r["presence"], r["time_s"]) for r in rows if "presence" in r]
    assert [p[:2] for p in presence] == [(0, "offline"), (0, "online")]
    assert abs(presence[0][2] - 1.0) < TOLERANCE_S and 2.0 - 0.5 <= presence[1][2] < 2.5
    applied = [r["time_s"] for r in rows if "lag" in r and r["client"] == 0]
    assert applied and not [t for t in applied if 1.0 + TOLERANCE_S < t < presence[1][2]]  # nothing while offline
    assert any("offline at 1.0" in m and "back at 2.000 s" in m for m in caplog.messages)
    clients = {r["client"]: r for r in read_jsonl(tmp_path / "clients.jsonl")}
    assert clients[0]["lost"] == 1 and clients[0]["rejoined"] == 1 and 0.5 < clients[0]["offline_s"] < 1.5
    # the traced client stepped ×1, then ×4 of the same base step (generous bounds: tests share the cores)
    timeline, base = clients[1]["step_timeline"], clients[1]["base_step_s"]
    before = statistics.median(s for t, s in timeline if 0.3 <= t < 1.5) / base
    after = statistics.median(s for t, s in timeline if 1.8 <= t) / base
    assert 0.8 < before < 1.5 and 3.2 < after < 5.0, (before, after)


@pytest.mark.slow
def test_fl_churn_live_with_slots_draws_online_clients_only(tmp_path):
    """scenarios/fl_churn.yaml, scaled down: 12 clients in 2 processes of slots, FedAvg with 4 per round."""
    out = tmp_path / "run"
    overrides = ["runtime=live", "clients.count=12", "clients.availability.mean_on_s=3",
                 "clients.availability.mean_off_s=1.5", "dataset.train_size=3000", "stop.time_budget_s=8",
                 "eval.test_size=300", "links.trace=[[3, 5, 60]]", "live.processes=2"]
    cmd = [sys.executable, "-m", "edgesync.cli", "run", "scenarios/fl_churn.yaml", "--out", str(out), "-q",
           "--set", "algorithms=[{name: local_sgd, label: fedavg, clients_per_round: 4, local_steps: 2, lr: 0.05}]"]
    for o in overrides:
        cmd += ["--set", o]
    proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "12 clients in 2 processes of 6 slots" in (out / "logs" / "coordinator.log").read_text()
    rows = read_jsonl(out / "updates.jsonl")
    # a client still online at the end is online until the run's last row: a live round may be drawn just past the
    # 8 s budget (a draw at 8.0005 s once found every interval closed at 8.0)
    online = online_intervals(rows, "fedavg", 12, max(8.0, max(r["time_s"] for r in rows)))
    draws = [r for r in rows if "participants" in r]
    closes = {r["round"]: r for r in rows if "contributors" in r}
    # two draws at least (a loaded host, where the parallel tests run, fits two rounds into the 8 s; an idle one five)
    assert len(draws) >= 2 and any(r["presence"] == "offline" for r in rows if "presence" in r)
    for draw in draws:
        t = draw["time_s"]
        up = [c for c, iv in online.items() if online_throughout(iv, t, t)]
        assert set(draw["participants"]) <= set(up), draw
        assert len(draw["participants"]) == min(4, draw["online"]), draw
    starts = {d["round"]: d["time_s"] for d in draws}
    for rnd, close in closes.items():
        for c, reported in zip(close["contributors"], close["reported_s"]):
            assert online_throughout(online[c], starts[rnd] + TOLERANCE_S, reported - TOLERANCE_S), (rnd, c)
    scenario = json.loads(json.dumps(__import__("yaml").safe_load((out / "scenario.yaml").read_text())))
    assert scenario["links"]["trace"] == [[3.0, 5.0, 60.0]]


@pytest.mark.slow
def test_a_device_offline_when_an_algorithm_ends_returns_with_the_next_one(loopback):
    """Client 0 goes offline at 2 s and, by the first algorithm's schedule, returns only at 60 s. The second
    algorithm's clock starts at zero, where its schedule has it online: asking while offline, it is taken
    back within a probe or so of that start. Offline again when the second (last) one ends, it is told the
    run is over when it next asks, and ends at once."""
    run = loopback(
        clients=[{"availability": {"kind": "trace", "online": [[0, 2], [60, 100]]}}, "x1"],
        algorithms=[{"name": "asgd", "lr": 0.05, "label": "first"}, {"name": "asgd", "lr": 0.05, "label": "second"}],
        stop={"time_budget_s": 4, "target_acc": None, "max_updates": None}).start()
    run.join(60)
    assert run.error is None and not run.client_errors, (run.error, run.client_errors)
    ended = time.monotonic()
    run._threads[1].join(OFFLINE_PROBE_S + 3)
    assert not run._threads[1].is_alive() and time.monotonic() - ended < OFFLINE_PROBE_S + 3
    rows = read_jsonl(run.run_dir / "updates.jsonl")
    second = sorted(r["time_s"] for r in rows if r.get("algorithm") == "second" and r.get("client") == 0 and "lag" in r)
    assert second and second[0] < OFFLINE_PROBE_S + 1.0, second[:3]  # back with the second algorithm's start
    assert not [t for t in second if t > 2.0 + TOLERANCE_S]  # and offline again at 2 s of it
