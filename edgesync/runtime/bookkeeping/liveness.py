"""Which clients are alive, as the coordinator sees them: last word heard, who is lost and why.

Every message from a client is a sign of life (HEARTBEAT is sent only when a client has nothing else
to say for a second). A client silent for `timeout_s`, or whose local process exited, is lost: the
coordinator tells the algorithm's server half (`on_client_lost`), which finishes rounds without it.

Two silences are not a client's: work it was given that it answers only when done (SETUP, CALIBRATE,
EVALUATE: building its model and data, measuring its step time, evaluating), during which it says nothing
for up to `BUSY_ALLOWANCE_S` (or `timeout_s`, if longer); and a coordinator that was not listening itself
(descheduled on a loaded host, or busy between phases): silence then counts from when it listens again,
as a client's does (live/client.py). On a loaded lab machine either used to lose clients that were fine.
A lost client that speaks again — the same process after a pause, or a new one that says HELLO for
its rank — is taken back (`on_client_joined`). Per algorithm, each client's losses and returns are
counted for clients.jsonl.
"""
from __future__ import annotations

import time
from collections import Counter


# How long a client given work it answers only when done may say nothing, when client_timeout_s is shorter:
# a set-up or calibration on a loaded host takes seconds. A client hung there (alive, connected, mute) is
# lost after this long, so a short allowance keeps a run from waiting long for it; longer set-ups (a first
# run's download) need client_timeout_s raised, as before.
BUSY_ALLOWANCE_S = 10.0


class Liveness:
    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.last_seen: dict[int, float] = {}
        self.busy: set[int] = set()  # given work it answers only when done, not answered yet
        self.listening_since = time.monotonic()  # the coordinator's last return from not listening
        self.lost: dict[int, str] = {}  # rank → why
        self.losses: Counter[int] = Counter()   # this algorithm's, per rank
        self.returns: Counter[int] = Counter()

    def seen(self, rank: int) -> None:
        self.last_seen[rank] = time.monotonic()

    def alive(self, ranks) -> list[int]:
        return sorted(r for r in ranks if r not in self.lost)

    def asked(self, rank: int) -> None:
        """`rank` was sent work it answers only when done."""
        self.busy.add(rank)

    def answered(self, rank: int) -> None:
        self.busy.discard(rank)

    def not_listening_until_now(self) -> None:
        """The coordinator did not read its socket for a while: what its clients said meanwhile is still
        queued there, so their silence counts from now."""
        self.listening_since = time.monotonic()

    def silent(self, ranks) -> list[tuple[int, float]]:
        """(rank, seconds silent) of the live clients past their allowance."""
        now, out = time.monotonic(), []
        for r in self.alive(ranks):
            silent = now - max(self.last_seen.get(r, now), self.listening_since)
            if silent > (max(self.timeout_s, BUSY_ALLOWANCE_S) if r in self.busy else self.timeout_s):
                out.append((r, silent))
        return out

    def lose(self, rank: int, why: str) -> bool:
        """Mark `rank` lost; False if it already was."""
        if rank in self.lost:
            return False
        self.lost[rank] = why
        self.losses[rank] += 1
        self.busy.discard(rank)
        return True

    def back(self, rank: int) -> None:
        self.lost.pop(rank, None)
        self.busy.discard(rank)
        self.returns[rank] += 1
        self.seen(rank)

    def new_algorithm(self) -> None:
        self.losses.clear()
        self.returns.clear()
