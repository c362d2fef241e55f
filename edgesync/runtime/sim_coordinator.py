"""The simulator's coordinator: one thread that serves updates and queries in arrival order and charges
virtual time for its work, as `sim.server_time` says.

The live coordinator is a single thread: an update that arrives while it decodes, applies or answers an
earlier one waits in its socket. Here too: an update or query that reaches the coordinator while it is
busy joins a queue, and a `server_free` event wakes it for the next one when its current work is done
(first come, first served; with no charge at all, `zero`, nothing ever waits and no event is added).
The server half's state changes when the coordinator starts on an event; each message it sends leaves
once it is encoded, one after the other, and the coordinator is free when the last has left.

What an event costs (server_cost.py): `model` charges the costs measured once per machine, one lookup
per event; `measured` does the real work (frames decoded and checked, replies encoded) and charges its
wall time; `zero` charges nothing (the idealised coordinator).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from edgesync.algorithms.base import ModelState, Send, ServerAlgorithm, Update
from edgesync.constants import TIME_GRID_DIGITS
from edgesync.runtime.accounting import AlgorithmAccount
from edgesync.runtime.server_cost import ZERO, Charges, CoordinatorWork, CostSamples
from edgesync.scenario import ServerCostSpec
from edgesync.transport import protocol


class ServerEvent(Protocol):
    """An event for the coordinator (the engine's `Event`): an update or a query from a client."""

    time: float
    kind: str  # to_server | query | presence
    client: int
    message: Any  # the Update; a query's (meta, blocking)
    size: int


class Engine(Protocol):
    """What the coordinator uses of the simulator (simulator.py, which owns it and imports this module)."""

    now: float
    clients: list[Any]  # SimClient: rank, links, byte counters
    account: AlgorithmAccount

    def push(self, t: float, kind: str, client: int, message: Any, size: int, epoch: int = 0) -> None: ...


class VirtualCoordinator:
    def __init__(self, engine: Engine, server: ServerAlgorithm, mode: str, costs: ServerCostSpec | None,
                 initial: ModelState, samples: CostSamples | None = None):
        """`mode` is `sim.server_time`; `costs` the entry's with `model`; `samples` collects every timed part
        of the work with `measured` (a calibration)."""
        self.engine = engine  # its clock, event queue, clients and account
        self.server = server
        self.free_at = 0.0  # busy until then
        self.queue: deque[ServerEvent] = deque()  # what arrived while it was busy
        self.work = CoordinatorWork(server, initial, samples) if mode == "measured" else None
        if mode == "model" and costs is None:
            raise ValueError(f"{server.config.key}: sim.server_time is model but no coordinator costs were given")
        self.charges = Charges.of(costs) if mode == "model" else ZERO

    def start(self) -> None:
        """The server half's first instructions, sent at time 0."""
        self.free_at = round(self.send(0.0, self.server.start()), TIME_GRID_DIGITS)
        self.engine.account.log_updates(self.server.drain_update_log(), 0.0)  # a first round's draw, at time 0

    def arrive(self, event: ServerEvent) -> None:
        """An update or a query reaches the coordinator: handled now if it is free, else queued."""
        if self.queue or event.time < self.free_at:
            if not self.queue:
                self.engine.push(self.free_at, "server_free", -1, None, 0)
            self.queue.append(event)
            return
        self._handle(event, event.time)

    def wake(self, event: ServerEvent) -> None:
        """`server_free`: the coordinator takes the next queued event."""
        self._handle(self.queue.popleft(), event.time)
        if self.queue:
            self.engine.push(self.free_at, "server_free", -1, None, 0)

    def _handle(self, event: ServerEvent, start: float) -> None:
        self.engine.now = start  # the server half's clock (ESync's State Server stamps queries with it)
        handle = {"to_server": self._update, "query": self._query, "presence": self._presence}[event.kind]
        self.free_at = round(handle(event, start), TIME_GRID_DIGITS)

    def _update(self, event: ServerEvent, start: float) -> float:
        engine = self.engine
        c = engine.clients[event.client]
        c.bytes_up += event.size
        engine.account.bytes_up += event.size
        update: Update = event.message
        engine.account.samples += int(update.meta.get("samples", 0))
        if self.work is not None:  # measured: the real work, timed
            done = self.work.update(c.rank, update)
            sends, busy, encode_s = done.sends, done.work_s, done.encode_s
        else:
            before = self.server.updates
            sends = self.server.on_update(c.rank, update)
            busy = self.charges.update_apply if self.server.updates > before else self.charges.update_collect
            encode_s = None
        engine.account.log_updates(self.server.drain_update_log(), start)
        return self.send(start + busy, sends, encode_s)

    def _presence(self, event: ServerEvent, start: float) -> float:
        """A device went offline (`lost`) or came back (`joined`): the server half hears it in turn, as the
        live coordinator does between messages (no charge: a few dictionary operations)."""
        server = self.server
        joined = event.message == "joined"
        sends = server.on_client_joined(event.client) if joined else server.on_client_lost(event.client)
        self.engine.account.log_updates(server.drain_update_log(), start)
        return self.send(start, sends)

    def _query(self, event: ServerEvent, start: float) -> float:
        engine = self.engine
        c = engine.clients[event.client]
        meta, blocking = event.message
        reply: dict[str, Any] | None
        if self.work is not None:
            reply, busy = self.work.query(c.rank, meta)
        else:
            reply, busy = self.server.on_query(c.rank, meta), self.charges.query
        end = start + busy
        if reply is None:
            if blocking:
                raise RuntimeError(f"{self.server.config.key}: a blocking query from client {c.rank} got no reply")
            return end
        size = protocol.reply(reply).wire_size()
        c.bytes_down += size
        engine.account.bytes_down += size
        engine.push(c.down.arrival(end, size), "reply", c.rank, (reply, blocking), size, c.epoch)
        return end

    def send(self, start: float, sends: list[Send], encode_s: list[float] | None = None) -> float:
        """Send `sends` one after another from `start`, each as soon as it is encoded (`encode_s`: each
        one's measured encoding; else the charge per message). Returns when the last one has left."""
        engine, t = self.engine, start
        for i, send in enumerate(sends):
            t += encode_s[i] if encode_s is not None else self.charges.encode_send
            c = engine.clients[send.client]
            instr = send.instruction
            size = protocol.train(instr.meta, instr.tensors).wire_size()
            c.bytes_down += size
            engine.account.bytes_down += size
            engine.push(c.down.arrival(t, size), "to_client", send.client, instr, size, c.epoch)
        return t
