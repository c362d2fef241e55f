"""A client's wait for the coordinator's first word (`edgesync client --connect-timeout`): it says now and
then that it is still waiting, and gives up with one line saying whether anything answered there."""
from __future__ import annotations

import logging

from edgesync.constants import CONNECT_REPORT_EVERY_S
from edgesync.transport.sockets import ClientSocket


class ConnectWait:
    """A client's wait for the coordinator's first word: `check` logs every `every_s` that it is still
    waiting (address, seconds, whether anything answers there) and, past `timeout_s`, returns the
    one-line reason to give up (`--connect-timeout`)."""

    def __init__(self, address: str, timeout_s: float, every_s: float = CONNECT_REPORT_EVERY_S):
        self.address, self.timeout_s, self.every_s = address, timeout_s, every_s
        self._next = every_s
        logging.getLogger("edgesync.client").info(
            "connecting to the coordinator at %s (giving up after %.0f s without an answer: --connect-timeout)",
            address, timeout_s)

    def check(self, sock: ClientSocket, silent_s: float) -> str | None:
        """`silent_s`: seconds without a word from the coordinator (it resets when one comes)."""
        if silent_s >= self.timeout_s:
            what = ("it accepted the connection but never answered HELLO" if sock.reached else
                    "nothing answered there: is the coordinator running, and are host and port right?")
            return (f"--connect {self.address}: gave up after {silent_s:.0f} s "
                    f"(--connect-timeout {self.timeout_s:g}): {what}")
        if silent_s < self._next - self.every_s:  # the coordinator spoke meanwhile
            self._next = silent_s + self.every_s
        elif silent_s >= self._next:
            self._next = silent_s + self.every_s
            what = "it has not answered HELLO yet" if sock.reached else "nothing answers there yet"
            logging.getLogger("edgesync.client").info(
                "waiting for the coordinator at %s: %.0f s of %.0f s, %s (--connect-timeout)",
                self.address, silent_s, self.timeout_s, what)
        return None
