"""The simulator's Ray backend (`sim.backend: ray`): the same run folder as the serial backend, byte for byte
(apart from wall-clock stamps), on a local Ray instance with two workers.

The scenarios mix what could break the ordering: profiles that are constant, gamma-drawn and a trace; a
slow link; devices that go offline mid-instruction and come back; partial participation; an algorithm
whose clients query the server (ESync: run serially beside the others) and the coordinator's cost model.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from edgesync.runtime.runs import run_scenario
from edgesync.config import load_scenario

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.usefixtures("local_ray")]  # conftest.py: Ray here, 2 CPUs


def scenario(backend: str, **overrides) -> dict:
    data = {
        "name": "ray-vs-serial", "seed": 5, "runtime": "sim",
        "dataset": {"name": "fashion_mnist", "train_size": 2400},
        "clients": ["x1", "x2", "gamma-hetero", {"profile": {"kind": "trace", "steps": [[0, 1], [0.6, 5]]}},
                   {"profile": "x1", "link": {"rate_mbps": 20, "latency_ms": 30}}, "x4"],
        "algorithms": [{"name": "asgd", "lr": 0.05}, {"name": "ssgd", "lr": 0.1},
                       {"name": "dgs", "lr": 0.05}, {"name": "esync", "lr": 0.05}],
        "stop": {"time_budget_s": 1.0, "target_acc": None},
        "eval": {"every_s": 0.2, "test_size": 200},
        "sim": {"base_step_s": 0.02, "server_time": "zero", "backend": backend},
    }
    data.update(overrides)
    return data


def run_folder(tmp_path: Path, name: str, data: dict) -> dict[str, list[dict]]:
    out = tmp_path / name
    run_scenario(load_scenario(data), out, progress=False)
    rows = {}
    for file in ("metrics.jsonl", "updates.jsonl", "clients.jsonl", "coordinator.jsonl"):
        rows[file] = [{k: v for k, v in json.loads(line).items() if k != "wall_clock"}
                      for line in (out / file).read_text().splitlines()]
    return rows


def test_ray_backend_writes_the_serial_runs_metrics_byte_for_byte(tmp_path, caplog):
    serial = run_folder(tmp_path, "serial", scenario("serial"))
    caplog.set_level(logging.INFO, "edgesync.sim")
    on_ray = run_folder(tmp_path, "ray", scenario("ray"))
    assert "Ray backend: 2 workers" in caplog.text  # it did run on the workers
    assert "esync: its clients query the server mid-instruction: run serially" in caplog.text
    assert len(serial["metrics.jsonl"]) > 20
    for file in serial:
        assert on_ray[file] == serial[file], file


def test_churn_partial_participation_and_the_cost_model_replay_on_ray(tmp_path):
    churn = {"clients": {"count": 8, "availability": {"kind": "exponential", "mean_on_s": 0.5, "mean_off_s": 0.3}},
             "algorithms": [{"name": "local_sgd", "clients_per_round": 3, "local_steps": 3, "lr": 0.05},
                            {"name": "fedbuff", "lr": 0.05}, {"name": "asgd", "lr": 0.05}]}
    serial = run_folder(tmp_path, "serial", scenario("serial", **churn))
    assert any("presence" in r for r in serial["updates.jsonl"])  # devices did go offline and come back
    on_ray = run_folder(tmp_path, "ray", scenario("ray", **churn))
    for file in serial:
        assert on_ray[file] == serial[file], file


def test_the_coordinators_cost_model_charges_the_same_times_on_ray(tmp_path):
    modelled = {"algorithms": [{"name": "asgd", "lr": 0.05}], "stop": {"time_budget_s": 0.6, "target_acc": None}}
    serial = run_folder(tmp_path, "serial", scenario("serial", **modelled, sim={"base_step_s": 0.02}))
    on_ray = run_folder(tmp_path, "ray", scenario("ray", **modelled, sim={"base_step_s": 0.02, "backend": "ray"}))
    for file in serial:  # the costs were calibrated by the first run and cached: the second used them too
        assert on_ray[file] == serial[file], file
    assert serial["coordinator.jsonl"][0]["busy_s"] > 0  # the coordinator's load, charged the same on Ray
