"""`edgesync run`'s launcher with its clients in threads of the test process, for live-run tests whose
client processes are not what they test: each `edgesync client` process costs a torch import (~3 s of
CPU), an EdgeClient in a thread (as the loopback fixture's, conftest.py) none. Same client code, same
sockets, same coordinator; isolation is "none" (a client in a thread never pins or caps its process).

A test module imports the `threaded_clients` fixture from here and asks for it.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from edgesync.runtime.bookkeeping.membership import RunAborted
from edgesync.runtime.live.client import EdgeClient

LAUNCHER = "edgesync.runtime.live.launcher.LocalClients"


class ThreadedClients:
    """Stands in for launcher.LocalClients (same arguments): client `rank` is an EdgeClient in a thread."""

    def __init__(self, address: str | list[str], count: int, log_dir: Path, data_root: str | None = None,
                 prefixes: list[list[str]] | None = None, options: list[list[str]] | None = None,
                 layout: list[range] | None = None):
        if prefixes or options or (layout and any(len(g) > 1 for g in layout)):
            raise NotImplementedError("namespaces, CURVE keys and slots need real client processes")
        log_dir.mkdir(parents=True, exist_ok=True)
        addresses = [address] * count if isinstance(address, str) else address
        self.errors: dict[int, BaseException] = {}
        self.reported: set[int] = set()
        self.threads: list[threading.Thread] = []
        for rank in range(count):
            client = EdgeClient(addresses[rank], rank=rank, data_root=data_root)
            thread = threading.Thread(target=self._run, args=(rank, client), name=f"client-{rank}", daemon=True)
            self.threads.append(thread)
            thread.start()

    def _run(self, rank: int, client: EdgeClient) -> None:
        try:
            client.run()
        except BaseException as exc:  # noqa: BLE001 - the coordinator hears of it through check()
            self.errors[rank] = exc

    def check(self) -> list[tuple[int, str]]:
        """Like LocalClients.check: clients that have ended since the last call are lost (a client's
        thread ends early only when it failed); none left stops the run."""
        gone = []
        for rank, thread in enumerate(self.threads):
            if not thread.is_alive() and rank not in self.reported:
                self.reported.add(rank)
                gone.append((rank, f"its thread ended: {self.errors.get(rank)!r}"))
        if self.threads and len(self.reported) == len(self.threads):
            raise RunAborted("every client thread ended; the last one: " + (gone[-1][1] if gone else "?"))
        return gone

    def stop(self, timeout_s: float = 15.0) -> None:
        """The clients were told SHUTDOWN: wait for their threads (daemons: one that hangs dies with pytest)."""
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))


@pytest.fixture
def threaded_clients(monkeypatch):
    """`run_scenario`'s live runs in this test start their clients as threads (ThreadedClients)."""
    monkeypatch.setattr(LAUNCHER, ThreadedClients)
