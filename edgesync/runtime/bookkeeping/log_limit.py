"""Warnings about one peer's bad messages, rate-limited: a peer sending garbage in a loop must not fill
the disk. The first warning of a peer is logged whole; later ones within `window_s` are counted, and the
count is logged (with the first reason of the window) once the window is over — at the next warning
of that peer or when `flush()` is called — so a log shows every kind of trouble and how much of it."""
from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

WINDOW_S = 10.0
MAX_PEERS = 1024  # peers remembered; a flood from ever-new sockets cannot grow this without bound


@dataclass
class _Window:
    started: float
    suppressed: int = 0
    first_reason: str = ""


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, window_s: float = WINDOW_S, clock=time.monotonic):
        self.log = logger
        self.window_s = window_s
        self.clock = clock
        self._windows: OrderedDict[object, _Window] = OrderedDict()

    def warning(self, peer: object, text: str) -> None:
        """Log `text` about `peer` (an identity or a rank), within the limit."""
        now = self.clock()
        window = self._windows.get(peer)
        if window is not None and now - window.started < self.window_s:
            if not window.suppressed:
                window.first_reason = text
            window.suppressed += 1
            return
        if window is not None:
            self._summarise(peer, window)
        self._windows[peer] = _Window(now)
        self._windows.move_to_end(peer)
        while len(self._windows) > MAX_PEERS:
            old_peer, old = self._windows.popitem(last=False)
            self._summarise(old_peer, old)
        self.log.warning("%s", text)

    def flush(self) -> None:
        """Log the counts of windows that are over (called a few times a second by the coordinator)."""
        now = self.clock()
        for peer in [p for p, w in self._windows.items() if now - w.started >= self.window_s]:
            self._summarise(peer, self._windows.pop(peer))

    def _summarise(self, peer: object, window: _Window) -> None:
        if window.suppressed:
            self.log.warning("%d more like it from %r within %.0f s (the first: %s)", window.suppressed, peer,
                             self.window_s, window.first_reason)
