"""The coordinator's load over one entry, for every runtime: how busy it was, how long messages waited for it,
how many updates it served, and whether it was the run's bottleneck.

A coordinator is one thread (per shard): a message that reaches it while it works on another waits. Over the
entry's run (its clock: virtual in the simulator, wall live), from `origin` (0; a resumed live entry: where it
resumed) to its end:

    utilisation           busy time / the run's length
    queueing delay        per update or query: when the coordinator started on it − when it reached the
                          coordinator (after the links); mean, 95th percentile (nearest rank) and max
    updates served / s    UPDATE messages the coordinator took up / the run's length (applied or collected:
                          not the global model's `updates_per_s`, which counts applications)
    saturated share       the share of the run's time in windows of SATURATION_WINDOW_S during which the
                          coordinator was busy at least SATURATED_BUSY of the window (a last, shorter window
                          by its own length)
    bottleneck            the saturated share exceeds BOTTLENECK_SHARE: the run says so (a warning in the log,
                          summary.json's `coordinator_bottleneck`, a line in report.md)

What busy means is the runtime's: the simulator charges its cost model (sim/coordinator.py; `zero` charges
nothing: utilisation 0, no delay); the live coordinator (`LiveLoad`) counts its loop's wall time outside its wait
for the next message. `CoordinatorLoad` is the streaming part both feed: a handful of floats, the delays of at
most DELAY_RESERVOIR messages (exact up to there, a uniform sample beyond), nothing else per message.
"""
from __future__ import annotations

import logging
import math
import random
import time
from array import array
from typing import Any, Callable

from edgesync.transport.protocol import Message, MessageType as T

log = logging.getLogger("edgesync.coordinator_load")

# One second: long enough that a coordinator busy with one long message is not "saturated" for it, short
# enough that a phase of a few seconds when the clients outpace it shows.
SATURATION_WINDOW_S = 1.0
# Busy 90% of a window: what is left is too little to serve the clients' messages as they come, so they queue.
SATURATED_BUSY = 0.9
# A quarter of the run saturated: past the start-up burst every run has, the clients set the pace no longer.
BOTTLENECK_SHARE = 0.25
# 10,000 delays (80 kB) give the 95th percentile to within about half a percentile point.
DELAY_RESERVOIR = 10_000
FIGURE_DIGITS = 6


class CoordinatorLoad:
    """One coordinator's (or shard's) busy intervals, in time order, and the messages it served."""

    def __init__(self, origin: float = 0.0, window_s: float = SATURATION_WINDOW_S):
        self.origin = origin
        self.window_s = window_s
        self.busy_s = 0.0
        self.events = self.updates = self.delays = 0
        self.delay_sum = self.delay_max = 0.0
        self._kept = array("d")  # the delays' reservoir
        self._draw = random.Random(0)  # seeded: a simulated run stays a pure function of its scenario
        self._pending: tuple[float, float] | None = None  # the latest busy interval: the end may cut it
        self._window, self._window_busy = 0, 0.0  # the window being filled, and its busy time so far
        self.saturated_s = 0.0  # time in windows closed saturated

    def busy(self, start: float, end: float) -> None:
        """The coordinator worked from `start` to `end` (each interval starts where the previous ended or later)."""
        if end > start:
            if self._pending is not None:
                self._fill(*self._pending)
            self._pending = (start, end)

    def served(self, delay_s: float | None, update: bool) -> None:
        """A message taken up after waiting `delay_s` (None: not known); `update`: an UPDATE."""
        self.events += 1
        self.updates += update
        if delay_s is None:
            return
        delay_s = max(0.0, delay_s)  # a sender's clock a little ahead (Flower's wall clocks) waited nothing
        self.delays += 1
        self.delay_sum += delay_s
        self.delay_max = max(self.delay_max, delay_s)
        if self.delays <= DELAY_RESERVOIR:
            self._kept.append(delay_s)
        elif (j := self._draw.randrange(self.delays)) < DELAY_RESERVOIR:  # Vitter's algorithm R
            self._kept[j] = delay_s

    def _fill(self, start: float, end: float) -> None:
        """Count [start, end) into its windows, closing each one it passes."""
        w, o = self.window_s, self.origin
        start = max(start, o)
        while start < end:
            k = max(self._window, math.floor((start - o) / w))
            edge = o + (k + 1) * w
            if edge <= start:  # rounding put `start` on the edge: it is the next window's
                k, edge = k + 1, edge + w
            if k > self._window:
                self._close(k)
            cut = min(end, edge)
            self._window_busy += cut - start
            self.busy_s += cut - start
            start = cut

    def _close(self, next_window: int, length: float | None = None) -> None:
        length = self.window_s if length is None else length
        if length > 0 and self._window_busy >= SATURATED_BUSY * length:
            self.saturated_s += length
        self._window, self._window_busy = next_window, 0.0

    def finish(self, end: float, clock: str, shards: int = 1) -> dict[str, Any]:
        """The figures over [origin, end] (once: what was busy past `end` is cut off). `clock`: virtual or wall."""
        if self._pending is not None:
            self._fill(self._pending[0], min(self._pending[1], end))
            self._pending = None
        span = end - self.origin
        self._close(self._window + 1, min(self.window_s, end - (self.origin + self._window * self.window_s)))
        kept = sorted(self._kept)
        p95 = kept[max(0, math.ceil(0.95 * len(kept)) - 1)] if kept else None
        share = self.saturated_s / span if span > 0 else None
        r = lambda v: None if v is None else round(v, FIGURE_DIGITS)
        return {"clock": clock, "from_s": r(self.origin), "duration_s": r(span), "busy_s": r(self.busy_s),
                "utilisation": r(self.busy_s / span) if span > 0 else None, "events": self.events,
                "updates": self.updates, "updates_served_per_s": r(self.updates / span) if span > 0 else None,
                "delays": self.delays, "queue_delay_mean_s": r(self.delay_sum / self.delays) if self.delays else None,
                "queue_delay_p95_s": r(p95), "queue_delay_max_s": r(self.delay_max) if self.delays else None,
                "saturated_share": r(share), "window_s": self.window_s, "saturated_busy": SATURATED_BUSY,
                "bottleneck_share": BOTTLENECK_SHARE, "bottleneck": share is not None and share > BOTTLENECK_SHARE,
                "shards": shards}


class LiveLoad:
    """The live coordinator's load: its receive call timed, on the algorithm's clock (perf_counter − `started`).

    Busy is everything the loop does outside its wait for the next message: decoding and checking it, the
    server half's work, encoding and sending (pacing) the replies, snapshots for evaluation, checkpoints.
    A message's queueing delay is when the coordinator took it off its socket minus when it reached the
    coordinator: the `clock` its sender stamped on it, the algorithm's clock at its emulated arrival (after the
    client's link pacing; run_clock.py: the client's estimate runs behind by the quickest message's one-way
    latency, so a delay is over-counted by that and by the real network's transfer of the message).
    """

    def __init__(self, started: float, origin: float, sock: Any):
        self.started, self.sock = started, sock
        self.load = CoordinatorLoad(origin)
        self._resumed = time.perf_counter()  # busy from now: the server half's first instructions go out next

    def recv(self, receive: Callable[[float], Any], timeout_s: float) -> Any:
        """`receive(timeout_s)`, the time since the last one counted busy; the message counted served."""
        now = time.perf_counter()
        self.load.busy(self._resumed - self.started, now - self.started)
        item = receive(timeout_s)
        # the moment the coordinator took it (CoordinatorSocket: before its header is decoded); else now
        taken = getattr(self.sock, "taken_at", None) if item is not None else None
        self._resumed = taken if taken is not None and taken >= now else time.perf_counter()
        msg = item[1] if item is not None else None
        if isinstance(msg, Message) and msg.type in (T.UPDATE, T.QUERY):
            delay = None if msg.clock is None else self._resumed - self.started - msg.clock
            self.load.served(delay, msg.type == T.UPDATE)
        return item

    def finish(self, end: float) -> dict[str, Any]:
        return self.load.finish(end, "wall")


def record_load(recorder: Any, label: str, figures: dict[str, Any]) -> dict[str, Any]:
    """Write the entry's row of coordinator.jsonl, and warn when the coordinator was its bottleneck."""
    row = {"algorithm": label, **figures}
    recorder.log_coordinator(row)
    if figures["bottleneck"]:
        log.warning("%s: the coordinator was the bottleneck for %.0f%% of the run (busy at least %.0f%% of each "
                    "such %g s window; utilisation %.0f%%, mean queueing delay %s): the clients offered more than "
                    "it could serve", label, 100 * figures["saturated_share"], 100 * SATURATED_BUSY,
                    figures["window_s"], 100 * (figures["utilisation"] or 0.0), _ms(figures["queue_delay_mean_s"]))
    return row


def _ms(seconds: float | None) -> str:
    return "unknown" if seconds is None else f"{1e3 * seconds:.3g} ms"
