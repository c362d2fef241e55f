"""A coordinator and clients in threads of this process, over real TCP sockets, and the small scenario they
run. A module of its own, not conftest.py: tests/flower/ has a conftest too, and a test module that imported
`from conftest import …` got whichever conftest an xdist worker had imported last."""
from __future__ import annotations

import threading
from pathlib import Path

from edgesync.config import load_scenario
from edgesync.metrics.recorder import RunRecorder
from edgesync.runtime.live.client import EdgeClient
from edgesync.runtime.live.coordinator import Coordinator


def small_scenario(**overrides) -> dict:
    """Two clients, a 1,000-sample slice of Fashion-MNIST, a handful of updates per algorithm."""
    data = {
        "name": "loopback",
        "seed": 1,
        "dataset": {"name": "fashion_mnist", "train_size": 1000},
        "clients": ["x1", "x2"],
        "algorithms": [{"name": "ssgd", "lr": 0.1}, {"name": "asgd", "lr": 0.05}],
        "stop": {"time_budget_s": 30, "max_updates": 12, "target_acc": 0.3},
        "eval": {"every_s": 0.5, "test_size": 200},
    }
    data.update(overrides)
    return data


class LoopbackRun:
    def __init__(self, scenario: dict, run_dir: Path, keys=None):
        """`keys`: the coordinator's CURVE ServerKeys (transport/security.py), None for plain TCP."""
        self.scenario = load_scenario(scenario)
        self.run_dir = run_dir
        self.recorder = RunRecorder(run_dir)
        self.coordinator = Coordinator(self.scenario, self.recorder, bind="tcp://127.0.0.1:*", keys=keys)
        self.error: BaseException | None = None
        self.client_errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []

    def _guard(self, fn, sink):
        def run():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported to the test
                sink(exc)
        return run

    def start(self, clients: int | None = None) -> "LoopbackRun":
        n = len(self.scenario.clients) if clients is None else clients
        t = threading.Thread(target=self._guard(self.coordinator.run, self._set_error), daemon=True)
        self._threads.append(t)
        t.start()
        for rank in range(n):
            self.add_client(rank=rank)
        return self

    def add_client(self, client_cls=EdgeClient, **kwargs) -> None:
        client = client_cls(self.coordinator.address, **kwargs)
        t = threading.Thread(target=self._guard(client.run, self.client_errors.append), daemon=True)
        self._threads.append(t)
        t.start()

    def _set_error(self, exc):
        self.error = exc

    def join(self, timeout_s: float = 120) -> None:
        self._threads[0].join(timeout_s)
        assert not self._threads[0].is_alive(), "coordinator did not finish in time"
        for t in self._threads[1:]:
            t.join(10)
        self.recorder.close()
        self.coordinator.close()
