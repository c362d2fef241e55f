"""A follower shard of a sharded coordinator: the server half of each algorithm on one slice of the model.

    edgesync shard --bind tcp://0.0.0.0:5601 [--keys DIR]

The lead (the coordinator, shard 0) connects to every follower and runs the run: membership, set-up,
accounting, evaluation and stop rules stay with it. Per algorithm it tells each follower (SHARD, `op`):
`setup` — the algorithm's config, the clients in it and this shard's slice of θ₀ (slices.py); the
follower builds the algorithm's server half on that slice and answers ready; `start` — send the server
half's first instructions; `lost` / `joined` — a client left or came back, in the order the lead saw
it; `snapshot` — answer with the slice of the global model and the bytes counted so far; `end` — the
same, then drop the server half; `save` / `load` — the server half's state, with the lead's checkpoint,
into `--state-dir` (a file per shard, tagged with the checkpoint it belongs to), and back from it on
`--resume`. `shutdown` ends the process.

Clients talk to every follower directly, in parallel with the lead: HELLO with their rank, then UPDATE
parts (their slice of each update); the follower checks each part (update_check.py) and, when the lead
says it applied that client's update (`apply`), hands it to its server half and sends the TRAIN parts
it returns. A part for a client that has not said HELLO yet
waits for it. Its own link (the scenario's `coordinator_link`) is paced as the lead's is.

Each server half decides from what it is told: the updates of each client in that client's order and
the lead's presence events. Per-parameter algorithms therefore send each client the same instructions
from every shard, each its slice (docs/simulator.md, "A sharded parameter server", says which need more).
"""
from __future__ import annotations

import logging
import os
import time
from collections import defaultdict, deque
from pathlib import Path

import torch

from edgesync import algorithms
from edgesync.algorithms.machinery.base import ModelState, Population, Send, ServerAlgorithm, Update
from edgesync.emulation.links import Link
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused
from edgesync.transport import protocol
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.contracts.shard import ORDERED, SHARD, ShardOp, shard_op
from edgesync.transport.protocol import FOLLOWER_TYPES, Message, MessageType as T, ProtocolError
from edgesync.transport.security import ServerKeys
from edgesync.transport.sockets import CoordinatorSocket

log = logging.getLogger("edgesync.shard")

POLL_S = 0.5
# The lead's commands that act on the server half: carried out in the lead's order. An update is applied
# when the lead says so (`apply`): every shard applies the clients' updates in the lead's order, so their
# server halves decide alike (a SHAT staleness, a round's members) although the parts arrive in any order.
PART_WAIT_S = 10.0
KEEP_STATES = 3  # saved states a follower keeps (the lead's checkpoint may be one behind its newest)
# A snapshot (an evaluation's slice) is answered at once, with the updates applied so far: the lead's
# loop waits for it, and should not wait for parts still on their way; `end` waits for them (ORDERED).


def shard_state(op: ShardOp, **meta) -> Message:
    return Message(T.SHARD_STATE, {"op": op, **meta})


class ShardServer:
    def __init__(self, bind: str, keys: ServerKeys | None = None, state_dir: Path = Path("shard-state")):
        self.state_dir = Path(state_dir)  # its part of the lead's checkpoints
        # CURVE: the coordinator's key pair, its allow-list, and the lead, which presents the same pair
        self.sock = CoordinatorSocket(bind, keys=keys, accepts=FOLLOWER_TYPES, admit=(keys.public,) if keys else ())
        self.address = self.sock.address
        self.lead: bytes | None = None
        self.ranks: dict[bytes, int] = {}        # routing id → client rank (its HELLO)
        self.peers: dict[int, bytes] = {}        # client rank → routing id
        self.waiting: dict[int, list[Message]] = defaultdict(list)  # parts for clients not yet heard
        self.parts: dict[int, dict[int, Message]] = defaultdict(dict)  # rank → part number → an update part
        self.gone: set[int] = set()  # clients the lead said it lost (and not back since)
        self.blocked_since: float | None = None  # when the first of the lead's orders began to wait
        self.orders: deque[tuple[ShardOp, dict]] = deque()  # the lead's commands on the server half, in its order
        self.server: ServerAlgorithm | None = None
        self.check: UpdateCheck | None = None
        self.index = 0
        self.started = 0.0
        self.refused = 0
        self.bytes0 = (0, 0)  # the socket's counters when the algorithm started

    def serve(self) -> None:
        """Answer the lead and the clients until the lead says shutdown."""
        log.info("shard listening at %s", self.address)
        try:
            while True:
                item = self.sock.recv(POLL_S)
                if item is None:
                    self._follow()  # an order may have waited long enough
                    continue
                peer, msg = item
                if isinstance(msg, ProtocolError):
                    self.sock.send(peer, protocol.error(f"bad message: {msg}"))
                elif msg.type == T.SHARD:
                    if not self._command(peer, msg):
                        return
                else:
                    self._client(peer, msg)
        finally:
            self.sock.close()

    # -- the lead --------------------------------------------------------------------------------
    def _command(self, peer: bytes, msg: Message) -> bool:
        try:
            op, meta = shard_op(msg.meta), msg.meta
        except ValueError as exc:
            self.sock.send(peer, protocol.error(str(exc)))
            return True
        if op == ShardOp.HELLO and (refused := SHARD.refusal(meta, here="server")) is not None:
            log.error("refused a lead: %s", refused)  # it stops; this shard waits for one that speaks its contract
            self.sock.send(peer, protocol.error(refused, fatal=True))
            return True
        if self.lead is None or op == ShardOp.HELLO:
            self.lead = peer
            self.sock.beside_own_link(peer)  # lead and followers: not over the emulated server link
        if peer != self.lead:
            self.sock.send(peer, protocol.error("only the lead coordinator commands a shard"))
            return True
        if op == ShardOp.SNAPSHOT:
            self._carry_out(op, meta)
        elif op in ORDERED:  # after what the lead ordered before it, and once the update it names has come
            if op in (ShardOp.LOST, ShardOp.JOINED):
                (self.gone.add if op == ShardOp.LOST else self.gone.discard)(int(meta["rank"]))
            self.orders.append((op, meta))
            self._follow()
        elif op == ShardOp.HELLO:
            self.index = int(meta["index"])
            link = meta.get("link")
            if link is not None:
                self.sock.set_own_link(Link(**link["in"]), Link(**link["out"]), int(meta.get("seed", 0)) + self.index)
            self.sock.send(peer, shard_state(ShardOp.HELLO, index=self.index, **SHARD.offer()))
        elif op == ShardOp.SETUP:
            self._setup(meta, msg.tensors)
            self.sock.send(peer, shard_state(ShardOp.SETUP))
        elif op == ShardOp.SHUTDOWN:
            log.info("the lead says the run is over")
            return False
        return True

    def _follow(self) -> None:
        """Carry out the lead's commands in its order; an `apply` waits for its client's update part (one
        from a client the lead has lost since, for PART_WAIT_S at most: its process may have died first)."""
        while self.orders:
            op, meta = self.orders[0]
            if op == ShardOp.APPLY and int(meta["part"]) not in self.parts.get(int(meta["rank"]), {}):
                now = time.monotonic()
                self.blocked_since = self.blocked_since or now
                if not (int(meta["rank"]) in self.gone and now - self.blocked_since > PART_WAIT_S):
                    return
                log.warning("shard %d: client %s's update part %s never came; the lead lost it: skipped",
                            self.index, meta["rank"], meta["part"])
                self.orders.popleft()
                self.blocked_since = None
                continue
            self.blocked_since = None
            self.orders.popleft()
            self._carry_out(op, meta)

    def _carry_out(self, op: ShardOp, meta: dict) -> None:
        server, lead = self.server, self.lead
        if op == ShardOp.APPLY:
            rank, number = int(meta["rank"]), int(meta["part"])
            held = self.parts[rank]
            part = held.pop(number)
            for stale in [n for n in held if n < number]:  # parts of updates the lead refused: never applied
                del held[stale]
            self._dispatch(server.on_update(rank, Update(tensors=part.tensors, meta=part.meta)))
            server.drain_update_log()  # the lead records the run's rows
        elif op == ShardOp.START:
            self.started = time.perf_counter()
            self.sock.start_clock(self.started)  # its link's trace runs from here, as the lead's
            self._dispatch(server.start())
        elif op in (ShardOp.LOST, ShardOp.JOINED):
            rank = int(meta["rank"])
            self._dispatch(server.on_client_lost(rank) if op == ShardOp.LOST else server.on_client_joined(rank))
        elif op in (ShardOp.SNAPSHOT, ShardOp.END):
            params = server.global_params() if server is not None else None
            self.sock.send(lead, Message(T.SHARD_STATE, {"op": op, "id": meta.get("id"), **self._counters()},
                                         {} if params is None else {"params": params}))
            if op == ShardOp.END:
                self.server = None
                self.parts.clear()
                self.sock.start_clock(None)
        elif op == ShardOp.SAVE:  # the lead's checkpoint: this shard's part goes into a file of its own
            self._save(str(meta["checkpoint"]))
            self.sock.send(lead, shard_state(ShardOp.SAVE, id=meta.get("id")))
        elif op == ShardOp.LOAD:  # a resume: the part saved with the lead's checkpoint
            problem = self._load(str(meta["checkpoint"]))
            self.sock.send(lead, protocol.error(problem) if problem else shard_state(ShardOp.LOAD))

    def _setup(self, meta: dict, tensors: dict) -> None:
        spec = algorithms.get(meta["algorithm"]["name"])
        config = spec.config.model_validate(meta["algorithm"])
        state = ModelState(tensors["params"].clone(), tensors["params"][:0].clone(), tuple(meta["sizes"]))
        server = spec.server(config, state, list(meta["clients"]))
        server.population = Population(int(meta["seed"]), {int(k): v for k, v in meta["data_sizes"].items()})
        server.now = lambda: time.perf_counter() - self.started
        self.server, self.check = server, UpdateCheck.for_server(server, state)
        self.bytes0 = self._client_bytes()
        self.waiting.clear()
        log.info("shard %d: %s on parameters of %d", self.index, config.key, state.params.numel())

    def _client_bytes(self) -> tuple[int, int]:
        """Bytes from and to the clients (the lead's commands and answers are the server's own business)."""
        return (sum(v for k, v in self.sock.bytes_in.items() if k != self.lead),
                sum(v for k, v in self.sock.bytes_out.items() if k != self.lead))

    def _state_files(self) -> list[Path]:
        """This shard's saved states, oldest first."""
        return sorted(self.state_dir.glob(f"shard-{self.index}-*.pt"))

    def _save(self, checkpoint: str) -> None:
        """The server half's state, tagged with the lead's checkpoint, written whole or not at all. The last
        KEEP_STATES stay: the lead writes its checkpoint after every shard has saved, so a crash between the
        two leaves the lead's checkpoint one behind the newest state here."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        files = self._state_files()
        number = int(files[-1].stem.rsplit("-", 1)[1]) + 1 if files else 0
        path = self.state_dir / f"shard-{self.index}-{number:06d}.pt"
        tmp = path.with_suffix(".tmp")
        torch.save({"checkpoint": checkpoint, "state": self.server.state_dict()}, tmp)
        os.replace(tmp, path)
        for old in self._state_files()[:-KEEP_STATES]:
            old.unlink(missing_ok=True)

    def _load(self, checkpoint: str) -> str | None:
        """Restore the state saved with the lead's checkpoint `checkpoint`; else why not."""
        files = self._state_files()
        for path in reversed(files):
            saved = torch.load(path, weights_only=False, map_location="cpu")  # its own file, written by _save
            if saved["checkpoint"] == checkpoint:
                self.server.load_state_dict(saved["state"])
                return None
        if not files:
            return f"shard {self.index} has no saved state in {self.state_dir}: start it with the --state-dir it had"
        return (f"shard {self.index} has no state saved with the lead's checkpoint {checkpoint} in {self.state_dir} "
                "(only newer or older ones)")

    def _counters(self) -> dict:
        up, down = (now - then for now, then in zip(self._client_bytes(), self.bytes0))
        return {"bytes_up": up, "bytes_down": down, "refused": self.refused,
                "updates": self.server.updates if self.server is not None else 0}

    # -- the clients -----------------------------------------------------------------------------
    def _client(self, peer: bytes, msg: Message) -> None:
        if msg.type == T.HELLO:
            if (refused := COORDINATOR.refusal(msg.meta, here="server")) is not None:
                log.warning("refused a client: %s", refused)
                return self.sock.send(peer, protocol.error(refused, fatal=True))
            rank = int(msg.meta["rank"])
            old = self.peers.get(rank)
            if old is not None and old != peer:
                self.ranks.pop(old, None)
            self.ranks[peer], self.peers[rank] = rank, peer
            for part in self.waiting.pop(rank, []):
                self.sock.send(peer, part)
            return
        rank = self.ranks.get(peer)
        if rank is None or msg.type != T.UPDATE:
            return  # heartbeats; anything else from a stranger is the lead's to answer
        if self.server is None:
            return  # between algorithms: the lead has ended this one
        try:
            self.check.check(msg.tensors, raw=msg.raw)
        except UpdateRefused as exc:
            # The lead may still apply the update (its own part was fine): this shard then applies nothing
            # to its slice but counts the update, so that its server half decides as the lead's does.
            self.refused += 1
            self.sock.send(peer, protocol.error(f"update part refused: {exc}"))
            field = next((n for n in self.check.fields if n in msg.tensors), self.check.fields[0])
            neutral = self.server.global_params().clone() if field == "params" else torch.zeros(self.check.params)
            msg = Message(T.UPDATE, msg.meta, {field: neutral})
        self.parts[rank][int(msg.meta.get("part", -1))] = msg
        self._follow()

    def _dispatch(self, sends: list[Send]) -> None:
        for send in sends:
            part = protocol.train(send.instruction.meta, send.instruction.tensors)
            peer = self.peers.get(send.client)
            if peer is None:
                self.waiting[send.client].append(part)
            else:
                self.sock.send(peer, part)


def serve_shard(bind: str, keys: ServerKeys | None = None, ready=None, state_dir: Path = Path("shard-state")) -> None:
    """Run a follower shard at `bind` until its lead says shutdown; `ready(address)` once it listens."""
    server = ShardServer(bind, keys, state_dir)
    if ready is not None:
        ready(server.address)
    server.serve()
