"""The compute turn: one process's compute, lent to one of its emulated devices at a time.

`edgesync client --slots K` hosts K logical clients (slots, runtime/live/slots.py) in one process with one
torch thread. Each slot computes its training step only while it holds the process's turn; it sleeps
through its throttle's pacing, waits for messages and sends without it, so a ×10 slot's sleep is
another slot's compute.

Who gets the turn next matters for the emulated speeds. Every slot's step has a deadline: it asked
at `t` and, paced at the run's base step, must end by `t + f × base` (f its profile's mean factor).
The turn goes to the waiting slot with the earliest deadline (EDF): on one processor, non-preemptive
EDF meets every deadline that can be met. When all slots of a process ask at once (every synchronous
round starts them together), the slot with factor f waits only for the slots whose factor is at most
f — which is the term emulation/device_model.py uses for a turn's base step. First come, first served
instead would let a ×1 slot wait for every ×10 slot of its process before computing.

A slot waiting for the turn must still look alive to the coordinator: `acquire` calls `idle` (its
heartbeat) about every IDLE_EVERY_S while it waits. The turn is reentrant for its holder (a slot's
calibration holds it across all its measured steps).
"""
from __future__ import annotations

import heapq
import itertools
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from edgesync.emulation.throttle import IDLE_EVERY_S


class ComputeTurn:
    """A reentrant lock granted earliest deadline first; each waiter has its own condition, so a release
    wakes only the slot whose turn is next (not all K of them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None  # thread ident of the holder
        self._depth = 0
        self._waiting: list[tuple[float, int, threading.Condition]] = []  # (deadline, arrival, its wake-up)
        self._arrival = itertools.count()
        self.grants = 0           # turns granted (not counting reentrant ones)
        self.waited_s = 0.0       # summed time slots spent waiting for the turn

    def acquire(self, deadline: float | None = None, idle: Callable[[], None] | None = None) -> None:
        """Wait for the turn. `deadline`: when the step asking must end (perf_counter seconds; None: now,
        first come first served among those without one); `idle` is called about every IDLE_EVERY_S
        of waiting, outside the turn's lock."""
        me = threading.get_ident()
        asked = time.perf_counter()
        with self._lock:
            if self._owner == me:
                self._depth += 1
                return
            if self._owner is None and not self._waiting:
                self._take(me, asked)
                return
            entry = (asked if deadline is None else deadline, next(self._arrival), threading.Condition(self._lock))
            heapq.heappush(self._waiting, entry)
            try:
                last_idle = time.monotonic()
                while self._owner is not None or self._waiting[0] is not entry:
                    entry[2].wait(IDLE_EVERY_S)
                    if idle is not None and time.monotonic() - last_idle >= IDLE_EVERY_S:
                        self._lock.release()
                        try:
                            idle()
                        finally:
                            self._lock.acquire()
                        last_idle = time.monotonic()
            except BaseException:
                self._waiting.remove(entry)  # an idle() that failed: this slot no longer waits
                heapq.heapify(self._waiting)
                self._wake_next()
                raise
            heapq.heappop(self._waiting)
            self._take(me, asked)

    def release(self) -> None:
        with self._lock:
            if self._owner != threading.get_ident():
                raise RuntimeError("compute turn released by a thread that does not hold it")
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._wake_next()

    def held(self) -> bool:
        """Whether the calling thread holds the turn."""
        return self._owner == threading.get_ident()

    @contextmanager
    def holding(self, deadline: float | None = None, idle: Callable[[], None] | None = None) -> Iterator[None]:
        self.acquire(deadline, idle)
        try:
            yield
        finally:
            self.release()

    def _take(self, me: int, asked: float) -> None:
        self._owner, self._depth = me, 1
        self.grants += 1
        self.waited_s += time.perf_counter() - asked

    def _wake_next(self) -> None:
        if self._owner is None and self._waiting:
            self._waiting[0][2].notify()
