"""Silences that are not a client's (runtime/bookkeeping/liveness.py): a client busy with work it answers only
when done (its set-up, its calibration), and a coordinator that was not listening itself, lose nobody.

On a loaded lab machine, a client's set-up (data, model) can outlast a short `faults.client_timeout_s`; it
used to be declared lost, as the resumed coordinator of test_faults.py's kill-and-resume test once lost
client 0 while the suite ran beside a simulation. Real sockets, in-process clients (tests/runtime/conftest.py).
"""
from __future__ import annotations

import logging
import time

import pytest

from edgesync.metrics.recorder import read_jsonl
from edgesync.runtime.bookkeeping import liveness as liveness_module
from edgesync.runtime.bookkeeping.liveness import BUSY_ALLOWANCE_S, Liveness
from edgesync.runtime.live.client import EdgeClient

TIMEOUT_S = 2.0  # faults.client_timeout_s (the shortest the tests use: twice the heartbeat interval)
SLOW_SETUP_S = 5.0  # over twice the timeout


class SlowSetUpClient(EdgeClient):
    """A client whose set-up takes SLOW_SETUP_S more, saying nothing meanwhile, as a loaded host's does."""

    def _setup(self, msg):
        time.sleep(SLOW_SETUP_S)
        super()._setup(msg)


def test_a_client_setting_up_for_longer_than_the_timeout_is_not_lost(loopback, caplog):
    caplog.set_level(logging.WARNING, "edgesync")
    run = loopback(algorithms=[{"name": "ssgd", "lr": 0.1}], faults={"client_timeout_s": TIMEOUT_S},
                   stop={"time_budget_s": 30, "max_updates": 4, "target_acc": None})
    run.start(clients=0)
    run.add_client(rank=0)
    run.add_client(SlowSetUpClient, rank=1)
    run.join()
    assert run.error is None, run.error
    rows = {r["client"]: r for r in read_jsonl(run.run_dir / "clients.jsonl")}
    assert rows[1]["lost"] == 0 and "error" not in rows[1], rows[1]
    assert rows[1]["steps"] >= 4  # SSGD's rounds waited for it: it was never dropped
    assert not [r.message for r in caplog.records if "lost" in r.message or "reconnecting" in r.message]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(liveness_module.time, "monotonic", c)
    return c


def test_a_busy_client_has_the_busy_allowance_then_the_timeout_again(clock):
    live = Liveness(timeout_s=2.0)
    live.seen(0), live.seen(1)
    live.asked(1)  # e.g. SETUP sent
    clock.now += 5.0
    assert live.silent([0, 1]) == [(0, 5.0)]  # the idle one is past its timeout, the busy one is not
    clock.now += BUSY_ALLOWANCE_S
    assert [r for r, _ in live.silent([0, 1])] == [0, 1]  # silent past the allowance: lost as any other
    live.seen(1), live.answered(1)  # its READY
    clock.now += 2.5
    assert [r for r, _ in live.silent([1])] == [1]  # answered: the plain timeout again


def test_silence_counts_from_when_the_coordinator_listens_again(clock):
    live = Liveness(timeout_s=2.0)
    live.seen(0)
    clock.now += 10.0  # the coordinator was not reading its socket: the client's heartbeats wait there
    live.not_listening_until_now()
    clock.now += 1.5
    assert live.silent([0]) == []
    clock.now += 1.0
    assert live.silent([0]) == [(0, 2.5)]  # still nothing once it listens: lost


def test_a_joined_client_waits_only_until_its_own_heartbeat_is_due():
    """The coordinator's heartbeats (or any message) arriving while a client listens must not stretch the
    client's own silence: it used to wait a whole interval after each message heard, so that its heartbeats
    came up to two intervals apart, and a coordinator with faults.client_timeout_s = 2 (twice the interval)
    lost it ("silent for 2.1 s") though it was fine."""
    from types import SimpleNamespace
    from edgesync.constants import HEARTBEAT_INTERVAL_S
    client = object.__new__(EdgeClient)
    client.device_schedule = None
    client.ctx = SimpleNamespace(sock=SimpleNamespace(last_send=time.monotonic() - 0.7 * HEARTBEAT_INTERVAL_S))
    client.rank = 0
    assert client._wait_s() <= 0.3 * HEARTBEAT_INTERVAL_S + 0.01
    client.ctx.sock.last_send -= HEARTBEAT_INTERVAL_S  # overdue: no wait at all
    assert client._wait_s() == 0.0
    client.rank = None  # not joined yet: no heartbeats, so a whole interval (not a busy loop of zero waits)
    assert client._wait_s() == HEARTBEAT_INTERVAL_S
