"""The simulator's events for client halves that query the server mid-instruction (ESync's State Server):
their instructions run as ClientProcess coroutines (process.py) that the engine advances when what
they wait for comes up in virtual time.

`QueryingClients` holds one algorithm's running processes. It is handed what it uses of the simulator,
and nothing else: the algorithm's clients, its account (the bytes of the queries count as traffic up),
`push` (schedule an event) and `finished` (an instruction's update is ready to go up its link)."""
from __future__ import annotations

from typing import Callable, Protocol

from edgesync.algorithms.machinery.base import Instruction, Update
from edgesync.runtime.bookkeeping.accounting import AlgorithmAccount
from edgesync.runtime.sim.process import ClientProcess, EagerContext
from edgesync.runtime.sim.state import Event, SimClient
from edgesync.trainer import DeviceOffline
from edgesync.transport import protocol


class Push(Protocol):
    """The simulator's `push`: schedule an event of `kind` for `client` at virtual time `t`."""

    def __call__(self, t: float, kind: str, client: int, message, size: int, epoch: int = 0) -> None: ...


Finished = Callable[[SimClient, Update, float], None]  # an instruction's update, done at that time


class QueryingClients:
    """The instructions of one algorithm's querying client halves, each a ClientProcess, by rank."""

    def __init__(self, clients: list[SimClient], account: AlgorithmAccount, push: Push, finished: Finished):
        self.clients, self.account = clients, account
        self.push, self.finished = push, finished
        self.processes: dict[int, ClientProcess] = {}

    def start(self, c: SimClient, instruction: Instruction, start: float) -> None:
        """Run `c`'s instruction from virtual time `start` until it first needs the engine."""
        if c.rank in self.processes:
            raise RuntimeError(f"client {c.rank} got an instruction while still running the previous one")
        process = ClientProcess(lambda: c.half.on_instruction(instruction), lambda: c.clock.elapsed, start,
                                lambda meta, t: self._send_query(c, meta, t, blocking=False))
        c.half.ctx = process
        self.processes[c.rank] = process
        self._serve(c, process.advance(start))

    def stop(self, c: SimClient) -> None:
        """`c`'s device went offline: the instruction it was running is lost."""
        process = self.processes.pop(c.rank, None)
        if process is not None:
            process.kill()
            c.half.ctx = EagerContext(lambda: c.clock.elapsed)

    def end(self) -> None:
        """The algorithm ended: stop every instruction still running (its steps so far count)."""
        for rank, process in self.processes.items():
            self.clients[rank].free_at = max(self.clients[rank].free_at, process.now())
            process.kill()

    # -- events ------------------------------------------------------------------------------------
    def reply_at_client(self, event: Event) -> None:
        process = self.processes.get(event.client)
        if process is None or event.epoch != self.clients[event.client].epoch:
            return  # the instruction it answers is over (or the device went offline since)
        reply, blocking = event.message
        if blocking:
            self._serve(self.clients[event.client], process.advance(event.time, reply))
            return
        process.inbox.append(reply)
        if process.request[0] == "wait":  # it cuts the client's interruptible step short
            self._serve(self.clients[event.client], process.advance(max(event.time, process.request[1])))

    def resume(self, event: Event) -> None:
        process = self.processes.get(event.client)
        if process is None:
            return
        token = event.message  # None: a sync; else the wait whose time is up, unless it was woken already
        if token is None or (process.request[0] == "wait" and token == process.wait_token):
            self._serve(self.clients[event.client], process.advance(event.time))

    # -- what a process asks for -------------------------------------------------------------------
    def _serve(self, c: SimClient, request: tuple) -> None:
        """Act on what a suspended client process asked for."""
        kind = request[0]
        if kind == "query":
            self._send_query(c, request[1], request[2], blocking=True)
        elif kind == "sync":
            self.push(request[1], "resume", c.rank, None, 0)
        elif kind == "wait":
            self.push(request[2], "resume", c.rank, self.processes[c.rank].wait_token, 0)
        elif kind == "done":
            del self.processes[c.rank]
            c.half.ctx = EagerContext(lambda: c.clock.elapsed)
            self.finished(c, request[1], request[2])
        elif kind == "error" and isinstance(request[1], DeviceOffline):
            del self.processes[c.rank]  # it went offline mid-instruction: nothing is sent
            c.half.ctx = EagerContext(lambda: c.clock.elapsed)
            c.free_at = c.clock.offline_at
        elif kind == "error":
            raise request[1]

    def _send_query(self, c: SimClient, meta: dict, t: float, blocking: bool) -> None:
        size = protocol.query(meta).wire_size()
        c.bytes_up += size
        self.account.bytes_up += size
        self.push(c.up.arrival(t, size), "query", c.rank, (meta, blocking), size, c.epoch)
