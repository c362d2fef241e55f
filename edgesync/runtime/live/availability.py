"""The live coordinator's side of availability: every client's schedule on the coordinator's algorithm clock.

Each client follows its own schedule and disconnects when it goes offline (device_schedule.py); the
coordinator does not wait to notice. At a client's offline time it declares the client lost (the server
half hears on_client_lost, a round stops waiting for it) and from then ignores what it may still say — a
heartbeat or an update that was on its way is lost with the device. A HELLO from it is refused (not
fatally: it asks again) until its online time, less `EARLY_S` for the clocks' difference; once it is set up
again the server half hears on_client_joined. Rows: a presence row at each offline time and at each return.
"""
from __future__ import annotations

import heapq
import math

from edgesync.algorithms.machinery.stragglers import discarded_extras
from edgesync.emulation.availability import Schedule
from edgesync.config import Scenario

EARLY_S = 0.5  # a client may return this much before its online time (its view of the clock runs behind)


class CoordinatorAvailability:
    def __init__(self, scenario: Scenario):
        self.schedules = {rank: Schedule(c.availability, scenario.seed, rank)
                          for rank, c in enumerate(scenario.clients) if c.availability is not None}
        self.offline: dict[int, float] = {}  # rank → since when (algorithm time)
        self.offline_s: dict[int, float] = {}  # time offline so far, per rank
        self._heap: list[tuple[float, int]] = []

    @property
    def active(self) -> bool:
        return bool(self.schedules)

    def start(self) -> list[int]:
        """The algorithm starts (t = 0): the ranks offline now."""
        self.offline, self.offline_s, self._heap = {}, {}, []
        for rank, schedule in self.schedules.items():
            if not schedule.online(0.0):
                self.offline[rank] = 0.0
            heapq.heappush(self._heap, (schedule.next_change(0.0), rank))
        return sorted(self.offline)

    def due(self, now: float) -> list[tuple[int, float]]:
        """(rank, offline time) of each client whose offline time has come by `now` (once per period)."""
        gone = []
        while self._heap and self._heap[0][0] <= now:
            t, rank = heapq.heappop(self._heap)
            schedule = self.schedules[rank]
            if not schedule.online(t) and rank not in self.offline:
                self.offline[rank] = t
                gone.append((rank, t))
            change = schedule.next_change(t)
            if not math.isinf(change):
                heapq.heappush(self._heap, (change, rank))
        return gone

    def take_offline(self, now: float, account, members) -> None:
        """Clients whose offline time has come by `now` are lost (the server half hears it through
        `members.lose`), with a presence row at their scheduled time."""
        for rank, at in self.due(now):
            account.log_presence(rank, False, at)
            if rank not in members.liveness.lost:
                members.lose(rank, "offline (availability)")

    def next_change(self) -> float:
        """When the next scheduled change is due (∞: none): the coordinator's loop wakes for it."""
        return self._heap[0][0] if self._heap else math.inf

    def is_offline(self, rank: int, now: float) -> bool:
        """Whether `rank` is offline by its schedule (a return within EARLY_S of its time counts as online)."""
        if rank not in self.offline:
            return False
        schedule = self.schedules[rank]
        return not (schedule.online(now) or schedule.online(now + EARLY_S))

    def back(self, rank: int, now: float) -> bool:
        """`rank` is set up again: True if it was offline by its schedule (a presence row is due)."""
        since = self.offline.pop(rank, None)
        if since is None:
            return False
        self.offline_s[rank] = self.offline_s.get(rank, 0.0) + max(0.0, now - since)
        return True

    def online_at(self, rank: int, now: float) -> float:
        """When `rank`, offline at `now`, is online again (∞: never)."""
        return self.schedules[rank].next_change(now)

    def totals(self, end: float) -> dict[int, float]:
        """Each scheduled client's time offline by `end`."""
        out = dict(self.offline_s)
        for rank, since in self.offline.items():
            out[rank] = out.get(rank, 0.0) + max(0.0, end - since)
        return {rank: out.get(rank, 0.0) for rank in self.schedules}

    def client_extras(self, server, ranks, end: float) -> dict[int, dict]:
        """Per client, what its clients.jsonl row adds: time offline (scheduled clients) and the rounds it
        reported in (round-based server halves)."""
        offline = self.totals(end)
        rounds = getattr(server, "participation", None)
        return {r: {"offline_s": round(offline[r], 6) if r in offline else None,
                    "rounds": rounds.get(r, 0) if rounds is not None else None,
                    **discarded_extras(server, r)} for r in ranks}
