"""Rate-limited warnings (runtime/bookkeeping/log_limit.py), on a hand-driven clock."""
from __future__ import annotations

import logging

from edgesync.runtime.bookkeeping.log_limit import RateLimitedLog


def test_the_first_warning_is_whole_the_rest_are_counted_per_window(caplog):
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("test.limit"), window_s=10.0, clock=lambda: now[0])
    caplog.set_level("WARNING", logger="test.limit")
    for i in range(50):
        limited.warning("peer-a", f"bad message {i}")
    limited.warning("peer-b", "other peer")
    assert [r.getMessage() for r in caplog.records] == ["bad message 0", "other peer"]
    now[0] = 10.5
    limited.warning("peer-a", "bad message 50")  # a new window: the count of the last one, then this one whole
    messages = [r.getMessage() for r in caplog.records]
    assert messages[2] == "49 more like it from 'peer-a' within 10 s (the first: bad message 1)"
    assert messages[3] == "bad message 50"
    now[0] = 25.0
    limited.flush()  # peer-b's window had nothing suppressed, peer-a's neither: no line
    assert len(caplog.records) == 4


def test_a_flood_of_new_peers_is_bounded(caplog):
    limited = RateLimitedLog(logging.getLogger("test.limit2"), clock=lambda: 0.0)
    for i in range(5000):
        limited.warning(i, "x")
    assert len(limited._windows) <= 1024
