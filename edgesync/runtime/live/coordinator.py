"""The live coordinator: a message loop that runs each algorithm of a scenario in turn.

Per algorithm: SETUP and CALIBRATE the clients (phases.py), then hand each UPDATE, and the deadline it asks for
(`due()`), to the server half and send what it returns until a stop rule fires; then END. Membership is
membership.py's; records and stop rules accounting.py's; follower shards sharding/lead.py's; all-reduce's store
allreduce/host.py's. The loop never blocks longer than `POLL_INTERVAL_S`; evaluation runs on a worker thread.

Nothing a client sends is used unchecked: the frames (protocol.py), the metadata fields the coordinator
reads (fields.py), and each UPDATE's tensors against the model and the algorithm, finite included
(update_check.py). A refused update never reaches the server half; it counts in `refused` (clients.jsonl).

Hooks for the Flower ServerApp (flower/coordinator.py): `heartbeats`, `after_algorithm`, `members`, `phases`, `recorder`.
What the dashboard shows of the fleet: fleet.py's view, told what passes here and written once a second.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Callable, ClassVar

from edgesync import algorithms
from edgesync.algorithms.machinery.base import AlgorithmConfig, Population, Send, ServerAlgorithm, Update
from edgesync.constants import NONFINITE_UPDATES_DIVERGED, POLL_INTERVAL_S
from edgesync.metrics.coordinator_load import LiveLoad, record_load
from edgesync.metrics.recorder import RunRecorder
from edgesync.runtime.bookkeeping.accounting import AlgorithmAccount
from edgesync.runtime.bookkeeping.checkpoint import Checkpointer
from edgesync.runtime.bookkeeping.evaluator import Evaluator, Snapshot
from edgesync.runtime.live.availability import CoordinatorAvailability
from edgesync.runtime.live.fleet import FleetView
from edgesync.runtime.live.rejoin import Rejoin
from edgesync.runtime.bookkeeping.membership import Membership, RunAborted
from edgesync.runtime.live.phases import Phases
from edgesync.runtime.bookkeeping.progress import Progress
from edgesync.runtime.bookkeeping.resume import restore_algorithm, save_algorithm
from edgesync.runtime.allreduce.host import RingHost, count_ring_bytes
from edgesync.runtime.sharding.lead import NoShards, lead_for
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused
from edgesync.runtime.bookkeeping.workload import prepare_workload
from edgesync.config import Scenario
from edgesync.transport import protocol
from edgesync.transport.protocol import Message, MessageType as T, ProtocolError
from edgesync.transport.security import ServerKeys
from edgesync.transport.sockets import CoordinatorSocket

__all__ = ["Coordinator", "RunAborted"]

log = logging.getLogger("edgesync.coordinator")


class Coordinator(Rejoin):
    heartbeats: ClassVar[bool] = True  # liveness by heartbeats and timeouts (the Flower runtime leaves it to Flower)

    def __init__(self, scenario: Scenario, recorder: RunRecorder, bind: str = "tcp://127.0.0.1:*",
                 progress: Progress | None = None,
                 health_check: Callable[[], list[tuple[int, str]] | None] | None = None,
                 sock: CoordinatorSocket | None = None, keys: ServerKeys | None = None,
                 shutdown_clients: bool = True):
        """`sock` replaces the ZeroMQ socket bound at `bind` with another transport of the same API
        (the Flower runtime's `edgesync.flower.grid_socket.GridSocket`); `keys` make the socket a
        CURVE server admitting only the allow-list's clients (transport/security.py).
        `shutdown_clients=False` leaves the clients running after the last algorithm (a sweep's next
        variant has its own coordinator on the same address); they are still told SHUTDOWN on a failure."""
        self.shutdown_clients = shutdown_clients
        self.scenario = scenario
        self.recorder = recorder
        self.sock = sock if sock is not None else CoordinatorSocket(bind, keys=keys)
        self.address = self.sock.address
        self.progress = progress or Progress(enabled=False)
        self.members = Membership(scenario, self.sock, heartbeats=self.heartbeats, on_lost=self._client_lost,
                                  quorum=self._quorum)
        if health_check is not None:
            self.health_check = health_check
        self.phases = Phases(self.members, self.progress)
        self.ring = self.phases.ring = RingHost(bind, scenario, lambda: time.perf_counter() - self._started)
        self.checkpoints: Checkpointer | None = None  # set by the launcher: checkpoint.pt, --resume
        self.shards, self.shard_addresses = NoShards(), []  # follower shards' addresses: set by the launcher
        self.shard_keys = keys.as_client() if keys is not None else None  # the lead's, to its followers
        self.server: ServerAlgorithm | None = None  # the running algorithm's server half, while it trains
        self.account: AlgorithmAccount | None = None
        self.update_check: UpdateCheck | None = None
        self.joining: dict[int, str] = {}  # rank → what a client coming back mid-algorithm owes: READY, CALIBRATED
        self.refused: dict[int, int] = {}  # per client: messages refused while training this algorithm
        self.seen: dict[int, dict[str, int]] = {}  # per client: steps and samples of the updates it sent
        self.nonfinite = 0  # updates refused for NaN/Inf values, this algorithm
        self._bytes0: tuple[dict, dict] = ({}, {})  # socket counters when this algorithm started
        self.traffic_before_resume = (0, 0)  # bytes up/down before a resume
        self._started = 0.0
        self.availability = CoordinatorAvailability(scenario)  # replaced at each algorithm's start
        self.fleet = FleetView(recorder.run_dir)  # fleet.json, for the dashboard

    # -- settings the launchers make ---------------------------------------------------------------
    peers = property(lambda self: self.members.peers)  # rank → Peer

    # () → [(rank, why)] of exited local clients; the link properties tc applies (netns): the members'
    health_check = property(lambda self: self.members.health_check,
                            lambda self, check: setattr(self.members, "health_check", check))
    kernel_shapes = property(lambda self: self.members.kernel_shapes,
                             lambda self, shapes: setattr(self.members, "kernel_shapes", shapes))

    # -- hooks -------------------------------------------------------------------------------------
    def after_algorithm(self, config: AlgorithmConfig, end_s: float, final: Snapshot) -> None:
        """Called with the algorithm's final model, before its clients are told END. Default: nothing."""

    # -- the whole run -----------------------------------------------------------------------------
    def prepare(self) -> None:
        """Load the data, split it, build θ₀ and the evaluator: everything that can fail early."""
        if hasattr(self, "evaluator"):
            return
        sc = self.scenario
        self.workload = work = prepare_workload(sc)
        self.phases.splits = work.splits
        self.shards = self.phases.shards = lead_for(sc, work, self.shard_addresses, self.shard_keys)
        self.evaluator = Evaluator(sc.model.id, work.data.num_classes, work.data.input_shape[0], work.eval_x,
                                   work.eval_y, sc.eval.batch_size, clients=work.client_sets)

    def run(self) -> None:
        self.prepare()
        try:
            todo = [a for a in self.scenario.algorithms if not (self.checkpoints and self.checkpoints.is_done(a.key))]
            for entry in self.scenario.algorithms:
                if entry not in todo:
                    log.info("%s finished before the resume: skipped", entry.key)
            if todo:
                self.members.join_all(self.progress)
            for entry in todo:
                self._run_algorithm(entry)
        except BaseException as exc:
            self.members.shutdown(f"the run was aborted: {exc}" if str(exc) else "the run was aborted", aborted=True)
            self.shards.close()  # follower shards exit with a failed run
            raise
        else:
            if self.shutdown_clients:
                self.members.shutdown()
                self.members.dismiss_offline(set(self.availability.offline))  # they ask to return once a second
            self.shards.close(shutdown=self.shutdown_clients)  # else the next variant's coordinator leads them
        finally:
            self.evaluator.close()

    def close(self) -> None:
        self.shards.close()  # still open only if the run never got to its end
        self.ring.close()
        self.sock.close()

    # -- one algorithm -----------------------------------------------------------------------------
    def _run_algorithm(self, config: AlgorithmConfig) -> None:
        sc = self.scenario
        self.members.liveness.new_algorithm()
        self.phases.setup_all(config)
        self.phases.calibrate_all()
        availability = self.availability = CoordinatorAvailability(sc)
        offline_at_start = availability.start()
        initial, in_it = self.shards.lead_state(self.workload.initial), [r for r in self.members.alive()
                                                                          if r not in offline_at_start]
        server = algorithms.get(config.name).server(config, initial, in_it)  # on slice 0 if sharded
        server.population = Population(sc.seed, {r: len(split) for r, split in enumerate(self.workload.splits)})
        self.update_check = UpdateCheck.for_server(server, initial)
        server = self.shards.wrap(server, config, self.workload.initial, in_it)
        stop = sc.stop.for_base_step(base_s := self.phases.base_step_s())  # a budget in base steps: the shared one's
        log.info("%s: time budget %.1f s (base step %.2f ms)", config.key, stop.time_budget_s, 1e3 * base_s)
        account = self.account = AlgorithmAccount(config, stop, self.recorder, self.progress,
                                                  chance_acc=1 / self.workload.data.num_classes)
        self.refused, self.nonfinite, self.seen = {}, 0, {}
        server.now = lambda: time.perf_counter() - self._started
        self._bytes0 = (dict(self.sock.bytes_in), dict(self.sock.bytes_out))
        self.progress.start_algorithm(config.key, stop.time_budget_s)
        elapsed, self.traffic_before_resume = restore_algorithm(
            self.checkpoints, self.recorder.run_dir, account, server, self.members.alive(),
            list(self.members.liveness.lost))
        if elapsed == 0.0:
            self.evaluator.submit(self._snapshot(server, 0.0))  # the initial model, at time zero
            self._save(server, 0.0)  # a crash before the first periodic checkpoint resumes from here
        next_eval = (math.floor(elapsed / sc.eval.every_s) + 1) * sc.eval.every_s
        self._started = time.perf_counter() - elapsed
        self.sock.start_clock(self._started)  # messages carry the algorithm's clock from now on; clients' too
        for rank in self.members.alive() if sc.varies_in_time else ():
            self.members.send(rank, protocol.heartbeat())  # so that every client hears it at once
        self.load = LiveLoad(self._started, elapsed, self.sock)  # its busy time; queueing delays from those stamps
        for rank in offline_at_start:
            self.members.lose(rank, "offline at the start (availability)")
            account.log_presence(rank, False, elapsed)
        self.server = server
        self.fleet.start(config.key, sc, self.peers)
        try:
            self._dispatch(server.start() if account.final_row is None else [])  # else resumed after it: END only
            account.log_updates(server.drain_update_log(), elapsed)  # a first round's draw, at its time
            while True:
                now = time.perf_counter() - self._started
                self.fleet.tick(self, now)
                availability.take_offline(now, account, self.members)
                account.log_evals(self.evaluator.results())
                if account.should_stop(now, server.updates):
                    break  # before a periodic snapshot: the model at the stop is evaluated once, as the final one
                if now >= next_eval:
                    self.evaluator.submit(self._snapshot(server, now))
                    next_eval += sc.eval.every_s
                self.members.tend()
                wake = min(next_eval, stop.time_budget_s, availability.next_change(), (due := server.due()))
                item = self.load.recv(self.members.recv, min(POLL_INTERVAL_S, max(0.0, wake - now)))
                if (at := time.perf_counter() - self._started) >= due:  # a round's deadline (the half's `due`)
                    self._dispatch(server.on_due())
                    account.log_updates(server.drain_update_log(), at)
                if item is None:
                    continue
                self._dispatch(self._handle(server, *item))
                if self.checkpoints and self.checkpoints.due(server.updates, time.perf_counter() - self._started):
                    self._save(server, time.perf_counter() - self._started)
        finally:
            self.server = None
            self.sock.start_clock(None)
        end = time.perf_counter() - self._started
        self.fleet.tick(self, end, final=True)
        self.shards.end()  # follower shards finish the updates the lead applied; their last slices are kept
        final = self._snapshot(server, end)
        if account.final_row is None:  # else written before a crash: the resume only ends the entry
            counters, acc, loss = self.evaluator.evaluate_now(final)
            account.log_evals(self.evaluator.results())
            account.log_final(counters, acc, loss, diverged=account.diverged)  # also if only updates were non-finite
            record_load(self.recorder, config.key, self.load.finish(end))  # coordinator.jsonl; a bottleneck warns
            self._save(server, end)  # with the final row: a crash from here on resumes past it, not into a second
        self.after_algorithm(config, end, final)
        self.phases.end_all(account, self._bytes0, self.refused, self.seen,
                            availability.client_extras(server, self.peers, end))
        self.checkpoints and self.checkpoints.finish(config.key)
        self.progress.end_algorithm(config.key, account.final_row)

    def _save(self, server: ServerAlgorithm, now: float) -> None:
        save_algorithm(self.checkpoints, self.account, server, now, self.traffic())

    def _quorum(self) -> int:
        """Synchronous algorithms need faults.quorum clients alive, any one; the offline are not missing."""
        offline = len(self.availability.offline)
        if self.server is not None and algorithms.get(self.server.config.name).family == "synchronous":
            return max(0, min(self.scenario.faults.quorum, len(self.peers) - offline))
        return 0 if offline else 1

    # -- messages while training -------------------------------------------------------------------
    def _handle(self, server: ServerAlgorithm, identity: bytes, msg: Message | ProtocolError) -> list[Send]:
        self._handled_at = now = self._now()  # what it changes is logged at this time: the online set is as of now
        self.availability.take_offline(now, self.account, self.members)  # before its messages are used
        rank = self.members.ranks.get(identity)
        if isinstance(msg, ProtocolError):
            if rank is not None:
                self._refuse(rank, "message", str(msg))
            else:
                self.members.reject(identity, str(msg))
            return []
        if rank is None:
            if msg.type == T.HELLO:
                return self._readmit(server, identity, msg)
            self.members.say_hello_first(identity, msg, " (the run is in progress)")
            return []
        if rank in self.members.liveness.lost and self.availability.is_offline(rank, now):
            return []  # offline by its availability: what it still says is lost with the device
        if rank in self.members.liveness.lost and msg.type == T.HELLO:  # back on the same connection (Flower)
            return self._readmit(server, identity, Message(T.HELLO, {**msg.meta, "rank": rank}))
        if rank in self.members.liveness.lost:  # it speaks again: back, once what it said is handled as a lost client's
            sends = [] if rank in self.joining else self._handle_live(server, identity, rank, msg)
            return sends + self._back(server, rank, msg)
        return self._handle_live(server, identity, rank, msg)

    def _handle_live(self, server: ServerAlgorithm, identity: bytes, rank: int, msg: Message) -> list[Send]:
        if msg.type == T.HEARTBEAT:
            return []
        try:
            if msg.type == T.UPDATE:
                try:
                    self.update_check.check(msg.tensors, "ring" in msg.meta, msg.raw)
                except UpdateRefused as exc:  # before the server half: the global model is untouched
                    self._refuse(rank, "UPDATE", str(exc))
                    return self._fresh_start(server, rank, exc.nonfinite)
                sends = server.on_update(rank, Update(tensors=msg.tensors, meta=msg.meta))
                count_ring_bytes(self.sock, identity, msg.meta)  # all-reduce: what the client sent its peers
                self.account.samples += int(msg.meta.get("samples", 0))
                seen = self.seen.setdefault(rank, {"steps": 0, "samples": 0})
                seen["steps"] += int(msg.meta.get("steps", 0))
                seen["samples"] += int(msg.meta.get("samples", 0))
                self.fleet.updated(rank, msg.meta, rows := server.drain_update_log(), self._handled_at)
                self.account.log_updates(rows, self._handled_at)
                return sends
            if msg.type == T.QUERY:
                reply = server.on_query(rank, msg.meta)
                if reply is not None:
                    self.sock.send(identity, protocol.reply(reply))
                return []
        except Exception as exc:  # a message the algorithm cannot use: refused, the run goes on
            log.exception("client %d: %s refused by %s", rank, msg.type, self.account.key)
            self._refuse(rank, msg.type, f"{type(exc).__name__}: {exc}", logged=True)
            return []
        if msg.type == T.ERROR:
            log.error("client %d reports: %s", rank, msg.meta.get("reason"))
            return []
        self.members.reject(identity, f"{msg.type} is not expected while training")
        return []

    def _fresh_start(self, server: ServerAlgorithm, rank: int, nonfinite: bool) -> list[Send]:
        """After a refused update the client would wait forever for an answer: it starts afresh from
        the current model (lost and back: a barrier closes without it, its per-client state is reset).
        Non-finite updates mean the training diverged: past a few per client the algorithm stops."""
        if nonfinite:
            self.nonfinite += 1
            if self.nonfinite >= NONFINITE_UPDATES_DIVERGED * max(1, len(self.peers)):
                log.error("%s diverged: %d updates with NaN or Inf refused", self.account.key, self.nonfinite)
                self.account.diverged = True
                return []
        return server.on_client_lost(rank) + server.on_client_joined(rank)

    def _refuse(self, rank: int, what: str, reason: str, logged: bool = False) -> None:
        """A training client's message is not used: counted, logged (rate-limited), answered with ERROR."""
        self.refused[rank] = self.refused.get(rank, 0) + 1
        if not logged:
            self.members.warnings.warning(rank, f"client {rank}: {what} refused during {self.account.key} "
                                                f"({self.refused[rank]} so far): {reason}")
        self.members.send(rank, protocol.error(f"{what} refused: {reason}"))

    def _dispatch(self, sends: list[Send]) -> None:
        for send in sends:
            if send.client in self.peers:  # all-reduce: θ left out where the client's replica holds it
                self.members.send(send.client, msg := protocol.train(*self.ring.wire(send.instruction)))
                self.fleet.instructed(send.client, self._now() if msg.clock is None else msg.clock)

    def _now(self) -> float:
        return time.perf_counter() - self._started

    # -- evaluation and counters -------------------------------------------------------------------
    def traffic(self) -> tuple[int, int]:
        """Bytes up and down of the algorithm in progress, a resumed run's earlier traffic included."""
        in0, out0 = self._bytes0
        up = sum(v - in0.get(k, 0) for k, v in self.sock.bytes_in.items())
        down = sum(v - out0.get(k, 0) for k, v in self.sock.bytes_out.items())
        up, down = up + self.shards.traffic[0], down + self.shards.traffic[1]  # the follower shards' too
        return up + self.traffic_before_resume[0], down + self.traffic_before_resume[1]

    def _snapshot(self, server: ServerAlgorithm, now: float) -> Snapshot:
        params = server.global_params().clone()  # sharded: every slice, and the followers' traffic
        self.account.bytes_up, self.account.bytes_down = self.traffic()
        return Snapshot(params, server.global_buffers().clone(), self.account.counters(now, server.updates))
