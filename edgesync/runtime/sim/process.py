"""Client halves that talk mid-instruction (ESync's State Server queries), run inside the simulator.

Most client halves compute an instruction in one go, and the simulator runs them eagerly. A half
that queries the server (`uses_queries = True`) must see the server as it is at the query's
virtual time, which depends on everyone else's progress. Such an instruction runs as a
`ClientProcess`: a thread in strict lock-step with the engine (exactly one of them runs at any
moment, so runs stay deterministic). The client computes ahead on its own virtual clock and hands
control back whenever it needs the world: a blocking query (resumed when the reply arrives), a
check for non-blocking replies (resumed when the engine has caught up to the client's time), an
interruptible step (resumed at its end, or earlier by a reply that cuts it short), or its finished
update.
"""
from __future__ import annotations

import threading
from typing import Any, Callable


class InstructionAborted(Exception):
    """The algorithm ended while this instruction was still running."""


class ClientProcess:
    """One instruction of one client, run as a coroutine on a thread."""

    def __init__(self, run: Callable[[], Any], elapsed: Callable[[], float], start: float,
                 send_query: Callable[[dict, float], None]):
        self._run_instruction = run
        self._elapsed = elapsed          # virtual seconds the client's steps took so far
        self._send_query = send_query    # the engine's way to schedule a non-blocking query
        self.base = start                # local time = base + elapsed
        self.inbox: list[dict] = []      # replies to non-blocking queries, as they arrive
        self.request: tuple = ()
        self._reply: Any = None
        self._abort = False
        self.woke_at = 0.0
        self.wait_token = 0              # tells a wait's own timeout from an earlier one's
        self._to_client = threading.Semaphore(0)
        self._to_engine = threading.Semaphore(0)
        self._thread: threading.Thread | None = None

    # -- the engine's side ---------------------------------------------------------------------
    def advance(self, at: float, reply: Any = None) -> tuple:
        """Let the client run from virtual time `at` until it next needs the engine.

        Returns its request: ("query", meta, t), ("sync", t), ("wait", t, until), ("done", update, t)
        or ("error", exc). A client resumed from a wait was computing, not idle: its clock keeps its
        base, and `woke_at` tells it when it was woken.
        """
        if self.request and self.request[0] == "wait":
            self.woke_at = at
        else:
            self.base = at - self._elapsed()
        self._reply = reply
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="sim-client", daemon=True)
            self._thread.start()
        else:
            self._to_client.release()
        self._to_engine.acquire()
        return self.request

    def kill(self) -> None:
        """End a suspended instruction (the algorithm is over)."""
        if self._thread is not None and self._thread.is_alive():
            self._abort = True
            self._to_client.release()
            self._to_engine.acquire()
            self._thread.join()

    # -- the client's side (runs on the process's thread) ----------------------------------------
    def now(self) -> float:
        return self.base + self._elapsed()

    def query(self, meta: dict) -> dict:
        return self._yield(("query", meta, self.now()))

    def send_query(self, meta: dict) -> None:
        self._send_query(meta, self.now())  # safe: the engine is parked while we run

    def replies(self) -> list[dict]:
        self._yield(("sync", self.now()))
        out, self.inbox = self.inbox, []
        return out

    def wait_replies(self, timeout_s: float) -> tuple[list[dict], float]:
        """Run on for up to `timeout_s` virtual seconds (an interruptible step), woken by a reply."""
        if self.inbox:
            out, self.inbox = self.inbox, []
            return out, 0.0
        start = self.now()
        self.wait_token += 1
        self._yield(("wait", start, start + timeout_s))
        out, self.inbox = self.inbox, []
        return out, (self.woke_at - start if out else timeout_s)

    def _yield(self, request: tuple) -> Any:
        self.request = request
        self._to_engine.release()
        self._to_client.acquire()
        if self._abort:
            raise InstructionAborted()
        return self._reply

    def _main(self) -> None:
        try:
            update = self._run_instruction()
            self.request = ("done", update, self.now())
        except InstructionAborted:
            self.request = ("aborted",)
        except BaseException as exc:  # surfaces in the engine's thread, where the run can fail cleanly
            self.request = ("error", exc)
        self._to_engine.release()


class EagerContext:
    """The ClientContext of a half that runs in one go: it may read the clock, not query."""

    def __init__(self, elapsed: Callable[[], float]):
        self._elapsed = elapsed
        self.start = 0.0

    def now(self) -> float:
        return self.start + self._elapsed()

    def query(self, meta: dict) -> dict:
        raise RuntimeError("this client half does not declare uses_queries = True")

    send_query = query

    def replies(self) -> list[dict]:
        return []

    def wait_replies(self, timeout_s: float) -> tuple[list[dict], float]:
        raise RuntimeError("this client half does not declare uses_queries = True")
