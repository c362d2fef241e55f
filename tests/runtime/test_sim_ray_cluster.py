"""`edgesync run --ray ADDRESS` against a Ray cluster started the usual way: `ray start --head` and a second
node (`ray start --address`), both on this machine over 127.0.0.1, one CPU each. The run's metrics equal the
serial backend's, and its log says both nodes' workers took part."""
from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.ray]  # its teardown runs `ray stop`, which ends every Ray on the machine

RAY = str(Path(sys.executable).parent / "ray")
# Ray's token authentication, as a lab's cluster would use it: one token for the nodes and the driver.
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
       "FLWR_TELEMETRY_ENABLED": "0", "OMP_NUM_THREADS": "1"}
SCENARIO = {
    "name": "cluster", "seed": 2, "runtime": "sim",
    "dataset": {"name": "fashion_mnist", "train_size": 1200},
    "clients": ["x1", "x2", "x1", "gamma-hetero"],
    "algorithms": [{"name": "asgd", "lr": 0.05}, {"name": "ssgd", "lr": 0.1}],
    "stop": {"time_budget_s": 1.0, "target_acc": None},
    "eval": {"every_s": 0.25, "test_size": 200},
    "sim": {"base_step_s": 0.02, "server_time": "zero"},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def two_node_cluster():
    import ray
    if ray.is_initialized():
        ray.shutdown()  # another test's local Ray (conftest.py): `ray stop` below would end it anyway
    port = free_port()
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    try:
        subprocess.run([RAY, "start", "--head", f"--port={port}", "--include-dashboard=false", *common],
                       env=ENV, check=True, capture_output=True, timeout=120)
        subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", *common], env=ENV, check=True,
                       capture_output=True, timeout=120)
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], env=ENV, capture_output=True, timeout=120)


def edgesync_run(scenario: Path, out: Path, *extra: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "edgesync.cli", "run", str(scenario), "--out", str(out), "-q", *extra],
                          env={**ENV, "EDGESYNC_CACHE": str(out.parent / "cache")}, capture_output=True,
                          text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def metrics(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "wall_clock"}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_run_on_a_two_node_ray_cluster_gets_the_serial_runs_metrics(tmp_path, two_node_cluster):
    scenario = tmp_path / "cluster.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    edgesync_run(scenario, tmp_path / "serial")
    edgesync_run(scenario, tmp_path / "ray", "--ray", two_node_cluster)
    log = (tmp_path / "ray" / "logs" / "coordinator.log").read_text()
    assert "Ray backend: 2 workers (2 CPUs on 2 nodes" in log and ", CURVE)" in log, log[-2000:]  # across nodes: TCP + CURVE
    assert metrics(tmp_path / "ray") == metrics(tmp_path / "serial")
    clients = [json.loads(line) for line in (tmp_path / "ray" / "clients.jsonl").read_text().splitlines()]
    assert sum(c["steps"] for c in clients) > 100
