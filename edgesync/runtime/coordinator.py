"""The live coordinator: a ZeroMQ ROUTER loop that runs each algorithm of a scenario in turn.

Per algorithm: SETUP every client (its data split, the algorithm's config), CALIBRATE throttled
clients one at a time (their undisturbed step time, measured with nobody else computing), then
hand every arriving UPDATE to the algorithm's server half and send what it returns. The loop
never blocks longer than `POLL_INTERVAL_S`; evaluation runs on a worker thread. Bad messages get
an ERROR reply and are logged; the loop goes on serving the others.

Nothing a client sends is used unchecked: the frames (protocol.py), the metadata fields the
coordinator reads (fields.py), and each UPDATE's tensors against the model and the algorithm,
finite included (update_check.py). A refused update never reaches the server half; it is counted
in the client's `refused` (clients.jsonl).
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from edgesync import algorithms
from edgesync.algorithms.base import AlgorithmConfig, Send, ServerAlgorithm, Update
from edgesync.constants import (HEARTBEAT_INTERVAL_S, JOIN_TIMEOUT_S, NONFINITE_UPDATES_DIVERGED, POLL_INTERVAL_S,
                                READY_TIMEOUT_S, STATS_TIMEOUT_S)
from edgesync.data.datasets import to_tensor
from edgesync.emulation.links import Link
from edgesync.emulation.profiles import Profile, parse_profile
from edgesync.emulation.throttle import is_throttled
from edgesync.metrics.recorder import RunRecorder
from edgesync.runtime.checkpoint import Checkpointer, last_logged_s
from edgesync.runtime.evaluator import Evaluator, Snapshot
from edgesync.runtime.liveness import Liveness
from edgesync.runtime.progress import Progress
from edgesync.runtime.update_check import UpdateCheck, UpdateRefused
from edgesync.runtime.workload import client_splits, initial_model, scenario_dataset
from edgesync.scenario import Scenario
from edgesync.transport.fields import check_client_fields
from edgesync.transport.protocol import Message, ProtocolError
from edgesync.transport.security import ServerKeys
from edgesync.transport.sockets import CoordinatorSocket

log = logging.getLogger("edgesync.coordinator")

TEND_EVERY_S = 0.2  # how often the loops look after liveness


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


@dataclass
class AlgorithmRun:
    """Counters of the algorithm being run."""

    config: AlgorithmConfig
    started: float = 0.0
    samples: int = 0
    bytes_in0: dict[bytes, int] = field(default_factory=dict)
    bytes_out0: dict[bytes, int] = field(default_factory=dict)
    reached_target: bool = False
    diverged: bool = False
    best_acc: float = 0.0
    traffic0: tuple[int, int] = (0, 0)  # bytes up/down before a resume
    nonfinite: int = 0  # updates refused for NaN/Inf values
    refused: dict[int, int] = field(default_factory=dict)  # per client: messages refused while training


def transport_link(link: Link, kernel_shapes: frozenset[str]) -> Link:
    """What the transport must still emulate of `link` when the kernel (tc) applies `kernel_shapes`."""
    return Link(rate_mbps=None if "rate" in kernel_shapes else link.rate_mbps,
                latency_s=0.0 if "delay" in kernel_shapes else link.latency_s,
                jitter_s=0.0 if "jitter" in kernel_shapes else link.jitter_s,
                loss=0.0 if "loss" in kernel_shapes else link.loss)


class Coordinator:
    heartbeats = True  # liveness by heartbeats and timeouts (the Flower runtime leaves it to Flower)

    def __init__(self, scenario: Scenario, recorder: RunRecorder, bind: str = "tcp://127.0.0.1:*",
                 progress: Progress | None = None,
                 health_check: Callable[[], list[tuple[int, str]] | None] | None = None,
                 sock: CoordinatorSocket | None = None, keys: ServerKeys | None = None):
        """`sock` replaces the ZeroMQ socket bound at `bind` with another transport of the same API
        (the Flower runtime's `edgesync.flower.grid_socket.GridSocket`); `keys` make the socket a
        CURVE server admitting only the allow-list's clients (transport/security.py)."""
        self.scenario = scenario
        self.recorder = recorder
        self.sock = sock if sock is not None else CoordinatorSocket(bind, keys=keys)
        self.address = self.sock.address
        self.progress = progress or Progress(enabled=False)
        self.health_check = health_check or (lambda: None)  # [(rank, why)] of local clients that exited
        self.peers: dict[int, Peer] = {}
        self.ranks: dict[bytes, int] = {}
        self.current: AlgorithmRun | None = None
        self.server: ServerAlgorithm | None = None  # the running algorithm's server half
        self.update_check: UpdateCheck | None = None
        self.kernel_shapes: frozenset[str] = frozenset()  # link properties tc applies (netns backend)
        self.checkpoints: Checkpointer | None = None  # set by the launcher: checkpoint.pt, --resume
        self.liveness = Liveness(scenario.faults.client_timeout_s)
        self.joining: dict[int, str] = {}  # rank → what a client coming back mid-algorithm owes: READY, CALIBRATED
        self.set_up_for: dict[int, str] = {}  # rank → the algorithm its client half was last set up for
        self._next_tend = 0.0
        self._short_since: float | None = None  # when the live clients fell below what the algorithm needs

    # -- the whole run ---------------------------------------------------------------------------
    def prepare(self) -> None:
        """Load the data, split it, build θ₀ and the evaluator: everything that can fail early."""
        if hasattr(self, "evaluator"):
            return
        sc = self.scenario
        data = scenario_dataset(sc.dataset)
        self.splits = client_splits(sc, data.train_y)
        self.initial = initial_model(sc, data)
        n_test = min(sc.eval.test_size or len(data.test_y), len(data.test_y))
        self.evaluator = Evaluator(sc.model.name, data.num_classes, data.input_shape[0],
                                   to_tensor(data.test_x[:n_test], data.mean, data.std),
                                   torch.as_tensor(data.test_y[:n_test], dtype=torch.int64),
                                   sc.eval.batch_size)

    def run(self) -> None:
        self.prepare()
        try:
            todo = [a for a in self.scenario.algorithms if not (self.checkpoints and self.checkpoints.is_done(a.key))]
            for entry in self.scenario.algorithms:
                if entry not in todo:
                    log.info("%s finished before the resume: skipped", entry.key)
            if todo:
                self._join()
            for entry in todo:
                self._run_algorithm(entry)
        finally:
            self._shutdown()
            self.evaluator.close()

    def close(self) -> None:
        self.sock.close()

    # -- joining ---------------------------------------------------------------------------------
    def _join(self) -> None:
        want = len(self.scenario.clients)
        self.progress.status(f"waiting for {want} clients on {self.address}")
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while len(self.peers) < want:
            if time.monotonic() > deadline:
                raise RunAborted(f"only {len(self.peers)} of {want} clients joined within {JOIN_TIMEOUT_S:.0f} s")
            self._tend()
            item = self._recv(POLL_INTERVAL_S * 5)
            if item is None:
                continue
            identity, msg = item
            if isinstance(msg, ProtocolError):
                self._reject(identity, str(msg))
            elif msg.type == "HELLO":
                self._admit(identity, msg)
            elif identity not in self.ranks:
                self._say_hello_first(identity, msg, "")
            elif msg.type != "HEARTBEAT":
                self._reject(identity, f"{msg.type} while clients join")
        self.progress.status(f"{want} clients joined")

    def _recv(self, timeout_s: float) -> tuple[bytes, Message | ProtocolError] | None:
        """The socket's next message, its metadata fields checked: a bad one comes as a ProtocolError."""
        item = self.sock.recv(timeout_s)
        if item is not None and item[0] in self.ranks:
            self.liveness.seen(self.ranks[item[0]])
        if item is None or isinstance(item[1], ProtocolError):
            return item
        try:
            check_client_fields(item[1])
        except ProtocolError as exc:
            return item[0], exc
        return item

    def _admit(self, identity: bytes, msg: Message) -> None:
        want = len(self.scenario.clients)
        asked = msg.meta.get("rank")
        if identity in self.ranks:
            return self._reject(identity, "already joined")
        holder = self.peers.get(asked) if isinstance(asked, int) else None
        if holder is not None and holder.same_process(msg):
            # It gave up waiting for WELCOME on its earlier socket, which has since been answered: the
            # rank moves to the new socket rather than being refused as taken.
            log.info("client %d said HELLO again on a new socket: it replaces its earlier one", asked)
            self._forget_peer(asked)
        free = [r for r in range(want) if r not in self.peers]
        if asked is not None and (not isinstance(asked, int) or asked not in free):
            return self._reject(identity, f"rank {asked!r} is taken or outside 0..{want - 1}", fatal=True)
        rank = asked if asked is not None else free[0]
        profile = self.scenario.clients[rank].profile
        if msg.meta.get("profile"):
            try:
                profile = parse_profile(msg.meta["profile"])
            except ValueError as exc:
                return self._reject(identity, f"profile: {exc}", fatal=True)
        info = msg.meta.get("info") if isinstance(msg.meta.get("info"), dict) else {}
        instance = msg.meta.get("instance")
        self.peers[rank] = Peer(rank, identity, info, profile, instance)
        self.ranks[identity] = rank
        up, down = (transport_link(link, self.kernel_shapes) for link in self.scenario.client_links(rank))
        seed = self.scenario.seed * 7919 + 2 * rank  # as the simulator: the same jitter and losses
        self.sock.send(identity, Message("WELCOME", {"rank": rank, "clients": want, "run": self.scenario.name,
                                                     "uplink": asdict(up), "link_seed": seed,
                                                     "timeout_s": self.scenario.faults.client_timeout_s}))
        self.liveness.seen(rank)
        self.sock.set_link(identity, down, seed + 1)
        log.info("client %d joined from %s (%s, profile %s, link up %s, down %s)", rank, info.get("host"),
                 info.get("device"), profile.label, up.describe(), down.describe())

    def _reject(self, identity: bytes, reason: str, fatal: bool = False, hello: bool = False) -> None:
        log.warning("message from %r rejected: %s", identity, reason)
        meta = {"reason": reason, "fatal": fatal, **({"hello": True} if hello else {})}
        self.sock.send(identity, Message("ERROR", meta))

    def _say_hello_first(self, identity: bytes, msg: Message, when: str) -> None:
        """Refuse a message from a socket that never said HELLO to this coordinator. Usually it is a
        client's old socket that ZeroMQ reconnected by itself to a restarted coordinator on the same
        address: `hello` tells that client to reconnect and ask for its rank (a stranger that does so
        is then judged on its HELLO)."""
        self._reject(identity, f"{msg.type} from a connection that has not said HELLO{when}: say HELLO", hello=True)

    def _forget_peer(self, rank: int) -> None:
        """Drop `rank`'s socket: a new one (of the same or a new process) is about to take the rank."""
        self.ranks.pop(self.peers.pop(rank).identity, None)

    # -- one algorithm ---------------------------------------------------------------------------
    def _run_algorithm(self, config: AlgorithmConfig) -> None:
        sc = self.scenario
        self.liveness.new_algorithm()
        self._setup_clients(config)
        self._calibrate_clients()
        server = self.server = self.server_half(config, self.liveness.alive(self.peers))
        self.update_check = UpdateCheck.for_server(server, self.initial)
        run = self.current = AlgorithmRun(config)
        server.now = lambda: time.perf_counter() - run.started
        run.bytes_in0 = dict(self.sock.bytes_in)
        run.bytes_out0 = dict(self.sock.bytes_out)
        budget = sc.stop.time_budget_s
        self.progress.start_algorithm(config.key, budget)
        elapsed = self._resume(config, server, run)
        if elapsed == 0.0:
            self.evaluator.submit(self._snapshot(server, 0.0))  # the initial model, at time zero
        next_eval = (math.floor(elapsed / sc.eval.every_s) + 1) * sc.eval.every_s
        run.started = time.perf_counter() - elapsed
        self._dispatch(server.start())
        while True:
            now = time.perf_counter() - run.started
            if now >= next_eval:
                self.evaluator.submit(self._snapshot(server, now))
                next_eval += sc.eval.every_s
            self._record_evals()
            if self._should_stop(server, now):
                break
            self._tend(server)
            item = self._recv(min(POLL_INTERVAL_S, max(0.0, next_eval - now), max(0.0, budget - now)))
            if item is None:
                continue
            identity, msg = item
            self._dispatch(self._handle(server, identity, msg))
            if self.checkpoints and self.checkpoints.due(server.updates):
                self._save_checkpoint(server, time.perf_counter() - run.started)
        end = time.perf_counter() - run.started
        final = self.evaluator.evaluate_now(self._snapshot(server, end))
        if run.diverged:
            final["diverged"] = True  # also when only the updates were non-finite (refused, model kept)
        self._record_evals()
        self._log_eval(final)
        self._finish_clients(config, end)
        if self.checkpoints:
            self.checkpoints.finish(config.key)
        self.progress.end_algorithm(config.key, final)

    def _resume(self, config: AlgorithmConfig, server: ServerAlgorithm, run: AlgorithmRun) -> float:
        """Restore `config`'s server half and counters from the checkpoint if it was in progress there;
        returns the clock to go on from (0.0 for a fresh start)."""
        saved = self.checkpoints.resume_point(config.key) if self.checkpoints else None
        if saved is None:
            return 0.0
        server.load_state_dict(saved["server"])
        self._match_membership(server)
        run.samples, run.best_acc = saved["samples"], saved["best_acc"]
        run.reached_target = saved["reached_target"]
        run.traffic0 = (saved["bytes_up"], saved["bytes_down"])
        elapsed = max(saved["elapsed_s"], last_logged_s(self.recorder.run_dir, config.key))
        log.info("%s resumed from its checkpoint at %d updates (%.1f s); the clock goes on at %.1f s",
                 config.key, server.updates, saved["elapsed_s"], elapsed)
        return elapsed

    def _match_membership(self, server: ServerAlgorithm) -> None:
        """The checkpoint lists the clients the old coordinator had; those alive now are what counts. A
        client lost while this one set up would otherwise stay in a barrier that waits for it forever.
        What the calls would send is dropped: `start()` follows and instructs every member."""
        for rank in sorted(self.liveness.lost):
            server.on_client_lost(rank)
        for rank in self.liveness.alive(self.peers):
            if rank not in server.clients:
                server.on_client_joined(rank)

    def _save_checkpoint(self, server: ServerAlgorithm, now: float) -> None:
        run = self.current
        up, down = self._traffic()
        self.checkpoints.save_progress(run.config.key, server.state_dict(), round(now, 4), server.updates,
                                       samples=run.samples, bytes_up=up, bytes_down=down, best_acc=run.best_acc,
                                       reached_target=run.reached_target)

    def server_half(self, config: AlgorithmConfig, clients: list[int]) -> ServerAlgorithm:
        """The algorithm's server half for these clients (the Flower runtime swaps ESync's)."""
        return algorithms.get(config.name).server(config, self.initial, clients)

    def _should_stop(self, server, now: float) -> bool:
        stop = self.scenario.stop
        if now >= stop.time_budget_s:
            return True
        if stop.max_updates is not None and server.updates >= stop.max_updates:
            return True
        return self.current.diverged or bool(stop.stop_at_target and self.current.reached_target)

    def _handle(self, server, identity: bytes, msg: Message | ProtocolError) -> list[Send]:
        rank = self.ranks.get(identity)
        if isinstance(msg, ProtocolError):
            if rank is not None:
                self._refuse(rank, "message", str(msg))
            else:
                self._reject(identity, str(msg))
            return []
        if rank is None:
            if msg.type == "HELLO":
                return self._readmit(server, identity, msg)
            self._say_hello_first(identity, msg, " (the run is in progress)")
            return []
        if rank in self.liveness.lost:  # it speaks again: back, once what it said is handled as a lost client's
            sends = [] if rank in self.joining else self._handle_live(server, identity, rank, msg)
            return sends + self._back(server, rank, msg)
        return self._handle_live(server, identity, rank, msg)

    def _handle_live(self, server, identity: bytes, rank: int, msg: Message) -> list[Send]:
        if msg.type == "HEARTBEAT":
            return []
        try:
            if msg.type == "UPDATE":
                try:
                    self.update_check.check(msg.tensors)
                except UpdateRefused as exc:  # before the server half: the global model is untouched
                    self._refuse(rank, "UPDATE", str(exc))
                    return self._fresh_start(server, rank, exc.nonfinite)
                sends = server.on_update(rank, Update(tensors=msg.tensors, meta=msg.meta))
                self.current.samples += int(msg.meta.get("samples", 0))
                self._log_updates(server)
                return sends
            if msg.type == "QUERY":
                reply = server.on_query(rank, msg.meta)
                if reply is not None:
                    self.sock.send(identity, Message("REPLY", reply))
                return []
        except Exception as exc:  # a message the algorithm cannot use: refused, the run goes on
            log.exception("client %d: %s refused by %s", rank, msg.type, self.current.config.key)
            self._refuse(rank, msg.type, f"{type(exc).__name__}: {exc}", logged=True)
            return []
        if msg.type == "ERROR":
            log.error("client %d reports: %s", rank, msg.meta.get("reason"))
            return []
        self._reject(identity, f"{msg.type} is not expected while training")
        return []

    def _fresh_start(self, server: ServerAlgorithm, rank: int, nonfinite: bool) -> list[Send]:
        """After a refused update the client would wait forever for an answer: it starts afresh from
        the current model (lost and back: a barrier closes without it, its per-client state is reset).
        Non-finite updates mean the training diverged: past a few per client the algorithm stops."""
        run = self.current
        if nonfinite:
            run.nonfinite += 1
            if run.nonfinite >= NONFINITE_UPDATES_DIVERGED * max(1, len(self.peers)):
                log.error("%s diverged: %d updates with NaN or Inf refused", run.config.key, run.nonfinite)
                run.diverged = True
                return []
        return server.on_client_lost(rank) + server.on_client_joined(rank)

    def _refuse(self, rank: int, what: str, reason: str, logged: bool = False) -> None:
        """A training client's message is not used: counted, logged, answered with ERROR (not fatal)."""
        refused = self.current.refused
        refused[rank] = refused.get(rank, 0) + 1
        if not logged:
            log.warning("client %d: %s refused during %s (%d so far): %s", rank, what, self.current.config.key,
                        refused[rank], reason)
        self.sock.send(self.peers[rank].identity,
                       Message("ERROR", {"reason": f"{what} refused: {reason}", "fatal": False}))

    def _dispatch(self, sends: list[Send]) -> None:
        for send in sends:
            peer = self.peers.get(send.client)
            if peer is not None:
                instr = send.instruction
                self.sock.send(peer.identity, Message("TRAIN", instr.meta, instr.tensors))

    # -- liveness: heartbeats, lost clients, returns ---------------------------------------------
    def _tend(self, server: ServerAlgorithm | None = None) -> None:
        """A few times a second: heartbeats to quiet clients, silent or exited clients lost, quorum."""
        now = time.monotonic()
        if now < self._next_tend:
            return
        self._next_tend = now + TEND_EVERY_S
        for rank, why in self.health_check() or []:  # local client processes that exited
            self._lose(rank, why, server)
        if not self.heartbeats:
            return
        last_send = self.sock.last_send
        for rank in self.liveness.alive(self.peers):
            identity = self.peers[rank].identity
            if now - last_send.get(identity, 0.0) >= HEARTBEAT_INTERVAL_S:
                self.sock.send(identity, Message("HEARTBEAT"))
        for rank, silent in self.liveness.silent(self.peers):
            self._lose(rank, f"silent for {silent:.1f} s (faults.client_timeout_s = {self.liveness.timeout_s:g})", server)
        self._check_quorum(server, now)

    def _check_quorum(self, server: ServerAlgorithm | None, now: float) -> None:
        """Abort once too few clients have been alive for longer than the timeout: synchronous algorithms
        need faults.quorum of them, any algorithm needs one."""
        need = 1
        if server is not None and algorithms.get(self.current.config.name).family == "synchronous":
            need = self.scenario.faults.quorum
        alive = len(self.liveness.alive(self.peers))
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

    def _lose(self, rank: int, why: str, server: ServerAlgorithm | None) -> None:
        if rank not in self.peers or not self.liveness.lose(rank, why):
            return
        self.joining.pop(rank, None)
        log.warning("client %d lost: %s", rank, why)
        if server is not None:
            self._dispatch(server.on_client_lost(rank))  # a barrier closes without it; ESync stops waiting

    def _back(self, server: ServerAlgorithm, rank: int, msg: Message) -> list[Send]:
        """A lost client spoke. One set up for the algorithm in progress (the same process, paused or cut
        off) is back now; any other (a new process that said HELLO, or one lost in an earlier algorithm)
        is set up first and back once it answers (READY, then CALIBRATED if throttled)."""
        owed = self.joining.get(rank)
        if owed is None and self.set_up_for.get(rank) != self.current.config.key:
            self.joining[rank] = "READY"
            self._send_setup(self.current.config, rank)
            return []
        if owed is not None:
            if msg.type != owed:
                return []
            if msg.type == "READY" and is_throttled(self.peers[rank].profile):
                self.joining[rank] = "CALIBRATED"
                self.sock.send(self.peers[rank].identity, Message("CALIBRATE"))
                return []
            if msg.type == "CALIBRATED":
                self.peers[rank].info["reference_step_s"] = msg.meta.get("reference_s")
            del self.joining[rank]
        self.liveness.back(rank)
        log.info("client %d is back", rank)
        return server.on_client_joined(rank)

    def _readmit(self, server: ServerAlgorithm, identity: bytes, msg: Message) -> list[Send]:
        """HELLO in the middle of an algorithm: a client process that lost its link (or was restarted)
        asks for its rank back. It may take a lost rank (a live one is refused, not fatally: the
        client retries with backoff until its old socket is known to be gone); it is set up for the
        algorithm in progress and joins it when READY."""
        asked = msg.meta.get("rank")
        lost = sorted(self.liveness.lost)
        if asked is None:
            if not lost:
                self._reject(identity, "the run is in progress and every rank is taken", fatal=True)
                return []
            asked = lost[0]
        if not isinstance(asked, int) or asked not in self.peers:
            self._reject(identity, f"rank {asked!r} is not one of this run's (0..{len(self.scenario.clients) - 1})",
                         fatal=True)
            return []
        if asked not in self.liveness.lost:
            if not self.peers[asked].same_process(msg):  # its old socket may not be known dead yet: it retries
                self._reject(identity, f"rank {asked} is held by a live client; if that was you, try again after "
                                       f"faults.client_timeout_s ({self.liveness.timeout_s:g} s)")
                return []
            self._lose(asked, "it said HELLO again on a new socket", server)  # the old socket is gone
        self._forget_peer(asked)
        self.set_up_for.pop(asked, None)  # a new process or socket: nothing is set up on it
        self.joining.pop(asked, None)  # a SETUP sent to its old socket is lost with it: sent again below
        self._admit(identity, Message("HELLO", {**msg.meta, "rank": asked}))
        return self._back(server, asked, msg)

    # -- evaluation and counters -----------------------------------------------------------------
    def _traffic(self) -> tuple[int, int]:
        run = self.current
        up = sum(v - run.bytes_in0.get(k, 0) for k, v in self.sock.bytes_in.items())
        down = sum(v - run.bytes_out0.get(k, 0) for k, v in self.sock.bytes_out.items())
        return up + run.traffic0[0], down + run.traffic0[1]

    def _snapshot(self, server, now: float) -> Snapshot:
        up, down = self._traffic()
        info = {"algorithm": self.current.config.key, "time_s": round(now, 4), "updates": server.updates,
                "samples": self.current.samples, "bytes_up": up, "bytes_down": down,
                "wall_clock": time.time()}
        return Snapshot(server.global_params().clone(), server.global_buffers().clone(), info)

    def _log_updates(self, server) -> None:
        rows = server.drain_update_log()
        if rows:
            now = round(time.perf_counter() - self.current.started, 4)
            self.recorder.log_updates([{"algorithm": self.current.config.key, "time_s": now, **r} for r in rows])

    def _record_evals(self) -> None:
        for row in self.evaluator.results():
            self._log_eval(row)

    def _log_eval(self, row: dict) -> None:
        run = self.current
        run.best_acc = max(run.best_acc, row["test_acc"])
        target = self.scenario.stop.target_acc
        if target is not None and row["test_acc"] >= target:
            run.reached_target = True
        if not math.isfinite(row["test_loss"]):  # the model diverged: nothing more to learn from it
            run.diverged = row["diverged"] = True
        self.recorder.log_eval(row)
        self.progress.update(row)

    # -- client phases ---------------------------------------------------------------------------
    def _send_setup(self, config: AlgorithmConfig, rank: int) -> None:
        sc, peer = self.scenario, self.peers[rank]
        meta = {
            "label": config.key, "algorithm": config.model_dump(mode="json"),
            "dataset": sc.dataset.model_dump(mode="json"), "model": sc.model.name,
            "profile": peer.profile.model_dump(mode="json"), "seed": sc.seed,
            "device": sc.clients[rank].device,
        }
        self.sock.send(peer.identity, Message("SETUP", meta, {"indices": torch.from_numpy(self.splits[rank])}))
        self.set_up_for[rank] = config.key

    def _setup_clients(self, config: AlgorithmConfig) -> None:
        for rank in self.liveness.alive(self.peers):
            self._send_setup(config, rank)
        self.progress.status(f"setting up {config.key}")
        self._await_all("READY", READY_TIMEOUT_S)

    def _calibrate_clients(self) -> None:
        """One client at a time, so each measures its undisturbed step time."""
        for rank, peer in sorted(self.peers.items()):
            if not is_throttled(peer.profile) or rank in self.liveness.lost:
                continue
            self.progress.status(f"calibrating client {rank}")
            self.sock.send(peer.identity, Message("CALIBRATE"))
            replies = self._await_all("CALIBRATED", READY_TIMEOUT_S, only={rank})
            if rank in replies:
                peer.info["reference_step_s"] = replies[rank].get("reference_s")

    def _finish_clients(self, config: AlgorithmConfig, end: float) -> None:
        run = self.current
        for rank in self.liveness.alive(self.peers):
            self.sock.send(self.peers[rank].identity, Message("END"))
        stats = self._await_all("STATS", STATS_TIMEOUT_S, strict=False)
        for rank, peer in sorted(self.peers.items()):
            s = stats.get(rank, {})
            row = {
                "algorithm": config.key, "client": rank, "profile": peer.profile.label,
                "host": peer.info.get("host"), "device": s.get("device", peer.info.get("device")),
                "compute_s": s.get("compute_s"), "wait_s": s.get("wait_s"), "wall_s": s.get("wall_s"),
                "steps": s.get("steps"), "samples": s.get("samples"),
                "bytes_up": self.sock.bytes_in.get(peer.identity, 0) - run.bytes_in0.get(peer.identity, 0),
                "bytes_down": self.sock.bytes_out.get(peer.identity, 0) - run.bytes_out0.get(peer.identity, 0),
                "reference_step_s": s.get("reference_s"), "target_factor": s.get("target_factor"),
                "achieved_factor": s.get("achieved_factor"), "refused": run.refused.get(rank, 0),
                "lost": self.liveness.losses[rank], "rejoined": self.liveness.returns[rank],
                "gpu": peer.info.get("gpu"),
            }
            if rank in self.liveness.lost:
                row["error"] = f"lost: {self.liveness.lost[rank]}"
            elif rank not in stats:
                row["error"] = "no statistics: the client did not answer END"
            self.recorder.log_client(row)

    def _await_all(self, kind: str, timeout_s: float, only: set[int] | None = None,
                   strict: bool = True) -> dict[int, dict]:
        """Collect one `kind` message from each client (or from `only`); other traffic is dropped."""
        waiting = set(self.liveness.alive(only if only is not None else self.peers))
        got: dict[int, dict] = {}
        deadline = time.monotonic() + timeout_s
        while waiting := waiting - set(self.liveness.lost):  # a client lost meanwhile is not waited for
            if time.monotonic() > deadline:
                if strict:
                    raise RunAborted(f"clients {sorted(waiting)} sent no {kind} within {timeout_s:.0f} s")
                log.warning("clients %s sent no %s within %.0f s", sorted(waiting), kind, timeout_s)
                break
            self._tend()
            item = self._recv(POLL_INTERVAL_S * 5)
            if item is None:
                continue
            identity, msg = item
            rank = self.ranks.get(identity)
            if isinstance(msg, ProtocolError):
                self._reject(identity, str(msg))
            elif rank is None and msg.type == "HELLO":  # a client coming back between algorithms tries again
                self._reject(identity, "between algorithms; say HELLO again in a moment")
            elif rank is None:
                self._say_hello_first(identity, msg, " (between algorithms)")
            elif rank in self.liveness.lost:
                pass  # it is taken back, and set up, once the next algorithm runs
            elif msg.type == "ERROR":
                reason = msg.meta.get("reason")
                if strict and rank in waiting:
                    raise RunAborted(f"client {rank} failed while waiting for {kind}: {reason}")
                log.error("client %d reports: %s", rank, reason)
            elif msg.type == kind and rank in waiting:
                got[rank] = msg.meta
                waiting.discard(rank)
            # anything else (late UPDATEs after END) belongs to a finished phase: dropped
        return got

    def _shutdown(self) -> None:
        for peer in self.peers.values():
            self.sock.send(peer.identity, Message("SHUTDOWN"))
