"""What the Flower tests share besides fixtures: the repository root (the app's `server/` and `clients/`
modules), the SuperExec's poll interval for labs, and the small scenario. A module of its own, not
conftest.py: tests/runtime/ has a conftest too, and a test module that imported `from conftest import …` got
whichever conftest an xdist worker had imported last."""
from __future__ import annotations

import sys
from pathlib import Path

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
