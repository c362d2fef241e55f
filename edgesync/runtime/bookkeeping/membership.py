"""Who is in the run: admission (HELLO → WELCOME), the socket each rank speaks from, and liveness.

`Membership` owns the coordinator's socket. It admits clients under their rank (a client's new socket
of the same process takes its rank over), refuses what it cannot use with an ERROR reply (its warning
rate-limited per peer: log_limit.py), sends heartbeats to quiet clients and declares silent or exited
ones lost. What a loss or a return means for the algorithm in progress is the coordinator's business:
it is told through `on_lost`.

A scenario with outside code (config/outside_code.py) is run only by clients that run the same: a HELLO that
does not describe it is answered with an ERROR naming it (`describe`, not fatal: the client says HELLO again
at once, describing it); a client whose code differs (package, version, code hash), or that does not describe
it when asked (an EdgeSync from before), is refused with one line naming it, its host and both versions, and
its rank counts as lost from the start, as a client that died: the run goes on without it until a client
with the same code says HELLO for that rank.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from edgesync.constants import HEARTBEAT_INTERVAL_S, JOIN_TIMEOUT_S, OFFLINE_PROBE_S, POLL_INTERVAL_S
from edgesync.emulation.links import Link
from edgesync.emulation.profiles import Profile, parse_profile
from edgesync.runtime.bookkeeping.liveness import Liveness
from edgesync.runtime.bookkeeping.log_limit import RateLimitedLog
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.config import Scenario
from edgesync.config.outside_code import differences, outside_names, refusal_line, resolve_outside
from edgesync.transport import protocol
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.fields import check_client_fields
from edgesync.transport.protocol import Message, MessageType as T, ProtocolError

log = logging.getLogger("edgesync.coordinator")

TEND_EVERY_S = 0.2  # how often liveness is looked after
# Every loop of the coordinator looks after liveness a few times a second; a longer gap means it was not
# listening (descheduled, or busy between phases): its clients' silence then counts from its return.
NOT_LISTENING_AFTER_S = 2 * HEARTBEAT_INTERVAL_S
# Work a client answers only when done, saying nothing meanwhile (liveness.BUSY_ALLOWANCE_S), and the answers.
ANSWERED_WHEN_DONE = {T.SETUP: T.READY, T.CALIBRATE: T.CALIBRATED, T.EVALUATE: T.EVALUATED}
# Clients asked once to describe their outside code, remembered so that one which does not (an EdgeSync from
# before) is refused at its next HELLO rather than asked forever; bounded, as sockets may be ever new.
ASKED_TO_DESCRIBE_MAX = 1024


class RunAborted(RuntimeError):
    """The run cannot go on (a client never joined, a local client process died…)."""


@dataclass
class Peer:
    rank: int
    identity: bytes
    info: dict[str, Any]
    profile: Profile
    instance: str | None = None  # the client process's token (HELLO): a new socket of the same process

    def same_process(self, hello: Message) -> bool:
        return self.instance is not None and hello.meta.get("instance") == self.instance


def transport_link(link: Link, kernel_shapes: frozenset[str]) -> Link:
    """What the transport must still emulate of `link` when the kernel (tc) applies `kernel_shapes`."""
    return Link(rate_mbps=None if "rate" in kernel_shapes else link.rate_mbps,
                latency_s=0.0 if "delay" in kernel_shapes else link.latency_s,
                jitter_s=0.0 if "jitter" in kernel_shapes else link.jitter_s,
                loss=0.0 if "loss" in kernel_shapes else link.loss)


@dataclass
class Membership:
    scenario: Scenario
    sock: Any  # CoordinatorSocket, or the Flower runtime's GridSocket (same API)
    heartbeats: bool = True  # False where the transport keeps liveness itself (Flower)
    kernel_shapes: frozenset[str] = frozenset()  # link properties tc applies (netns backend)
    health_check: Callable[[], list[tuple[int, str]] | None] = lambda: None  # [(rank, why)] of exited local clients
    on_lost: Callable[[int], None] = lambda rank: None  # the algorithm in progress closes rounds without it
    quorum: Callable[[], int] = lambda: 1  # clients the algorithm in progress needs alive
    peers: dict[int, Peer] = field(default_factory=dict)
    ranks: dict[bytes, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.liveness = Liveness(self.scenario.faults.client_timeout_s)
        self.warnings = RateLimitedLog(log)
        self._next_tend = 0.0
        self._last_tend_call = time.monotonic()
        self._short_since: float | None = None  # when the live clients fell below the quorum
        self.outside_kinds = outside_names(self.scenario)  # {name: kind}: the outside code every client must run
        self.outside = {name: resolve_outside(kind, name) for name, kind in self.outside_kinds.items()}  # as here
        self._asked_to_describe: dict[Any, None] = {}  # instance token (or socket) → None, oldest first
        if self.scenario.coordinator_link is not None and hasattr(self.sock, "set_own_link"):
            self.sock.set_own_link(*self.scenario.coordinator_links(), seed=self.scenario.seed)  # every client's

    @property
    def size(self) -> int:
        return len(self.scenario.clients)

    def alive(self, ranks=None) -> list[int]:
        return self.liveness.alive(self.peers if ranks is None else ranks)

    def send(self, rank: int, message: Message) -> None:
        if message.type in ANSWERED_WHEN_DONE:
            self.liveness.asked(rank)
        self.sock.send(self.peers[rank].identity, message)

    def recv(self, timeout_s: float) -> tuple[bytes, Message | ProtocolError] | None:
        """The socket's next message, its metadata fields checked: a bad one comes as a ProtocolError. A HELLO
        of another contract or version (contracts/coordinator.py) is refused here, fatally, and not returned."""
        item = self.sock.recv(timeout_s)
        if item is not None and item[0] in self.ranks:
            rank = self.ranks[item[0]]
            self.liveness.seen(rank)
            if not isinstance(item[1], ProtocolError) and item[1].type in (*ANSWERED_WHEN_DONE.values(), T.ERROR):
                self.liveness.answered(rank)
        if item is None or isinstance(item[1], ProtocolError):
            return item
        try:
            check_client_fields(item[1])
        except ProtocolError as exc:
            return item[0], exc
        if item[1].type == T.HELLO and (refused := COORDINATOR.refusal(item[1].meta, here="server")) is not None:
            self.reject(item[0], refused, fatal=True)  # another EdgeSync: the client stops, saying this line
            return None
        if item[1].type == T.HELLO and not self.runs_our_code(*item):
            return None
        return item

    # -- outside code ------------------------------------------------------------------------------
    def runs_our_code(self, identity: bytes, hello: Message) -> bool:
        """Whether this HELLO's client runs the scenario's outside code as this coordinator does; if not, it has
        been answered: asked to describe it (the first time), or refused."""
        if not self.outside or identity in getattr(self.sock, "stock", ()):  # a stock Flower ClientApp runs
            return True                                                      # its own code, none of EdgeSync's
        theirs = hello.meta.get("extensions") or {}
        missing = {name: kind for name, kind in self.outside_kinds.items() if name not in theirs}
        key = hello.meta.get("instance") or identity
        if missing and key not in self._asked_to_describe:
            self._ask_to_describe(key, identity, missing)
            return False
        self._asked_to_describe.pop(key, None)
        rank, info = self._rank_asked(hello), hello.meta.get("info") or {}
        host = str(info["host"])[:100] if info.get("host") else None
        if missing:
            line = refusal_line(rank, host, [f"its EdgeSync does not describe the outside code this run uses "
                                             f"({', '.join(missing)}): it is older than the coordinator's"],
                                fix="the coordinator's EdgeSync version")
        elif found := differences(self.outside, theirs):
            line = refusal_line(rank, host, found)
        else:
            return True
        self._refuse_outside_code(identity, hello, rank, line)
        return False

    def _ask_to_describe(self, key: Any, identity: bytes, missing: dict[str, str]) -> None:
        self._asked_to_describe[key] = None
        if len(self._asked_to_describe) > ASKED_TO_DESCRIBE_MAX:
            del self._asked_to_describe[next(iter(self._asked_to_describe))]
        self.reject(identity, f"this run uses outside code ({', '.join(missing)}): say HELLO again describing it",
                    describe=missing, expected=True)

    def _rank_asked(self, hello: Message) -> int | None:
        """The rank a HELLO asks for (checked by fields.py), or the one it would get; None for neither."""
        asked = hello.meta.get("rank")
        if asked is None:
            return next((r for r in range(self.size) if r not in self.peers), None)
        return asked if asked < self.size else None

    def _refuse_outside_code(self, identity: bytes, hello: Message, rank: int | None, line: str) -> None:
        """Refuse a client whose outside code differs, fatally, with `line`. A rank no live client holds counts as
        lost from the start, `line` its reason (clients.jsonl): nobody waits for it, algorithms run without it."""
        log.warning("%s", line)
        if rank is not None and not (rank in self.peers and rank not in self.liveness.lost):
            # no live client holds the rank (else only this HELLO is refused): lost, before the answer goes out
            if rank not in self.peers:
                info = hello.meta.get("info") or {}
                self.peers[rank] = Peer(rank, identity, info, self.scenario.clients[rank].profile,
                                        hello.meta.get("instance"))  # not in `ranks`: its socket is not heard
            if not self.liveness.lose(rank, line):
                self.liveness.lost[rank] = line  # lost before: its row says why the new process was not taken
        self.sock.send(identity, protocol.error(line, fatal=True))

    # -- joining -----------------------------------------------------------------------------------
    def join_all(self, progress: Progress) -> None:
        """Wait until every client of the scenario has said HELLO (RunAborted after JOIN_TIMEOUT_S)."""
        want = self.size
        progress.status(f"waiting for {want} clients on {self.sock.address}")
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while len(self.peers) < want:
            if time.monotonic() > deadline:
                raise RunAborted(f"only {len(self.peers)} of {want} clients joined within {JOIN_TIMEOUT_S:.0f} s")
            self.tend()
            item = self.recv(POLL_INTERVAL_S * 5)
            if item is None:
                continue
            identity, msg = item
            if isinstance(msg, ProtocolError):
                self.reject(identity, str(msg))
            elif msg.type == T.HELLO:
                self.admit(identity, msg)
                if self.ranks.get(identity) in self.liveness.lost:  # the rank of a client refused for its code
                    self.liveness.back(self.ranks[identity])
            elif identity not in self.ranks:
                self.say_hello_first(identity, msg, "")
            elif msg.type == T.ERROR and msg.meta.get("fatal"):  # e.g. it cannot use its device: say so now
                rank = self.ranks[identity]
                raise RunAborted(f"client {rank} (on {self.peers[rank].info.get('host') or 'an unnamed host'}) "
                                 f"cannot take part: {msg.meta.get('reason')}")
            elif msg.type != T.HEARTBEAT:
                self.reject(identity, f"{msg.type} while clients join")
        progress.status(f"{want} clients joined")

    def admit(self, identity: bytes, msg: Message) -> None:
        want = self.size
        asked = msg.meta.get("rank")
        if identity in self.ranks:
            return self.reject(identity, "already joined")
        holder = self.peers.get(asked) if isinstance(asked, int) else None
        if holder is not None and holder.same_process(msg):
            # It gave up waiting for WELCOME on its earlier socket, which has since been answered: the
            # rank moves to the new socket rather than being refused as taken.
            log.info("client %d said HELLO again on a new socket: it replaces its earlier one", asked)
            self.forget(asked)
        elif holder is not None and (why := self.gone(asked)):
            log.info("client %d restarted (its earlier process is gone: %s): the new one takes its rank", asked, why)
            self.forget(asked)
        free = [r for r in range(want) if r not in self.peers]
        if asked is not None and (not isinstance(asked, int) or asked not in free):
            return self.reject(identity, f"rank {asked!r} is taken or outside 0..{want - 1}", fatal=True)
        rank = asked if asked is not None else free[0]
        profile = self.scenario.clients[rank].profile
        if msg.meta.get("profile"):
            try:
                profile = parse_profile(msg.meta["profile"])
            except ValueError as exc:
                return self.reject(identity, f"profile: {exc}", fatal=True)
        info = msg.meta.get("info") if isinstance(msg.meta.get("info"), dict) else {}
        self.peers[rank] = Peer(rank, identity, info, profile, msg.meta.get("instance"))
        self.ranks[identity] = rank
        up, down = (transport_link(link, self.kernel_shapes) for link in self.scenario.client_links(rank))
        up_seed, down_seed = self.scenario.link_seeds(rank)  # as the simulator's: the same jitter and losses
        self.sock.send(identity, protocol.welcome(rank, want, self.scenario.name, asdict(up), up_seed,
                                                  self.scenario.faults.client_timeout_s))
        if identity in self.sock.unreachable:
            # Its HELLO waited here (a coordinator still starting, e.g. resuming) longer than the client waited
            # for WELCOME: it has closed that socket and says HELLO again on a new one. Admitting the closed
            # one would hold its rank for a dead connection, refuse the live one, and lose the client.
            self.forget(rank)
            log.info("client %d's HELLO came on a connection it has since closed: waiting for its next", rank)
            return
        self.liveness.seen(rank)
        self.sock.set_link(identity, down, down_seed)
        log.info("client %d joined from %s (%s, profile %s, link up %s, down %s)", rank, info.get("host"),
                 info.get("device"), profile.label, up.describe(), down.describe())

    def reject(self, identity: bytes, reason: str, fatal: bool = False, hello: bool = False,
               expected: bool = False, describe: dict[str, str] | None = None) -> None:
        """Answer a message that is not used with ERROR; the warning is rate-limited per peer. An `expected`
        refusal (a device back before its online time, a request to describe outside code) is logged at DEBUG:
        each try comes on a new socket."""
        if expected:
            log.debug("message from %r rejected: %s", identity, reason)
        else:
            self.warnings.warning(identity, f"message from {identity!r} rejected: {reason}")
        self.sock.send(identity, protocol.error(reason, fatal=fatal, hello=hello, describe=describe))

    def say_hello_first(self, identity: bytes, msg: Message, when: str) -> None:
        """Refuse a message from a socket that never said HELLO to this coordinator. Usually it is a
        client's old socket that ZeroMQ reconnected by itself to a restarted coordinator on the same
        address: `hello` tells that client to reconnect and ask for its rank (a stranger that does so
        is then judged on its HELLO)."""
        self.reject(identity, f"{msg.type} from a connection that has not said HELLO{when}: say HELLO", hello=True)

    def gone(self, rank: int) -> str | None:
        """Why `rank`'s peer is provably gone — a send found its connection closed, or it missed two
        heartbeats — else None. A client restarted with its rank takes the rank over at once then."""
        if rank in self.liveness.lost:  # e.g. refused for its outside code
            return f"lost: {self.liveness.lost[rank]}"
        identity = self.peers[rank].identity
        if identity in self.sock.unreachable:
            return "its connection is closed"
        silent = time.monotonic() - self.liveness.last_seen.get(rank, time.monotonic())
        if self.heartbeats and silent > 2 * HEARTBEAT_INTERVAL_S:
            return f"silent for {silent:.1f} s"
        return None

    def forget(self, rank: int) -> None:
        """Drop `rank`'s socket: a new one (of the same or a new process) is about to take the rank."""
        self.ranks.pop(self.peers.pop(rank).identity, None)

    # -- liveness ----------------------------------------------------------------------------------
    def tend(self) -> None:
        """A few times a second: heartbeats to quiet clients, silent or exited clients lost, quorum."""
        now = time.monotonic()
        if now - self._last_tend_call > NOT_LISTENING_AFTER_S:
            self.liveness.not_listening_until_now()
        self._last_tend_call = now
        if now < self._next_tend:
            return
        self._next_tend = now + TEND_EVERY_S
        self.warnings.flush()
        for rank, why in self.health_check() or []:  # local client processes that exited
            self.lose(rank, why)
        if not self.heartbeats:
            return
        last_send = self.sock.last_send
        for rank in self.alive():
            identity = self.peers[rank].identity
            if now - last_send.get(identity, 0.0) >= HEARTBEAT_INTERVAL_S:
                self.sock.send(identity, protocol.heartbeat())
        for rank in self.alive():
            if self.peers[rank].identity in self.sock.unreachable:  # it closed its connection: no need to wait
                self.lose(rank, "its connection is closed (the process ended or its machine went away)")
        for rank, silent in self.liveness.silent(self.peers):
            self.lose(rank, f"silent for {silent:.1f} s (faults.client_timeout_s = {self.liveness.timeout_s:g})")
        self._check_quorum(now)

    def _check_quorum(self, now: float) -> None:
        """Abort once too few clients have been alive for longer than the timeout."""
        need, alive = self.quorum(), len(self.alive())
        if alive >= need or not self.peers:
            self._short_since = None
            return
        if self._short_since is None:
            self._short_since = now
            log.warning("only %d clients alive, %d needed: waiting up to %.0f s for some to come back", alive, need,
                        self.liveness.timeout_s)
        elif now - self._short_since > self.liveness.timeout_s:
            lost = ", ".join(f"client {r}: {why}" for r, why in sorted(self.liveness.lost.items()))
            raise RunAborted(f"only {alive} clients alive, {need} needed (faults.quorum) for "
                             f"{self.liveness.timeout_s:.0f} s; lost: {lost}")

    def lose(self, rank: int, why: str) -> None:
        if rank not in self.peers or not self.liveness.lose(rank, why):
            return
        log.warning("client %d lost: %s", rank, why)
        self.on_lost(rank)

    def shutdown(self, reason: str = "the run is over", aborted: bool = False) -> None:
        for peer in self.peers.values():
            if peer.identity in self.ranks and peer.identity not in self.sock.unreachable:  # not one refused at HELLO
                self.sock.send(peer.identity, protocol.shutdown(reason, aborted))

    def dismiss_offline(self, ranks: set[int], reason: str = "the run is over") -> None:
        """Answer the devices offline at the run's end (availability) with SHUTDOWN when they next ask to
        return (runtime/live/offline_device.py: every OFFLINE_PROBE_S), so that they end now rather than once
        they find nobody answering."""
        deadline, waiting = time.monotonic() + OFFLINE_PROBE_S + 0.5, set(ranks)
        while waiting and (left := deadline - time.monotonic()) > 0:
            item = self.recv(left)
            if item is not None and not isinstance(item[1], ProtocolError) and item[1].type == T.HELLO:
                waiting.discard(item[1].meta.get("rank"))
                self.sock.send(item[0], protocol.shutdown(reason))
