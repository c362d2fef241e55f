"""A user's quickstart-style Flower app (tests/flower/stock_app: its own pyproject.toml naming EdgeSync's
ServerApp and its own stock ClientApp) on a real SuperLink with two SuperNodes: two FedAvg rounds
(`local_sgd`), then, in the same lab, `asgd` refused at once in one line and the run marked failed.
About a minute on 2 busy cores, three under heavy load. Skipped when Flower is not installed."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from edgesync.flower.coordinator import ERROR_FILE
from edgesync.metrics.recorder import read_jsonl

pytestmark = pytest.mark.slow

STOCK_APP = Path(__file__).resolve().parent / "stock_app"
RUN_TIMEOUT_S = 300  # per run; the fedavg one took 150+ s on 2 cores under heavy load: it only stops a hung run


@pytest.fixture
def lab(flower_lab):
    return flower_lab([{"partition-id": 0, "num-partitions": 2}, {"partition-id": 1, "num-partitions": 2}])


@pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)  # two runs, each with its own bound, and the lab's start
def test_a_stock_clientapp_trains_under_fedavg_and_asgd_is_refused(lab, tmp_path):
    lab.wait_for_nodes()
    run_dir = tmp_path / "fedavg"
    result = lab.run_app(STOCK_APP, {"out": str(run_dir)}, timeout_s=RUN_TIMEOUT_S)
    log = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, log
    assert (run_dir / "summary.json").exists(), log
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert metrics[0]["updates"] == 0 and metrics[-1]["updates"] == 2
    assert metrics[-1]["test_acc"] > 0.15, metrics[-1]  # two rounds of 2 x 4 steps beat chance (0.10)
    clients = read_jsonl(run_dir / "clients.jsonl")
    assert [c["client"] for c in clients] == [0, 1]
    for c in clients:
        assert "error" not in c and c["steps"] >= 8 and c["samples"] == 32 * c["steps"], c
        assert c["bytes_up"] > 2 * 4 * 184_586 and c["bytes_down"] > 2 * 4 * 184_586 and c["wall_s"] > 0, c
    assert (run_dir / "report.md").exists()
    assert "stock Flower ClientApp" in (run_dir / "logs" / "coordinator.log").read_text()

    refused_dir = tmp_path / "asgd"
    t0 = time.monotonic()
    result = lab.run_app(STOCK_APP, {"scenario": "scenario_asgd.yaml", "out": str(refused_dir)},
                         timeout_s=RUN_TIMEOUT_S)
    wall = time.monotonic() - t0
    out = result.stdout + result.stderr
    assert result.returncode != 0, out[-4000:]
    assert "algorithm asgd needs EdgeSync's client half, but Flower node" in out, out[-4000:]
    assert "algorithm asgd needs" in (refused_dir / ERROR_FILE).read_text()
    assert wall < 60, wall  # `flwr run` start-up, one query.hello round trip: not the 120 s join timeout
