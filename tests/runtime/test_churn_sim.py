"""Partial participation, availability and traces in the simulator, checked from the run folder's logs."""
from __future__ import annotations

from pathlib import Path

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

BASE_STEP = 0.01
BATCH = 8  # mini-batches of 8, not 32: what is checked is who computes when, not what they learn
BUDGET = 1.0  # virtual s of the shared churn run: dozens of rounds drawn, hundreds of asynchronous updates
CLIENTS = 8  # in the shared churn run, 4 drawn a round


@pytest.fixture(scope="module")
def churn_run(tmp_path_factory):
    """One churn run shared by the checks that only read its logs (its report is test_churn_report's: not
    drawn here)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
        return run(tmp_path_factory.mktemp("churn"))


def churn(**overrides) -> dict:
    data = {
        "name": "churn", "seed": 3, "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 1200},
        "clients": {"count": CLIENTS, "availability": {"kind": "exponential", "mean_on_s": 0.6, "mean_off_s": 0.3}},
        "algorithms": [{"name": "local_sgd", "clients_per_round": 4, "local_steps": 3, "lr": 0.05,
                        "batch_size": BATCH},
                       {"name": "asgd", "lr": 0.05, "batch_size": BATCH}],
        "stop": {"time_budget_s": BUDGET, "target_acc": None},
        "eval": {"every_s": 0.5, "test_size": 200},
        "sim": {"base_step_s": BASE_STEP, "server_time": "zero"},
    }
    data.update(overrides)
    return data


def run(tmp_path, name="run", **overrides):
    out = tmp_path / name
    run_scenario(load_scenario(churn(**overrides)), out, progress=False)
    return out


def online_intervals(rows: list[dict], label: str, clients: int, end: float) -> dict[int, list[tuple[float, float]]]:
    """Each client's online intervals, from the presence rows the run logged."""
    since = {c: 0.0 for c in range(clients)}
    out: dict[int, list] = {c: [] for c in range(clients)}
    for r in rows:
        if r["algorithm"] != label or "presence" not in r:
            continue
        c, t = r["client"], r["time_s"]
        if r["presence"] == "offline" and since[c] is not None:
            out[c].append((since[c], t))
            since[c] = None
        elif r["presence"] == "online":
            since[c] = t
    for c, s in since.items():
        if s is not None:
            out[c].append((s, end))
    return out


def online_throughout(intervals, start: float, end: float) -> bool:
    return any(s <= start + 1e-9 and end <= e + 1e-9 for s, e in intervals)  # times are µs-rounded sums


@pytest.mark.slow
def test_rounds_draw_among_online_clients_and_only_online_clients_contribute(churn_run):
    out = churn_run
    rows = read_jsonl(out / "updates.jsonl")
    online = online_intervals(rows, "local_sgd", CLIENTS, BUDGET)
    assert any(len(iv) > 1 or iv[0] != (0.0, BUDGET) for iv in online.values()), "no client ever went offline"
    draws = [r for r in rows if r["algorithm"] == "local_sgd" and "participants" in r]
    closes = {r["round"]: r for r in rows if r["algorithm"] == "local_sgd" and "contributors" in r}
    assert len(draws) > 20
    for draw in draws:
        t = draw["time_s"]
        up = [c for c, iv in online.items() if online_throughout(iv, t, t)]
        assert set(draw["participants"]) <= set(up), draw
        assert len(draw["participants"]) == min(4, len(up)) == min(4, draw["online"]), draw
    starts = {}
    for draw in draws:  # a redrawn round starts at its last draw
        starts[draw["round"]] = draw["time_s"]
    for rnd, close in closes.items():
        for c, reported in zip(close["contributors"], close["reported_s"]):  # online from the draw to its report
            assert online_throughout(online[c], starts[rnd], reported), (rnd, c)
    clients = [r for r in read_jsonl(out / "clients.jsonl") if r["algorithm"] == "local_sgd"]
    assert sum(r.get("rounds", 0) for r in clients) == sum(len(c["contributors"]) for c in closes.values())
    assert all(r["offline_s"] >= 0 for r in clients) and any(r["offline_s"] > 0 for r in clients)


def test_an_asynchronous_update_is_applied_only_from_an_online_stretch(churn_run):
    out = churn_run
    rows = read_jsonl(out / "updates.jsonl")
    online = online_intervals(rows, "asgd", CLIENTS, BUDGET)
    applied = [r for r in rows if r["algorithm"] == "asgd" and "lag" in r]
    assert len(applied) > 100
    for r in applied:  # computed (one step) and delivered while online
        assert online_throughout(online[r["client"]], r["time_s"] - BASE_STEP, r["time_s"]), r


def test_a_device_trace_slows_its_steps_from_its_time_on(tmp_path):
    # the other client is a ×10 one: it computes beside the traced one (20 steps, not 200), untraced
    out = run(tmp_path, clients=[{"profile": {"kind": "trace", "steps": [[0, 1], [1.0, 10]]}}, "x10"],
              algorithms=[{"name": "asgd", "lr": 0.05, "batch_size": BATCH}],
              stop={"time_budget_s": 2.0, "target_acc": None}, eval={"every_s": 1.0, "test_size": 200})
    rows = [r for r in read_jsonl(out / "updates.jsonl") if "lag" in r and r["client"] == 0]
    before = sum(0.2 <= r["time_s"] < 1.0 for r in rows)
    after = sum(1.2 <= r["time_s"] < 2.0 for r in rows)
    assert before == pytest.approx(80, abs=2) and after == pytest.approx(8, abs=1)


def test_a_link_trace_slows_messages_from_its_time_on(tmp_path):
    # 0.1 Mbit/s from 0.5 s: a CNN model (≈0.7 MB) then takes ≈ 55 s each way, so no update lands after ≈ 0.5 s
    # of the 1 s budget, while the untraced client's go on to its end
    out = run(tmp_path, clients=[{"link": {"trace": [[0.5, 0.1, 0]]}}, "x1"],
              algorithms=[{"name": "asgd", "batch_size": BATCH}])
    rows = [r for r in read_jsonl(out / "updates.jsonl") if "lag" in r]
    slow = [r["time_s"] for r in rows if r["client"] == 0]
    fast = [r["time_s"] for r in rows if r["client"] == 1]
    assert BUDGET == 1.0 and max(slow) < 0.5 + 2 * BASE_STEP and max(fast) > 0.9


@pytest.mark.slow
def test_fl_churn_scenario_replays_exactly_in_the_simulator(tmp_path, monkeypatch):
    """scenarios/fl_churn.yaml itself (all three entries, its availability and link trace), scaled down, with
    the idealised coordinator (the cost model's calibration and replay: test_server_cost.py)."""
    from edgesync.config import load_scenario
    overrides = ["clients.count=12", "dataset.train_size=1200", "stop.time_budget_s=2", "eval.every_s=1",
                 "eval.test_size=200", "links.trace=[[0.5, 2, 150], [1.5, 20, 40]]",
                 "clients.availability.mean_on_s=1", "clients.availability.mean_off_s=0.5",
                 "algorithms.0.clients_per_round=6", "sim.server_time=zero",
                 *(f"algorithms.{i}.batch_size={BATCH}" for i in range(3))]
    scenario = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "fl_churn.yaml", overrides)
    a, b = tmp_path / "a", tmp_path / "b"
    run_scenario(scenario, a, progress=False)
    monkeypatch.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)  # b's logs are compared, not its report
    run_scenario(scenario, b, progress=False)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "wall_clock"} for r in rows]
    metrics = strip(read_jsonl(a / "metrics.jsonl"))
    assert {r["algorithm"] for r in metrics} == {"fedavg", "fedbuff", "fedasync"}
    assert metrics == strip(read_jsonl(b / "metrics.jsonl"))
    assert read_jsonl(a / "updates.jsonl") == read_jsonl(b / "updates.jsonl")
    draws = [r for r in read_jsonl(a / "updates.jsonl") if "participants" in r]
    assert draws and all(len(r["participants"]) == min(6, r["online"]) for r in draws)
