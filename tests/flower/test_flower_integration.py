"""A real Flower deployment on loopback: a SuperLink and two SuperNodes as processes, two FedAvg rounds of
the small CNN with `flwr run`, the run folder checked, and everything stopped by PID in bounded time.
About a minute on 2 busy cores (a SuperNode starts a process per message and polls every 3 s);
skipped when Flower is not installed. Calibration and throttling are covered in test_flower_adapter.py:
here the scenario's x3 client is overridden to x1 by its node's --node-config, which saves a round trip.
"""
from __future__ import annotations

import time

import psutil
import pytest

from edgesync.flower.lab import FlowerLab, LabError, _tool
from edgesync.metrics.recorder import read_jsonl

from conftest import ROOT

pytestmark = pytest.mark.slow

RUN_TIMEOUT_S = 90
STOP_BOUND_S = 20


@pytest.fixture
def lab(tmp_path):
    try:
        _tool("flower-superlink")
    except LabError as exc:
        pytest.skip(str(exc))
    lab = FlowerLab(tmp_path / "flwr-home", [{"partition-id": 0}, {"partition-id": 1, "profile": "x1"}])
    try:
        yield lab.start()
    finally:
        lab.stop()


def _running(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def test_two_fedavg_rounds_on_a_superlink_and_two_supernodes(lab, tmp_path):
    run_dir = tmp_path / "run"
    lab.wait_for_nodes()
    result = lab.run_app(ROOT, {
        "scenario": "scenarios/flower_fedavg.yaml", "out": str(run_dir),
        "set": "dataset.train_size=1000; clients.1.profile=x3; stop.max_updates=2; algorithms.0.local_steps=4; "
               "eval.test_size=200; eval.every_s=30",
    }, timeout_s=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (run_dir / "summary.json").exists(), result.stdout[-4000:] + result.stderr[-2000:]

    for name in ("scenario.yaml", "metrics.jsonl", "clients.jsonl", "report.md", "logs/coordinator.log"):
        assert (run_dir / name).exists(), name
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert metrics[0]["updates"] == 0 and metrics[-1]["updates"] == 2
    assert metrics[-1]["test_acc"] > 0.15  # two rounds of 2 x 4 steps beat chance (0.10)
    clients = read_jsonl(run_dir / "clients.jsonl")
    assert [(c["client"], c["profile"]) for c in clients] == [(0, "x1"), (1, "x1")]  # x3 overridden by --node-config
    for c in clients:
        assert c["steps"] >= 8 and c["samples"] == c["steps"] * 32 and c["bytes_up"] > 2 * 4 * 184_586

    # Teardown: every process the lab started (SuperExecs, ServerApp and ClientApp processes included)
    # is gone within the bound.
    started = lab.alive()
    assert len(started) >= 3
    t0 = time.monotonic()
    lab.stop()
    assert time.monotonic() - t0 < STOP_BOUND_S
    assert _running(started) == []
