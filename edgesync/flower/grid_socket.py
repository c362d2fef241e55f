"""The coordinator's socket over a Flower Grid, so the live coordinator runs as a ServerApp unchanged.

`Coordinator` talks to clients through `send(peer, Message)` and `recv(timeout_s)` and counts bytes
in `bytes_in` / `bytes_out` (`edgesync.transport.sockets.CoordinatorSocket`). This class offers the
same API over a ServerApp's `Grid`: peers are SuperNodes (their node id, as bytes); what the
coordinator sends is pushed as Flower messages (`Grid.push_messages`), and replies pulled with
`Grid.pull_messages` come back as the client messages the coordinator expects:

    coordinator sends   Flower message type              coordinator receives
    (while joining)     query.hello to each new node  →  HELLO
    WELCOME             —  (its rank travels with SETUP)
    SETUP               query.setup                   →  READY
    CALIBRATE           query.calibrate               →  CALIBRATED
    TRAIN               train                         →  UPDATE
    EVALUATE            evaluate                      →  EVALUATED
    END                 —  STATS at once: the node's running totals as of its last reply
    SHUTDOWN, ERROR     —  (logged)
    ERROR {describe}    query.hello {describe}        →  HELLO {extensions}   (the run's outside code, described)

A node's calibration is answered here where the node has answered it already since its last SETUP (a
ClientApp process per message costs a Python and torch start-up): CALIBRATE without a base step gets the
CALIBRATED the node gave, or the one its READY carried (it measured this model and batch size in an earlier
algorithm: `setup` adds it as "calibrated"; stripped here, so the coordinator sees the READY it always saw);
CALIBRATE with a base step (the pace after the plan) gets that same CALIBRATED, and its base step travels
with the next message to the node (`records.PACE` in its header), which keeps it before anything else.

REPLY cannot travel: a ClientApp cannot be asked anything in the middle of a message (ESync runs as
its stand-in `esync_budget`, serve() sees to that). A Flower error reply (the ClientApp raised, the node went away) arrives as
ERROR, an undecodable reply as a ProtocolError, as from the ZeroMQ socket. Failures are failures:
once every node's last reply is an error, `recv` raises RunAborted naming each node's reason.

A node whose reply to query.hello says it runs a stock Flower ClientApp (no EdgeSync protocol) is
driven through Flower's standard train/evaluate messages by a `stock_node.StockNode`; if an algorithm
of the run needs EdgeSync's client half, `recv` raises RunAborted at once, naming it and the node.

A node is never sent a message while another is in flight to it: later ones wait here, per node, in
order, so no two ClientApp processes of a node write its `context.state` at once. END does not wait
for an instruction in flight (a SuperNode cannot stop it and the run's last one would only delay
the end): its update arrives later and is dropped, and its steps are not in that node's STATS.
Links are not emulated over Flower (`set_link` does nothing): shape real links with `tc`.

While an algorithm runs, every message carries its start as a wall-clock time (`start_clock`; records.py), from
which a ClientApp reads the algorithm's clock (availability, device traces); a reply is stamped with its creation
on that clock (its `clock`), from which the coordinator's queueing delay of it runs (metrics/coordinator_load.py).
A SuperNode cannot ask to come back, so a node offline by its availability comes back when its online time
comes: `returning` (set by the coordinator) names those nodes, and `recv` hands the coordinator the HELLO the
node answered when it joined (the node is known: a query.hello round trip, a ClientApp process, would only
delay its return); the coordinator then sets it up afresh.
"""
from __future__ import annotations

import logging
import time
from collections import defaultdict, deque
from typing import Any, Callable

from flwr.app import Message as FlowerMessage
from flwr.serverapp import Grid

from edgesync.constants import FLOWER_NODE_POLL_INTERVAL_S, FLOWER_PULL_INTERVAL_S
from edgesync.emulation.links import Link
from edgesync.flower import records
from edgesync.flower.stock_node import ModelLayout, StockNode, refusal, stock_reason
from edgesync.runtime.bookkeeping.membership import RunAborted
from edgesync.transport import protocol
from edgesync.transport.protocol import Message, MessageType as T, ProtocolError

log = logging.getLogger("edgesync.flower.grid")
# Replies are pulled every FLOWER_PULL_INTERVAL_S after a message goes out or a reply comes in, then, while none
# comes, at twice the last gap up to this: a reply takes a SuperNode's poll (3 s) and a ClientApp process's
# start at least, and each pull is a gRPC call that costs the SuperLink and the ServerApp CPU.
PULL_BACKOFF_MAX_S = 0.25

FLOWER_TYPES = {T.HELLO: "query.hello", T.SETUP: "query.setup", T.CALIBRATE: "query.calibrate",
                T.TRAIN: "train", T.EVALUATE: "evaluate"}


def peer_of(node_id: int) -> bytes:
    return str(node_id).encode()


class GridSocket:
    def __init__(self, grid: Grid, algorithm_names: list[str] = ()):
        """`algorithm_names`: the run's algorithms, to refuse a stock node at once if one needs EdgeSync's client."""
        self.grid = grid
        self.algorithm_names = list(algorithm_names)
        self.layout: ModelLayout | None = None  # the global model (set by the coordinator): stock nodes' weights
        self.stock: dict[bytes, StockNode] = {}
        self.hello_meta: dict[bytes, dict] = {}  # each node's HELLO (its rank, profile and host), said again on a return
        self.failing: dict[bytes, str] = {}  # nodes whose last reply is an error, and why
        self.address = f"the Flower SuperLink (run {grid.run.run_id})"
        self.bytes_in: dict[bytes, int] = defaultdict(int)
        self.bytes_out: dict[bytes, int] = defaultdict(int)
        self.inbox: deque[tuple[bytes, Message | ProtocolError]] = deque()
        self.in_flight: dict[str, bytes] = {}  # Flower message id → peer
        self.queued: dict[bytes, deque[Message]] = defaultdict(deque)
        self.ranks: dict[bytes, int] = {}
        self.stats: dict[bytes, dict[str, Any]] = {}
        self.unreachable: set[bytes] = set()  # (the CoordinatorSocket API) Flower keeps nodes' liveness
        self.joining = True  # greet nodes as they connect, until the first SETUP
        self.epoch: float | None = None  # wall-clock start of the running algorithm
        self.returning: Callable[[], list[bytes]] = list  # nodes whose online time has come (availability)
        self.greeted: set[int] = set()
        self.kinds: dict[str, str] = {}  # Flower message id → the EdgeSync type it carries (for its reply)
        self.setups_due: dict[bytes, int] = defaultdict(int)  # SETUPs sent to a node and not answered yet
        self.calibrated: dict[bytes, dict] = {}  # a node's CALIBRATED since its last SETUP: answered here again
        self.pace: dict[bytes, float] = {}  # a base step answered here, to travel with the node's next message
        self._next_pull = self._next_node_poll = 0.0
        self._pull_gap = FLOWER_PULL_INTERVAL_S

    # -- the CoordinatorSocket API ---------------------------------------------------------------
    def set_link(self, peer: bytes, link: Link, seed: int = 0) -> None:
        return None

    def start_clock(self, started: float | None) -> None:
        """The algorithm started at perf_counter `started` (None: none runs): its messages carry that start as
        a wall-clock time, the algorithm's clock for a ClientApp process."""
        self.epoch = None if started is None else time.time() - (time.perf_counter() - started)

    def send(self, peer: bytes, message: Message) -> int:
        kind = message.type
        if kind == T.WELCOME:
            self.ranks[peer] = int(message.meta["rank"])
            return 0
        if kind == T.END:  # answered at once: an instruction in flight cannot be stopped, nor waited for
            self.inbox.append((peer, protocol.stats(self.stats.pop(peer, {}))))
            return 0
        if kind == T.HEARTBEAT:  # a SuperNode's liveness is Flower's business; a ClientApp hears the clock anyway
            return 0
        if kind == T.ERROR and message.meta.get("describe") and peer not in self.stock:
            # the coordinator asks which outside code the node runs (membership.py): the node's HELLO again, with it
            return self.send(peer, Message(T.HELLO, {**protocol.hello().meta, "describe": message.meta["describe"]}))
        if kind in (T.SHUTDOWN, T.ERROR):
            if kind == T.ERROR:
                log.warning("to node %s: %s", peer.decode(), message.meta.get("reason"))
            return 0
        if kind not in FLOWER_TYPES:
            log.error("%s cannot travel over Flower (node %s)", kind, peer.decode())
            return 0
        if kind == T.SETUP:
            self.joining = False
            message = Message(kind, {**message.meta, "rank": self.ranks.get(peer)}, message.tensors)
            self.setups_due[peer] += 1
            self.calibrated.pop(peer, None)  # the new algorithm's model and batch size: the node answers first
            self.pace.pop(peer, None)  # the last algorithm's pace is moot: the new one is paced afresh
        if kind == T.CALIBRATE and peer in self.calibrated and not self._busy(peer) and peer not in self.stock:
            if message.meta.get("base_s") is not None:
                self.pace[peer] = float(message.meta["base_s"])
            self.inbox.append((peer, Message(T.CALIBRATED, dict(self.calibrated[peer]))))
            return 0
        if self._busy(peer):
            self.queued[peer].append(message)
            return 0
        return self._push(peer, message)

    def recv(self, timeout_s: float) -> tuple[bytes, Message | ProtocolError] | None:
        """The next message from a node, or None after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        for peer in self.returning():  # back online by their availability: it says HELLO again
            if peer in self.hello_meta:
                self.inbox.append((peer, Message(T.HELLO, dict(self.hello_meta[peer]))))
            else:
                self.send(peer, protocol.hello())
        while True:
            if self.inbox:
                return self.inbox.popleft()
            now = time.monotonic()
            if self.joining and now >= self._next_node_poll:
                self._greet_new_nodes()
                self._next_node_poll = now + FLOWER_NODE_POLL_INTERVAL_S
            if self.in_flight and now >= self._next_pull:
                got = self._pull()
                self._pull_gap = FLOWER_PULL_INTERVAL_S if got else min(2 * self._pull_gap, PULL_BACKOFF_MAX_S)
                self._next_pull = now + self._pull_gap
            if self.inbox:
                continue
            now = time.monotonic()
            if now >= deadline:
                return None
            wake = [deadline]
            if self.in_flight:
                wake.append(self._next_pull)
            if self.joining:
                wake.append(self._next_node_poll)
            time.sleep(max(0.0, min(wake) - now))

    def close(self) -> None:
        if self.in_flight:
            log.info("%d Flower messages still in flight at close; their replies are dropped", len(self.in_flight))

    # -- Flower side -------------------------------------------------------------------------------
    def _busy(self, peer: bytes) -> bool:
        return peer in self.in_flight.values() or bool(self.queued[peer])

    def _push(self, peer: bytes, message: Message) -> int:
        if message.type == T.SETUP:  # totals of the previous algorithm end here, not when SETUP was queued:
            self.stats.pop(peer, None)  # an update still in flight then would bring them back
        stock = self.stock.get(peer)
        if stock is not None and (here := stock.answer_here(message)) is not None:  # SETUP, CALIBRATE
            self.inbox.append((peer, here))
            return self._push(peer, self.queued[peer].popleft()) if self.queued[peer] else 0
        if stock is not None:
            kind, content = stock.request(message)
        else:
            kind, content = FLOWER_TYPES[message.type], records.to_records(message, epoch=self.epoch)
            if peer in self.pace:
                content[records.HEADER][records.PACE] = self.pace.pop(peer)
        size = records.payload_bytes(content)
        out = FlowerMessage(content, dst_node_id=int(peer), message_type=kind)
        ids = list(self.grid.push_messages([out]))
        if not ids or not ids[0]:
            self.inbox.append((peer, protocol.error(f"the SuperLink did not take {message.type}")))
            return 0
        self.in_flight[ids[0]] = peer
        self.kinds[ids[0]] = message.type
        self._pull_gap = FLOWER_PULL_INTERVAL_S  # its reply is looked for soon, then less often
        self._next_pull = min(self._next_pull, time.monotonic() + self._pull_gap)
        self.bytes_out[peer] += size
        return size

    def _greet_new_nodes(self) -> None:
        for node_id in sorted(set(self.grid.get_node_ids()) - self.greeted):
            self.greeted.add(node_id)
            self._push(peer_of(node_id), protocol.hello())

    def _pull(self) -> int:
        """Take the replies in; returns how many came."""
        replies = list(self.grid.pull_messages(list(self.in_flight)))
        for reply in replies:
            asked = reply.metadata.reply_to_message_id
            peer = self.in_flight.pop(asked, None)
            if peer is None:
                continue
            asked_kind = self.kinds.pop(asked, None)
            hello = asked_kind == T.HELLO
            if hello and (why := stock_reason(reply)) is not None:
                msg = self._stock_node(peer, why)
            else:
                msg = self._decode(peer, reply)
                if hello and isinstance(msg, Message) and msg.type == T.HELLO:
                    self.hello_meta[peer] = dict(msg.meta)
                self._note_calibration(peer, asked_kind, msg)
            if isinstance(msg, Message) and self.epoch is not None:  # when the node built it: its queueing delay
                msg.clock = reply.metadata.created_at - self.epoch  # runs from there (metrics/coordinator_load.py)
            self.inbox.append((peer, msg))
            self._note_failure(peer, msg)
            if self.queued[peer]:
                self._push(peer, self.queued[peer].popleft())
        return len(replies)

    def _note_calibration(self, peer: bytes, asked: str | None, msg: Message | ProtocolError) -> None:
        """Keep what a node's reply to the latest SETUP (its READY's "calibrated") or to a CALIBRATE after it says."""
        calibrated = msg.meta.pop("calibrated", None) if isinstance(msg, Message) and msg.type == T.READY else None
        if asked == T.SETUP:
            self.setups_due[peer] = max(0, self.setups_due[peer] - 1)
        if self.setups_due[peer] or peer in self.stock or not isinstance(msg, Message):
            return
        if asked == T.SETUP and isinstance(calibrated, dict):
            self.calibrated[peer] = calibrated
        elif asked == T.CALIBRATE and msg.type == T.CALIBRATED:
            self.calibrated[peer] = dict(msg.meta)

    def _stock_node(self, peer: bytes, why: str) -> Message:
        """The HELLO of a node that runs a stock Flower ClientApp; RunAborted if the run needs EdgeSync's client."""
        node_id = int(peer)
        if (refused := refusal(self.algorithm_names, node_id, why)) is not None:
            log.error("%s", refused)
            raise RunAborted(refused)
        if self.layout is None:
            raise RunAborted(f"Flower node {node_id} runs a stock Flower ClientApp, but no model layout was set")
        log.info("Flower node %d runs a stock Flower ClientApp (%s): it gets Flower's standard train and "
                 "evaluate messages", node_id, why)
        self.stock[peer] = StockNode(node_id, why, self.layout)
        return self.stock[peer].hello()

    def _note_failure(self, peer: bytes, msg: Message | ProtocolError) -> None:
        """Failures are failures: RunAborted once every node's last reply is an error."""
        if isinstance(msg, Message) and msg.type != T.ERROR:
            self.failing.pop(peer, None)
            return
        self.failing[peer] = str(msg) if isinstance(msg, ProtocolError) else str(msg.meta.get("reason"))
        nodes = {peer_of(n) for n in self.greeted} | set(self.ranks)
        if nodes and nodes <= set(self.failing):
            why = "; ".join(f"node {p.decode()}: {self.failing[p]}" for p in sorted(nodes))
            log.error("every node's reply is an error: %s", why)
            raise RunAborted(f"every node's reply is an error: {why}")
    def _decode(self, peer: bytes, reply: FlowerMessage) -> Message | ProtocolError:
        if peer in self.stock:
            if not reply.has_error():
                self.bytes_in[peer] += records.payload_bytes(reply.content)
            msg = self.stock[peer].reply(reply)
            if msg.type == T.UPDATE:
                self.stats[peer] = self.stock[peer].totals()
            return msg
        if reply.has_error():
            return protocol.error(f"Flower error {reply.error.code}: {reply.error.reason}")
        self.bytes_in[peer] += records.payload_bytes(reply.content)
        try:
            msg, stats = records.from_records(reply.content)
        except ProtocolError as exc:
            return exc
        if stats is not None and msg.type == T.UPDATE:
            self.stats[peer] = stats
        return msg
