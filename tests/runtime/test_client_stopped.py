"""A client stopped (Ctrl-Z, SIGSTOP) while it waits for a message — the likeliest place to catch it — is
lost once and back once: on waking it counts the coordinator's silence from then, says it is alive, and is
taken back, rather than also reconnecting as if the coordinator had gone (CI saw `lost == 2`)."""
from __future__ import annotations

import time

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.live.client import EdgeClient

TIMEOUT_S = 1.5  # faults.client_timeout_s


class StoppedWhileWaiting(EdgeClient):
    """Stands for a process stopped inside its wait for a message: once set up for training, one wait
    returns nothing only after three times the coordinator's timeout (what it queued is read afterwards)."""

    stopped, waits_in_session = False, 0

    def new_socket(self):
        sock = super().new_socket()
        recv = sock.recv

        def recv_or_stop(timeout_s):
            self.waits_in_session += self.session is not None
            if not self.stopped and self.waits_in_session >= 5:
                self.stopped = True
                time.sleep(3 * TIMEOUT_S)
                return None
            return recv(timeout_s)

        sock.recv = recv_or_stop
        return sock


@pytest.mark.slow
def test_a_client_stopped_while_it_waits_is_lost_once_and_back_once(loopback):
    run = loopback(algorithms=[{"name": "asgd", "lr": 0.05}], clients=["x1", "x1"],
                   stop={"time_budget_s": 4 * TIMEOUT_S + 4, "max_updates": 100000},
                   faults={"client_timeout_s": TIMEOUT_S})
    run.start(clients=1)
    run.add_client(StoppedWhileWaiting, rank=1)
    run.join()
    assert run.error is None and not run.client_errors, (run.error, run.client_errors)
    rows = {r["client"]: r for r in read_jsonl(run.run_dir / "clients.jsonl")}
    assert rows[1]["lost"] == 1 and rows[1]["rejoined"] == 1, rows[1]
    assert rows[0]["lost"] == 0, rows[0]
