"""Fixtures of the Flower runtime's tests: the ClientApp on in-process SuperNodes (fake_grid.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr", reason="the Flower runtime needs flwr (pip install -e '.[flower]')")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the app's modules: server/, clients/


# Flower's SuperExec (beside the SuperLink and each SuperNode) looks for a new ServerApp or ClientApp task
# every second by default (flwr/supercore/superexec/run_superexec.py), and every message of a run waits for
# it; a shorter poll only saves that wait. The SuperNode's own 3 s poll of the SuperLink has no setting.
# Each poll costs CPU: an idle lab's three SuperExecs took 1.5 s CPU each per 30 s at 0.2 s, 1.0 s at 1 s.
FAST_SUPEREXEC_POLL = {"FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.5"}


def small_scenario(**overrides) -> dict:
    """Two nodes (x1, x2), a 1,000-sample slice of Fashion-MNIST, two rounds of FedAvg."""
    data = {
        "name": "flower-small",
        "seed": 1,
        "dataset": {"name": "fashion_mnist", "train_size": 1000},
        "clients": ["x1", "x2"],
        "algorithms": [{"name": "local_sgd", "label": "fedavg", "lr": 0.05, "local_steps": 4}],
        "stop": {"time_budget_s": 60, "max_updates": 2, "target_acc": 0.3},
        "eval": {"every_s": 1.0, "test_size": 200},
    }
    data.update(overrides)
    return data


@pytest.fixture
def client_app():
    from clients.flower_client import app
    return app


@pytest.fixture
def fake_grid(client_app):
    from fake_grid import FakeGrid  # beside this file; imported after the flwr check
    grids: list = []

    def make(node_configs, run_config=None):
        grid = FakeGrid(client_app, node_configs, run_config)
        grids.append(grid)
        return grid

    yield make
    for grid in grids:
        grid.close()


@pytest.fixture
def flower_lab(tmp_path):
    """`flower_lab(nodes)`: a started FlowerLab (a real SuperLink and one SuperNode per node config),
    stopped after the test; the test is skipped where Flower's commands are not installed."""
    from edgesync.flower.lab import FlowerLab, LabError, _tool
    labs: list = []

    def make(nodes: list[dict]):
        try:
            _tool("flower-superlink")
        except LabError as exc:
            pytest.skip(str(exc))
        lab = FlowerLab(tmp_path / "flwr-home", nodes)
        lab.env.update(FAST_SUPEREXEC_POLL)
        labs.append(lab)
        return lab.start()

    yield make
    for lab in labs:
        lab.stop()
