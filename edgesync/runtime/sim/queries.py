"""The simulator's events for client halves that query the server mid-instruction (ESync's State Server):
their instructions run as ClientProcess coroutines (process.py) that the engine advances when what
they wait for comes up in virtual time. Part of the Simulator (simulator.py), kept apart for its size."""
from __future__ import annotations

from edgesync.runtime.sim.process import EagerContext
from edgesync.runtime.sim.state import Event, SimClient
from edgesync.trainer import DeviceOffline
from edgesync.transport import protocol


class QueryingClients:
    """Mixed into Simulator: its `clients`, `processes`, `account`, `push` and `_finished` are used."""

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
            self._finished(c, request[1], request[2])
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

    def _reply_at_client(self, event: Event) -> None:
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

    def _resume(self, event: Event) -> None:
        process = self.processes.get(event.client)
        if process is None:
            return
        token = event.message  # None: a sync; else the wait whose time is up, unless it was woken already
        if token is None or (process.request[0] == "wait" and token == process.wait_token):
            self._serve(self.clients[event.client], process.advance(event.time))
