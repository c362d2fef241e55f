"""The simulator's coordinator cost model (`sim.server_time: model`, runtime/sim/server_cost.py).

The costs are measured once per machine (a calibration) and then read from `$EDGESYNC_CACHE`; a run
records the costs it used in its scenario.yaml, so a replay charges the same. With costs given in the
scenario, virtual times are worked out by hand below: an update costs decode_update + collect (or
apply, when it changes the global model), each message sent leaves encode_send after the one before,
and the coordinator is one thread: what arrives while it is busy waits its turn.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.sim import server_calibration, server_cost
from edgesync.runtime.runs import run_scenario
from edgesync.runtime.sim.simulator import Simulator
from edgesync.config import load_scenario

# Exact in decimal at the metrics' µs resolution; an update's collect (0.003 s with its decoding) outlasts
# the 0.0005 s between two broadcast messages, so the second client's update always finds the coordinator busy.
COSTS = {"decode_update": 0.002, "collect": 0.001, "apply": 0.004, "encode_send": 0.0005, "query": 0.0}
STEP = 0.25
WALL_CLOCK = re.compile(rb', "wall_clock": [0-9.e+-]+')


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGESYNC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def calibrations(monkeypatch) -> list[str]:
    """The entries calibrated (the real calibration runs; this only counts it)."""
    seen: list[str] = []
    real = server_calibration.calibrate

    def counting(run, config):
        seen.append(config.key)
        return real(run, config)

    monkeypatch.setattr(server_calibration, "calibrate", counting)
    return seen


def scenario(algorithms: list[dict], sim: dict, **overrides) -> dict:
    """Two x1 clients, steps of 0.25 virtual s, a 1,000-sample slice, mini-batches of 8 (the coordinator's
    work does not depend on them; the clients' steps, here and in a calibration, cost less)."""
    return {"name": "costs", "seed": 1, "runtime": "sim", "dataset": {"train_size": 1000},
            "clients": ["x1", "x1"], "algorithms": [{"batch_size": 8, **a} for a in algorithms],
            "stop": {"time_budget_s": 3.0, "target_acc": None}, "eval": {"every_s": 1.0, "test_size": 200},
            "sim": {"base_step_s": STEP, **sim}, **overrides}


def run(tmp_path: Path, name: str, data: dict) -> Path:
    out = tmp_path / name
    run_scenario(load_scenario(data), out, progress=False)
    return out


def final_rows(out: Path) -> dict[str, dict]:
    return {r["algorithm"]: r for r in read_jsonl(out / "metrics.jsonl")}


def update_times(out: Path, label: str) -> list[float]:
    return [r["time_s"] for r in read_jsonl(out / "updates.jsonl") if r["algorithm"] == label]


def without_wall_clock(path: Path) -> bytes:
    return WALL_CLOCK.sub(b"", path.read_bytes())


# -- measured once per machine, then cached --------------------------------------------------------

def test_costs_are_measured_once_per_machine_then_read_from_the_cache(tmp_path, cache_in_tmp, calibrations,
                                                                      monkeypatch):
    sc = load_scenario(scenario([{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}], {}))
    first = Simulator(sc, recorder=None)
    first.prepare()
    assert calibrations == ["ssgd", "asgd"]
    for costs in first.server_costs.values():
        assert costs.decode_update > 0 and costs.apply > 0 and costs.encode_send > 0
    # SSGD's updates collect (one add) until the last of a round, which aggregates and builds the broadcast.
    assert first.server_costs["ssgd"].collect < first.server_costs["ssgd"].apply
    cached = (cache_in_tmp / "server_costs.json").read_text()
    assert cached.count('"v1|ssgd|cnn|params=184586|') == cached.count('"v1|asgd|cnn|params=184586|') == 1

    second = Simulator(sc, recorder=None)
    second.prepare()
    assert calibrations == ["ssgd", "asgd"], "the second preparation reads the cache"
    assert second.server_costs == first.server_costs

    # Another setting of the algorithm is another entry: measured anew, the others still cached.
    relabelled = load_scenario(scenario([{"name": "ssgd", "lr": 0.02, "label": "same"},
                                              {"name": "ssgd", "lr": 0.1, "momentum": 0.9}], {}))
    Simulator(relabelled, recorder=None).prepare()
    assert calibrations == ["ssgd", "asgd", "ssgd"]  # neither label nor learning rate change the work; momentum does

    # On another machine the costs are measured again.
    monkeypatch.setattr(server_cost, "this_machine", lambda: "threads=1|torch=x|another-host|arm64")
    Simulator(sc, recorder=None).prepare()
    assert calibrations == ["ssgd", "asgd", "ssgd", "ssgd", "asgd"]


def test_runs_with_the_model_are_identical_and_replay_the_recorded_costs(tmp_path, cache_in_tmp, calibrations,
                                                                       monkeypatch):
    data = scenario([{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}], {},
                    clients=["x1", "x3"], stop={"time_budget_s": 2.0, "target_acc": None})
    first = run(tmp_path, "first", data)
    # the first run's report is read below; the others' logs are compared, their reports not drawn
    monkeypatch.setattr("edgesync.runtime.runs.render_report", lambda run_dir: None)
    second = run(tmp_path, "second", data)
    assert calibrations == ["ssgd", "asgd"]
    for name in ("metrics.jsonl", "clients.jsonl", "updates.jsonl"):
        assert without_wall_clock(first / name) == without_wall_clock(second / name), name
    for name in ("summary.json", "scenario.yaml"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name

    recorded = yaml.safe_load((first / "scenario.yaml").read_text())["sim"]
    assert recorded["server_time"] == "model"
    assert set(recorded["measured_server_s"]) == {"ssgd", "asgd"}
    assert set(recorded["measured_server_s"]["ssgd"]) == set(COSTS)
    # The coordinator's time shows: ASGD's updates arrive at multiples of the step only without it.
    assert any(t % STEP for t in update_times(first, "asgd"))

    # The recorded scenario replays the same run without the cache and without measuring.
    (cache_in_tmp / "server_costs.json").unlink()
    replay = tmp_path / "replay"
    run_scenario(load_scenario(first / "scenario.yaml"), replay, progress=False)
    assert calibrations == ["ssgd", "asgd"]
    assert not (cache_in_tmp / "server_costs.json").exists()
    for name in ("metrics.jsonl", "clients.jsonl", "updates.jsonl"):
        assert without_wall_clock(first / name) == without_wall_clock(replay / name), name
    report = (first / "report.md").read_text()
    assert "Coordinator time: model, costs measured once on the machine that ran it (ms per update" in report


# -- charged exactly, one event at a time --------------------------------------------------------------

def test_each_event_is_charged_its_cost_and_a_busy_coordinator_queues_the_next(tmp_path, calibrations):
    given = scenario([{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}],
                     {"measured_server_s": {"ssgd": COSTS, "asgd": COSTS}}, stop={"time_budget_s": 3.0,
                                                                                 "max_updates": 3,
                                                                                 "target_acc": None})
    out = run(tmp_path, "given", given)
    assert calibrations == [], "costs in the scenario are used as they are"
    d, c, a, e = (COSTS[k] for k in ("decode_update", "collect", "apply", "encode_send"))
    # SSGD. At 0 the broadcast leaves one message per encoding: client 0 starts at e, client 1 at 2e. Client
    # 0's update arrives at e + step and is collected until e + step + d + c; client 1's, arriving at
    # 2e + step, waits until then, and its aggregation (the round's update) starts there.
    first_round = e + STEP + d + c
    # Each round from then: decode + apply, the broadcast (client 0's message leaves after one encoding),
    # client 0's step, its update collected (d + c), and client 1's, queued meanwhile, is applied.
    period = d + a + e + STEP + d + c
    final = final_rows(out)
    assert final["ssgd"]["updates"] == 3
    assert final["ssgd"]["time_s"] == round(first_round + 2 * period, 6) == 0.7725  # max_updates ends it there
    # ASGD: client 0's update (e + step) costs d + a and the reply one encoding; client 1's, arriving at
    # 2e + step, waits for it: applied at e + step + d + a + e.
    assert update_times(out, "asgd")[:2] == [round(e + STEP, 6), round(e + STEP + d + a + e, 6)] == [0.2505, 0.257]
    # Waiting for the coordinator is waiting: every client's time adds up (compute + wait = wall).
    for row in read_jsonl(out / "clients.jsonl"):
        assert row["compute_s"] + row["wait_s"] == pytest.approx(row["wall_s"], abs=1e-6)
    recorded = yaml.safe_load((out / "scenario.yaml").read_text())["sim"]["measured_server_s"]
    assert recorded == {"ssgd": COSTS, "asgd": COSTS}


def test_zero_is_the_idealised_coordinator_and_says_so(tmp_path, calibrations):
    out = run(tmp_path, "zero", scenario([{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}],
                                         {"server_time": "zero"},
                                         stop={"time_budget_s": 3.0, "max_updates": 3, "target_acc": None}))
    assert calibrations == []
    assert final_rows(out)["ssgd"]["time_s"] == 3 * STEP  # rounds of exactly one step
    assert update_times(out, "asgd")[:2] == [STEP, STEP]  # both updates at once: the coordinator takes no time
    assert yaml.safe_load((out / "scenario.yaml").read_text())["sim"]["measured_server_s"] == {}
    assert "Coordinator time: zero (idealised)." in (out / "report.md").read_text()


def test_measured_times_the_real_work_at_every_event(tmp_path, calibrations):
    out = run(tmp_path, "measured", scenario([{"name": "asgd", "lr": 0.05}], {"server_time": "measured"},
                                             stop={"time_budget_s": 1.0, "max_updates": 6, "target_acc": None}))
    assert calibrations == []
    first, second = update_times(out, "asgd")[:2]
    # Client 1's update arrives with client 0's (both after a step) and waits while the coordinator decodes,
    # checks and applies the first and encodes its reply: real work, some µs at least.
    assert STEP <= first < second < STEP + 0.5
    assert "Coordinator time: measured" in (out / "report.md").read_text()


def test_a_broken_cache_entry_is_named_not_used(tmp_path, cache_in_tmp, calibrations):
    sc = load_scenario(scenario([{"name": "asgd", "lr": 0.05}], {}))
    Simulator(sc, recorder=None).prepare()
    path = cache_in_tmp / "server_costs.json"
    path.write_text(path.read_text().replace('"apply"', '"applied"'))
    with pytest.raises(ValueError, match=r"server_costs\.json: entry 'v1\|asgd\|.*delete it to measure again"):
        Simulator(sc, recorder=None).prepare()
