"""The live client: connect, say hello, then do what the coordinator says until SHUTDOWN.

Passive by design (server-driven): SETUP builds the trainer and the algorithm's client half for one
algorithm, CALIBRATE measures the undisturbed step time, TRAIN runs the client half and sends its
update, END reports this client's totals. The device profile's throttle wraps the trainer's steps.

CURVE keys (transport/security.py) encrypt the link; a refused key ends the client with a ClientFailed saying why.

Availability (`availability:`): the client follows its own schedule on the algorithm's clock (device_schedule.py).
Gone offline (between steps, or in a throttled step's sleep), it loses the instruction it ran and closes its
socket with whatever it held unsent; it asks on a new socket now and then until the coordinator takes it back
(offline_device.py), and is set up afresh. A trace's factor is taken at each step's start on that clock.

Outside code (config/outside_code.py): asked to describe it (an ERROR's `describe`), the client says HELLO again at
once with it, and in every later HELLO; a coordinator that runs other code refuses it with one line (ClientFailed).

Liveness: a second after it last sent anything (idle, listening, or in a long throttled step) the client sends
HEARTBEAT. If the coordinator says nothing for the timeout WELCOME gave (faults.client_timeout_s) it is presumed
gone: the client reconnects on a new socket with exponential backoff and asks for its old rank (a resumed
coordinator, or one that dropped it, takes it back). That silence counts only while the client listens.
"""
from __future__ import annotations

import logging
import math
import threading
import time
import uuid

import torch

from edgesync.algorithms.machinery.base import Instruction
from edgesync.config.outside_code import describe_here, describe_request
from edgesync.constants import (CLIENT_IDLE_TIMEOUT_S, CONNECT_TIMEOUT_S, HEARTBEAT_INTERVAL_S, RECONNECT_FIRST_S,
                                RECONNECT_MAX_S)
from edgesync.emulation import isolation
from edgesync.emulation.links import Link
from edgesync.emulation.profiles import parse_profile
from edgesync.emulation.throttle import Throttle, needs_throttle
from edgesync.runtime.bookkeeping.accounting import client_totals
from edgesync.runtime.live.client_session import Beating, Session, build_session
from edgesync.runtime.live.client_shards import ClientShards
from edgesync.runtime.live.device_schedule import DeviceSchedule
from edgesync.runtime.live.context import ClientFailed, InstructionAborted, LiveContext
from edgesync.runtime.live.offline_device import reconnect, sit_out
from edgesync.runtime.allreduce.client import RingFailed, ring_half
from edgesync.runtime.live.run_clock import RunClock
from edgesync.runtime.bookkeeping.step_time import measure_step_s, warm_up
from edgesync.runtime.bookkeeping.workload import make_trainer, resolve_device
from edgesync.trainer import DeviceOffline, NoHook
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.contracts.version import ContractMismatch
from edgesync.transport.handshake import HandshakeFailed
from edgesync.transport import protocol
from edgesync.transport.protocol import Message, MessageType as T, ProtocolError, gpu_name, host_info
from edgesync.transport.security import ClientKeys
from edgesync.transport.connect_wait import ConnectWait
from edgesync.transport.sockets import ClientSocket

__all__ = ["Beating", "ClientFailed", "EdgeClient", "Session", "build_session"]

log = logging.getLogger("edgesync.client")


class EdgeClient:
    """`connect_timeout_s`: how long the coordinator may say nothing before joining (ConnectWait). A bad
    profile or device name is a ValueError; a device this machine lacks is told to the coordinator (a
    fatal ERROR after HELLO, for it to abort naming this client), then a ClientFailed."""

    def __init__(self, connect: str, rank: int | None = None, profile: str | None = None,
                 device: str | None = None, data_root: str | None = None, keys: ClientKeys | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S):
        if profile is not None:
            parse_profile(profile)  # fail here, before connecting, on a typo
        self.device_problem: str | None = None  # why this machine cannot use `device`
        if device is not None:
            try:
                resolve_device(device)  # a malformed name is a ValueError
            except RuntimeError as exc:
                self.device_problem = f"client cannot use device {device}: {exc}"
        self.connect, self.connect_timeout_s = connect, connect_timeout_s
        self.wish_rank, self.wish_profile = rank, profile
        self.device_override, self.data_root, self.keys = device, data_root, keys
        self.rank: int | None = None
        self.run_clock = RunClock()  # the algorithm's clock, heard from the coordinator (traces, availability)
        self.device_schedule: DeviceSchedule | None = None  # this client's availability, once set up
        self.timeout_s = CLIENT_IDLE_TIMEOUT_S  # the coordinator's silence that means it is gone (WELCOME)
        self.session: Session | None = None
        self.shards: ClientShards | None = None  # sockets to a sharded coordinator's followers (SETUP says)
        self._calibrated: dict[tuple, float] = {}  # (model, batch size, device) → reference step s
        self._hello_delay = RECONNECT_FIRST_S  # backoff of a HELLO refused for now
        self._warm: set[tuple] = set()  # (model, batch size, device) run once on a GPU already
        self._isolation: isolation.Isolation | None = None  # how this process is pinned or capped
        self._isolation_wish: tuple | None = None
        # Names this process in every HELLO: a HELLO it gave up waiting on may still be answered, and
        # the coordinator then knows the next one, on a new socket, is the same client and not a rival.
        self.instance = uuid.uuid4().hex
        self.extensions: dict[str, dict] = {}  # the outside code described to a coordinator, by name (HELLO)
        self._make_trainer = make_trainer  # a slot's shares its process's model (runtime/live/slots.py)

    def run(self) -> None:
        torch.set_num_threads(1)
        try:
            self._serve()
        except (HandshakeFailed, ContractMismatch) as exc:  # refused, or another EdgeSync: one line says which
            raise ClientFailed(str(exc)) from None
        finally:
            if self._isolation is not None:
                isolation.release(self._isolation)  # its cgroup folder goes with it

    def hello(self, offline: bool = False) -> Message:
        rank = self.rank if self.rank is not None else self.wish_rank  # after a reconnect: the old rank
        if self.device_problem is not None:  # the device asked for, though unusable: the ERROR after HELLO says why
            info = {**host_info("cpu"), "device": self.device_override}
        else:
            info = host_info(str(resolve_device(self.device_override)) if self.device_override else "cpu")
        return protocol.hello(rank, self.wish_profile, info, self.instance, offline, self.extensions)

    def described(self, msg: Message) -> bool:
        """Whether `msg` asks for the run's outside code; if so each name is resolved as the run will (a missing
        package is told too) and every HELLO from now on describes it."""
        if msg.type != T.ERROR or msg.meta.get("fatal") or (asked := describe_request(msg.meta)) is None:
            return False
        self.extensions.update(describe_here(asked))
        return True

    def new_socket(self) -> ClientSocket:
        sock = ClientSocket(self.connect, keys=self.keys)
        sock.run_clock = self.run_clock
        return sock

    def _serve(self) -> None:
        self.ctx = LiveContext(self.new_socket())
        self.ctx.sock.send(self.hello())
        wait = ConnectWait(self.connect, self.connect_timeout_s)  # says it waits, until joined or timed out
        if self.device_problem is not None:
            try:
                self._report_unusable_device(wait)
            finally:
                self.ctx.sock.close()
        tick = listening_since = time.monotonic()
        try:
            while True:
                sock, tick_before, tick = self.ctx.sock, tick, time.monotonic()
                if tick - tick_before > 2 * HEARTBEAT_INTERVAL_S:  # it did not listen (a long step, or stopped:
                    listening_since = tick  # Ctrl-Z, SIGSTOP): the coordinator's silence counts from now on
                if self.ctx.pending:  # what arrived while an instruction was running comes first
                    if not self._handle(sock, self.ctx.pending.pop(0)):
                        return
                    continue
                if self._offline_due():
                    if not self._go_offline():
                        return
                    continue
                if self.rank is not None:
                    self.ctx.heartbeat()  # if due: a second after our last send, whatever we heard meanwhile
                wait_s = self._wait_s()
                try:
                    msg = sock.recv(wait_s)
                except ProtocolError as exc:
                    log.error("bad message from the coordinator: %s", exc)
                    sock.send(protocol.error(f"bad message: {exc}"))
                    continue
                if msg is not None:
                    if not self._handle(sock, msg):
                        return
                    continue
                now = time.monotonic()
                if now - tick > wait_s + 2 * HEARTBEAT_INTERVAL_S:  # stopped while it waited: not listening
                    listening_since = now
                silent = now - max(sock.last_recv, listening_since)
                if self.rank is None:  # not joined yet: the coordinator may still be starting
                    if (gave_up := wait.check(sock, silent)) is not None:
                        sock.close(linger_ms=0)  # HELLO may still be queued, for nobody: exit now
                        raise ClientFailed(gave_up)
                    continue
                if silent > self.timeout_s:
                    reconnect(self, f"no word from the coordinator for {silent:.0f} s")
        finally:
            self.ctx.sock.close()
            if self.shards is not None:
                self.shards.close()

    def _report_unusable_device(self, wait: ConnectWait) -> None:
        """After HELLO, a fatal ERROR saying why this client cannot train; it waits (up to the connect
        timeout) for the coordinator's answer, so the ERROR is known to have reached it, then fails."""
        sock, started = self.ctx.sock, time.monotonic()
        sock.send(protocol.error(self.device_problem, fatal=True))
        failed = f"--device {self.device_override}: {self.device_problem}"
        while (gave_up := wait.check(sock, time.monotonic() - started)) is None:
            try:
                if sock.recv(HEARTBEAT_INTERVAL_S) is not None:
                    raise ClientFailed(f"{failed} (the coordinator at {self.connect} was told)")
            except ProtocolError:
                raise ClientFailed(f"{failed} (the coordinator at {self.connect} was told)") from None
        sock.close(linger_ms=0)  # nobody to deliver HELLO and ERROR to
        raise ClientFailed(f"{failed}; it could not tell the coordinator: {gave_up}")

    def _await_welcome(self, sock: ClientSocket, timeout_s: float) -> Message | None:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            msg = sock.recv(left)
            if msg is None:
                return None
            if msg.type == T.WELCOME:
                return msg
            if msg.type == T.ERROR and msg.meta.get("fatal"):
                raise ClientFailed(f"coordinator refused this client on reconnecting: {msg.meta.get('reason')}")
            if self.described(msg):  # a coordinator that runs outside code this client has not described yet
                sock.send(self.hello())
                continue
            if msg.type == T.ERROR:  # refused for now (between algorithms): ask again soon, not after the wait
                time.sleep(min(RECONNECT_FIRST_S, max(0.0, deadline - time.monotonic())))
                sock.send(self.hello())
        return None

    def _handle(self, sock: ClientSocket, msg: Message) -> bool:
        """Act on one message; False means the run is over."""
        if msg.type == T.HEARTBEAT:
            return True
        if msg.type == T.WELCOME:
            COORDINATOR.check(msg.meta, here="client")  # a coordinator of another EdgeSync: ContractMismatch
            self.rank = msg.meta["rank"]
            self._hello_delay = RECONNECT_FIRST_S
            self.timeout_s = float(msg.meta.get("timeout_s", CLIENT_IDLE_TIMEOUT_S))
            uplink = Link(**msg.meta.get("uplink") or {})
            sock.set_link(uplink, int(msg.meta.get("link_seed", 0)))
            log.info("joined %s as client %d of %d (uplink %s)", msg.meta.get("run"), self.rank,
                     msg.meta.get("clients"), uplink.describe())
        elif msg.type == T.SETUP:
            try:
                self._setup(msg)
            except Exception as exc:  # a client that cannot set up says why, then stays available
                log.exception("setup failed")
                sock.send(protocol.error(f"setup failed: {exc}"))
                return True
            sock.send(protocol.ready(self.session.label))
        elif msg.type == T.CALIBRATE:
            sock.send(self._calibrate(msg.meta))
        elif msg.type == T.TRAIN:
            self._train(sock, msg)
        elif msg.type == T.END:
            sock.send(protocol.stats(self._stats()))
            self.session = None
        elif msg.type == T.SHUTDOWN:
            reason = msg.meta.get("reason") or "the run is over"
            if msg.meta.get("aborted"):
                raise ClientFailed(f"the coordinator ended the run: {reason}")
            log.info("coordinator says: %s", reason)
            return False
        elif msg.type == T.ERROR:
            if msg.meta.get("fatal"):
                raise ClientFailed(f"coordinator refused this client: {msg.meta.get('reason')}")
            if self.described(msg):  # the run's outside code: say HELLO again at once, describing it
                sock.send(self.hello())
                return True
            if msg.meta.get("hello") and self.rank is not None:  # a restarted coordinator: it never knew this socket
                reconnect(self, "the coordinator does not know this connection")
                return True
            if self.rank is None:  # its HELLO was refused for now (its rank still held, between algorithms)
                self._hello_again(sock, msg.meta.get("reason"))
                return True
            log.error("coordinator: %s", msg.meta.get("reason"))
        return True

    def _hello_again(self, sock: ClientSocket, reason: str | None) -> None:
        """Ask to join again after a refusal that is not final, with exponential backoff: a restarted
        client is admitted as soon as the coordinator knows its earlier process is gone."""
        log.warning("coordinator: %s; asking again in %.1f s", reason, self._hello_delay)
        time.sleep(self._hello_delay)
        self._hello_delay = min(2 * self._hello_delay, RECONNECT_MAX_S)
        sock.send(self.hello())

    # -- availability ----------------------------------------------------------------------------------
    def _offline_due(self) -> bool:
        return self.session is not None and self.device_schedule is not None and self.device_schedule.due()

    def _offline_deadline(self) -> float:
        return self.device_schedule.offline_deadline() if self.device_schedule is not None else math.inf

    def _wait_s(self) -> float:
        """How long the main loop may wait: until our heartbeat is due, or the device goes offline."""
        due = HEARTBEAT_INTERVAL_S  # not joined yet: no heartbeats, only the wait for WELCOME
        if self.rank is not None:
            due -= time.monotonic() - self.ctx.sock.last_send
        return max(0.0, min(due, self._offline_deadline() - time.perf_counter()))

    def _go_offline(self) -> bool:
        """The device goes offline (its availability) until taken back; False if the run ended without it."""
        back, back_local = self.device_schedule.back_at()
        log.info("offline at %.3f s of the algorithm (availability)%s", self.run_clock.now(),
                 "; not coming back in it" if math.isinf(back) else f"; back at {back:.3f} s")
        self.ctx.sock.close(linger_ms=0)  # unsent updates are lost with the device's connection
        self.ctx.pending.clear()
        self.session = None
        self.device_schedule = None  # set up afresh when back
        if (welcomed := sit_out(self, back_local)) is None:
            return False
        self.ctx.sock, welcome = welcomed
        self._handle(self.ctx.sock, welcome)
        return True

    def _setup(self, msg: Message) -> None:
        self.run_clock.reset()  # the coordinator's clock restarts with each algorithm: heard again from now
        self.device_schedule = DeviceSchedule(msg.meta.get("availability"), int(msg.meta["seed"]), self.rank,
                                              self.run_clock)
        session = build_session(msg.meta, msg.tensors["indices"].numpy(), self.rank, self.device_override,
                                self.data_root, make=self._make_trainer)
        self.device = session.trainer.device
        self._model_key = (msg.meta["model"], session.trainer.batch_size, str(self.device))
        if self.device.type == "cuda" and self._model_key not in self._warm:
            warm_up(session.trainer)  # before READY: the start-up is not the algorithm's compute time
            self._warm.add(self._model_key)
        session.algorithm = ring_half(session.algorithm, msg.meta, self.connect, self.rank)  # all-reduce
        session.algorithm.ctx = self.ctx
        if self.shards is not None:
            self.shards.close()
        shards = msg.meta.get("shards")
        self.shards = ClientShards(shards, self.rank, self.ctx.sock, self.keys) if shards else None
        self.ctx.offline_at = self._offline_deadline
        session.trainer.hook = Beating(NoHook(), self.ctx.heartbeat, self._offline_deadline)  # heartbeats between steps
        self.session = session

    def _calibrate(self, meta: dict) -> Message:
        """Measure the undisturbed step time (the median of a few real steps, no throttle; once per model,
        batch size and device); with `base_s`, also pace the steps at factor × base_s (0: × the undisturbed
        step) and isolate this process as the coordinator planned (emulation/device_model.py)."""
        s = self.session
        if self._model_key not in self._calibrated:
            self._calibrated[self._model_key] = measure_step_s(s.trainer)
        reference = self._calibrated[self._model_key]
        if meta.get("base_s") is not None:
            base = float(meta["base_s"]) or reference
            if base != reference or needs_throttle(s.sampler):  # an undisturbed ×1 client needs no pacing
                s.throttle = Throttle(s.sampler, base, idle=self.ctx.heartbeat,  # heartbeats in long sleeps
                                      clock=self.run_clock.now, offline_at=self._offline_deadline)
                s.trainer.hook = Beating(s.throttle, self.ctx.heartbeat, self._offline_deadline)
            self._isolate(meta.get("core"), meta.get("cpu_share"), meta.get("isolation") or "auto")
        detail = self._isolation.detail if self._isolation is not None else None
        return protocol.calibrated(reference, str(self.device), detail)

    def _isolate(self, core: int | None, cpu_share: float | None, prefer: str) -> None:
        """Pin or cap this process as asked; a new request replaces the last (undone first)."""
        wish = (core, cpu_share, prefer)
        if self._isolation is not None and self._isolation_wish == wish:
            return
        if self._isolation is not None:
            isolation.release(self._isolation)
        if threading.current_thread() is not threading.main_thread():  # tests, or a client embedded in an app
            self._isolation = isolation.Isolation("none", "none: this client runs in a thread of a larger process")
        elif prefer != "none" and core is None and cpu_share is None:
            self._isolation = isolation.Isolation("none", "none: the coordinator's plan gives this client no core "
                                                  "or CPU quota (a GPU client, or too few cores to pin); steps are "
                                                  "paced by sleeping only")
        else:  # the plan already chose between a core and a quota
            self._isolation = isolation.isolate(cpu_share=cpu_share, core=core,
                                                prefer="none" if prefer == "none" else "auto")
        self._isolation_wish = wish
        log.info("isolation: %s", self._isolation.detail)

    def _train(self, sock: ClientSocket, msg: Message) -> None:
        s = self.session
        if s is None:
            sock.send(protocol.error("TRAIN before SETUP"))
            return
        s.clock.instruction_started(time.perf_counter())
        try:
            msg = self.shards.join(msg, self.ctx) if self.shards is not None else msg  # a sharded server's parts
            update = s.algorithm.on_instruction(Instruction(tensors=msg.tensors, meta=msg.meta))
        except InstructionAborted:
            return  # the algorithm ended mid-instruction; END is next in ctx.pending
        except DeviceOffline:
            return  # its work is lost; the main loop takes the device offline
        except RingFailed as exc:
            log.warning("%s: nothing sent, the coordinator starts the round again", exc)
            return
        meta, tensors = (self.shards.split(update.meta, update.tensors) if self.shards is not None
                         else (update.meta, update.tensors))
        sock.send(protocol.update(meta, tensors))
        s.clock.update_sent(time.perf_counter())
        for extra in s.algorithm.follow_ups():  # all-reduce: the lead's mean, after every report
            sock.send(protocol.update(extra.meta, extra.tensors))

    def _stats(self) -> dict:
        s = self.session
        if s is None:
            return {}
        throttle = s.throttle
        totals = client_totals(s.trainer.stats, s.clock, time.perf_counter(), str(self.device),
                               self._calibrated.get(self._model_key), throttle.factors if throttle else None,
                               timeline=throttle.timeline if throttle else None,
                               gpu=gpu_name(self.device), base_s=throttle.reference_s if throttle else None,
                               isolation=self._isolation.detail if self._isolation is not None else None)
        return {"label": s.label, **totals}
