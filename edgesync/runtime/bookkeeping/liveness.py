"""Which clients are alive, as the coordinator sees them: last word heard, who is lost and why.

Every message from a client is a sign of life (HEARTBEAT is sent only when a client has nothing else
to say for a second). A client silent for `timeout_s`, or whose local process exited, is lost: the
coordinator tells the algorithm's server half (`on_client_lost`), which finishes rounds without it.
A lost client that speaks again — the same process after a pause, or a new one that says HELLO for
its rank — is taken back (`on_client_joined`). Per algorithm, each client's losses and returns are
counted for clients.jsonl.
"""
from __future__ import annotations

import time
from collections import Counter


class Liveness:
    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.last_seen: dict[int, float] = {}
        self.lost: dict[int, str] = {}  # rank → why
        self.losses: Counter[int] = Counter()   # this algorithm's, per rank
        self.returns: Counter[int] = Counter()

    def seen(self, rank: int) -> None:
        self.last_seen[rank] = time.monotonic()

    def alive(self, ranks) -> list[int]:
        return sorted(r for r in ranks if r not in self.lost)

    def silent(self, ranks) -> list[tuple[int, float]]:
        """(rank, seconds silent) of the live clients past the timeout."""
        now = time.monotonic()
        return [(r, now - self.last_seen.get(r, now)) for r in self.alive(ranks)
                if now - self.last_seen.get(r, now) > self.timeout_s]

    def lose(self, rank: int, why: str) -> bool:
        """Mark `rank` lost; False if it already was."""
        if rank in self.lost:
            return False
        self.lost[rank] = why
        self.losses[rank] += 1
        return True

    def back(self, rank: int) -> None:
        self.lost.pop(rank, None)
        self.returns[rank] += 1
        self.seen(rank)

    def new_algorithm(self) -> None:
        self.losses.clear()
        self.returns.clear()
