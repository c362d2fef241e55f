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

Its load (`finish`, metrics/coordinator_load.py): busy while it charges; each message's queueing delay from its arrival
(after its links) to the coordinator's start on it. With `zero` it is never busy and nothing waits.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from edgesync.algorithms.machinery.base import ModelState, Send, ServerAlgorithm, Update
from edgesync.emulation.links import Link
from edgesync.metrics.coordinator_load import record_load
from edgesync.runtime.bookkeeping.accounting import AlgorithmAccount
from edgesync.runtime.sim.server_cost import ZERO, Charges, CoordinatorWork, CostSamples
from edgesync.runtime.sim.ring import wire_size
from edgesync.runtime.sim.shards import Shards
from edgesync.config.sim import ServerCostSpec
from edgesync.transport import protocol


class ServerEvent(Protocol):
    """An event for the coordinator (the engine's `Event`): an update or a query from a client."""

    time: float
    kind: str  # to_server | query | presence | ring_mean
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
                 initial: ModelState, samples: CostSamples | None = None, shards: Shards | None = None):
        """`mode` is `sim.server_time`; `costs` the entry's with `model`; `samples` collects every timed part
        of the work with `measured` (a calibration); `shards` the parameter-server shards and their links
        (shards.py; default: one coordinator, no link of its own)."""
        self.engine = engine  # its clock, event queue, clients and account
        self.server = server
        self.shards = shards or Shards((1.0,), Link(), Link())
        # what arrived while it was busy: each event with when its parts were in their shards, and their shares
        self.queue: deque[tuple[ServerEvent, tuple[float, ...], tuple[float, ...] | None]] = deque()
        self.work = CoordinatorWork(server, initial, samples) if mode == "measured" else None
        if mode == "model" and costs is None:
            raise ValueError(f"{server.config.key}: sim.server_time is model but no coordinator costs were given")
        self.charges = Charges.of(costs) if mode == "model" else ZERO
        self.due_at = float("inf")  # the last `due` event asked for

    def start(self) -> None:
        """The server half's first instructions, sent at time 0."""
        self.send(self.shards.serve((0.0,) * len(self.shards.free), 0.0), self.server.start())
        self.engine.account.log_updates(self.server.drain_update_log(), 0.0)  # a first round's draw, at time 0
        self._ask_due()

    def _ask_due(self) -> None:
        """A `due` event at the time the server half asks to be woken (a round's deadline), once per time."""
        due = self.server.due()
        if due != self.due_at and due != float("inf"):
            self.engine.push(max(due, self.engine.now), "due", -1, None, 0)
        self.due_at = due

    def finish(self, end: float) -> dict:
        """The coordinator's load over the algorithm's run to `end`, into coordinator.jsonl (once, at its end)."""
        account = self.engine.account
        return record_load(account.recorder, account.key, self.shards.load(end))

    def arrive(self, event: ServerEvent) -> None:
        """An update or a query reaches the coordinator: handled now if it is free, else queued."""
        shares = self.shards.lead_only if event.kind == "query" else None  # the State Server is the lead's
        if event.kind in ("presence", "due"):  # noticed by the coordinator, not a message over its link
            arrivals = (event.time,) * len(self.shards.free)
        else:
            arrivals = self.shards.arrive(event.time, event.size, shares)
        if not self.queue and self.shards.ready(arrivals, shares) <= event.time:
            self._handle(event, arrivals, shares, event.time)
            return
        self.queue.append((event, arrivals, shares))
        if len(self.queue) == 1:
            self.engine.push(self.shards.ready(arrivals, shares), "server_free", -1, None, 0)

    def wake(self, event: ServerEvent) -> None:
        """`server_free`: the coordinator takes the next queued event."""
        self._handle(*self.queue.popleft(), event.time)
        if self.queue:
            _, arrivals, shares = self.queue[0]
            self.engine.push(max(self.shards.ready(arrivals, shares), event.time), "server_free", -1, None, 0)

    def _handle(self, event: ServerEvent, arrivals: tuple[float, ...], shares: tuple[float, ...] | None,
                start: float) -> None:
        self.engine.now = start  # the server half's clock (ESync's State Server stamps queries with it)
        if event.kind not in ("presence", "due"):  # a client's message: its wait counts in the coordinator's load
            self.shards.took(arrivals, shares, event.kind != "query")
        handle = {"to_server": self._update, "query": self._query, "presence": self._presence,
                  "ring_mean": self._ring_mean, "due": self._due}[event.kind]
        handle(event, arrivals, start)
        self._ask_due()

    def _due(self, event: ServerEvent, arrivals: tuple[float, ...], start: float) -> None:
        """The time the server half asked for (a round's deadline): it closes the round if that is still due
        (a round closed meanwhile has a deadline of its own; no charge beyond the round's close)."""
        server = self.server
        before = server.updates
        sends = server.on_due() if start >= server.due() else []
        self.engine.account.log_updates(server.drain_update_log(), start)
        busy = self.charges.update_apply if server.updates > before else 0.0
        self.send(self.shards.serve(arrivals, busy), sends)

    def _update(self, event: ServerEvent, arrivals: tuple[float, ...], start: float) -> None:
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
        self.send(self.shards.serve(arrivals, busy), sends, encode_s)

    def _ring_mean(self, event: ServerEvent, arrivals: tuple[float, ...], start: float) -> None:
        """All-reduce: the lead's mean crossed its link and the coordinator's (ring.py); the server half
        took the round's updates whole, so only its bytes and its time on the links count."""
        c = self.engine.clients[event.client]
        c.bytes_up += event.size
        self.engine.account.bytes_up += event.size
        self.send(self.shards.serve(arrivals, self.charges.update_collect), [])

    def _presence(self, event: ServerEvent, arrivals: tuple[float, ...], start: float) -> None:
        """A device went offline (`lost`) or came back (`joined`): the server half hears it in turn, as the
        live coordinator does between messages (no charge: a few dictionary operations)."""
        server = self.server
        joined = event.message == "joined"
        sends = server.on_client_joined(event.client) if joined else server.on_client_lost(event.client)
        self.engine.account.log_updates(server.drain_update_log(), start)
        self.send(self.shards.serve(arrivals, 0.0), sends)

    def _query(self, event: ServerEvent, arrivals: tuple[float, ...], start: float) -> None:
        engine, lead = self.engine, self.shards.lead_only
        c = engine.clients[event.client]
        meta, blocking = event.message
        reply: dict[str, Any] | None
        if self.work is not None:
            reply, busy = self.work.query(c.rank, meta)
        else:
            reply, busy = self.server.on_query(c.rank, meta), self.charges.query
        done = self.shards.serve(arrivals, busy, lead)
        if reply is None:
            if blocking:
                raise RuntimeError(f"{self.server.config.key}: a blocking query from client {c.rank} got no reply")
            self.shards.send(done, [], [], lead)
            return
        size = protocol.reply(reply).wire_size()
        c.bytes_down += size
        engine.account.bytes_down += size
        (left,) = self.shards.send(done, [size], [0.0], lead)
        engine.push(c.down.arrival(left, size), "reply", c.rank, (reply, blocking), size, c.epoch)

    def send(self, done: list[float], sends: list[Send], encode_s: list[float] | None = None) -> None:
        """Send `sends` one after another once each shard is `done`, each part as soon as its shard has
        encoded it (`encode_s`: each one's measured encoding; else the charge per message)."""
        engine = self.engine
        sizes = [wire_size(s.instruction) for s in sends]  # all-reduce: θ left out where the client holds it
        encodes = encode_s if encode_s is not None else [self.charges.encode_send] * len(sends)
        for send, size, left in zip(sends, sizes, self.shards.send(done, sizes, encodes)):
            c = engine.clients[send.client]
            c.bytes_down += size
            engine.account.bytes_down += size
            engine.push(c.down.arrival(left, size), "to_client", send.client, send.instruction, size, c.epoch)
