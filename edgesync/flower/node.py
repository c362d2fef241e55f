"""The ClientApp side: one SuperNode's client, rebuilt from `context.state` for every message.

A SuperNode starts a new ClientApp process per message, so nothing survives in memory. What the
ZeroMQ client (`edgesync.runtime.live.client`) keeps in its `Session` is kept in `context.state` instead,
in the encoding of `records.py`:

    setup    the SETUP metadata (algorithm config, dataset, model, profile, seed, rank) and indices
    half     the client half's `state_dict()` (momentum, residuals, ESync's capability…)
    node     calibrated step times and base steps per (model, batch size, device); sampling position;
             gamma-profile draws so far; running totals (steps, compute, wait, …) for STATS

Every message rebuilds the trainer and client half with `build_session`, the ZeroMQ client's own
function, restores that state, runs, and saves it back. Messages and replies (Flower type → EdgeSync
type; `grid_socket.py` is the other end):

    query.hello      → HELLO       partition-id, profile and device from --node-config, host info; the
                                  ServerApp's contract checked (an ERROR naming both versions if another);
                                  a query.hello that names the run's outside code (`describe`, {name: kind}:
                                  the coordinator asked, grid_socket.py) gets it described (`extensions`)
    query.setup      → READY       SETUP: build the trainer once (fails here, not mid-run); with the
                                  CALIBRATED it would answer now if it measured this model and batch
                                  size before ("calibrated": the Grid socket answers CALIBRATE with it)
    query.calibrate  → CALIBRATED  the undisturbed step time (kept for the next algorithms); with a
                                  base step, the ×1 step this node's steps are paced at (where the Grid
                                  socket answered that CALIBRATE, its base step comes with the next message)
    train            → UPDATE      TRAIN: the client half's `on_instruction`, throttled by the profile
    evaluate         → EVALUATED   the message's model on this node's training split

A failure is a reply too: ERROR with the reason (failures travel as data, never a crash).
A `train` or `evaluate` without the "edgesync" header comes from a stock Flower strategy (Flower's
standard Message API): `standard_node.py` answers it.
Node config keys: `partition-id` (the rank; default: the next free one), `profile` (overrides the
scenario's, e.g. "x10"), `device` (cpu, cuda:N, auto) and `data-root` (this machine's data folder).

Time-varying scenarios: a message whose records carry the algorithm's wall-clock start (records.py) gives
this process the algorithm's clock. A device trace's factor is then the one in force when each step starts,
and a device with an availability stops at its offline time, as an `edgesync client` does: the work of the
message is lost and the reply is a HEARTBEAT (no update), which the coordinator, following the same
schedule, ignores. At its online time the coordinator takes the node back (grid_socket.py) and sets it up
afresh.
"""
from __future__ import annotations

import logging
import math
import os
import time
from typing import Any, Callable

import numpy as np
import psutil
import torch
from flwr.app import Context
from flwr.app import Message as FlowerMessage

from edgesync.algorithms.machinery.base import Instruction
from edgesync.config.outside_code import describe_here, describe_request
from edgesync.emulation.profiles import parse_profile
from edgesync.emulation.throttle import Throttle, needs_throttle
from edgesync.flower import records
from edgesync.runtime.bookkeeping.accounting import ClientClock, client_totals
from edgesync.runtime.live.client_session import Beating, Session, build_session
from edgesync.runtime.live.device_schedule import DeviceSchedule
from edgesync.runtime.bookkeeping.evaluator import evaluate
from edgesync.runtime.live.run_clock import RunClock
from edgesync.runtime.bookkeeping.step_time import measure_step_s, warm_up
from edgesync.trainer import DeviceOffline, NoHook, StepSample, StepTimeline, TrainerStats
from edgesync.transport import protocol
from edgesync.transport.contracts.coordinator import COORDINATOR
from edgesync.transport.protocol import Message, host_info

log = logging.getLogger("edgesync.flower.node")
# A ClientApp process lives for one message: there is no process to pin or cap for the run.
NOT_ISOLATED = "none: Flower runs each message in its own ClientApp process"

SETUP, HALF, NODE = "edgesync.setup", "edgesync.half", "edgesync.node"


def _tensors_and_rest(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    return {k: v for k, v in state.items() if k not in tensors}, tensors


class FlowerNode:
    def __init__(self, context: Context):
        torch.set_num_threads(1)  # one torch thread per client process (constants.CLIENT_THREAD_ENV)
        self.context = context
        self.state = context.state
        cfg = context.node_config
        self.partition = cfg.get("partition-id")
        self.profile = cfg.get("profile")
        self.device = cfg.get("device")
        self.data_root = cfg.get("data-root")
        saved = records.get(self.state, NODE)
        self.node: dict[str, Any] = saved[0] if saved else {"reference_s": {}, "base_s": {}}
        self.order: np.ndarray | None = saved[1]["order"].numpy() if saved and "order" in saved[1] else None
        self.run_clock = RunClock()  # the algorithm's clock, from the message's wall-clock start (if it has one)
        self.schedule: DeviceSchedule | None = None  # this device's availability, set with the session
        self.pace: float | None = None  # a base step this message carries (records.PACE), kept by _session

    # -- dispatch ----------------------------------------------------------------------------------
    def handle(self, message: FlowerMessage) -> FlowerMessage:
        started = time.time()
        kind = message.metadata.message_type
        if kind in ("train", "evaluate") and records.HEADER not in message.content:
            from edgesync.flower.standard_node import StandardNode  # a stock Flower strategy's message
            return StandardNode(self.context).handle(message)  # a failure raises: Flower replies with an error
        handler = self.HANDLERS.get(kind)
        stats = None
        if (epoch := records.epoch_of(message.content)) is not None:
            self.run_clock.observe(time.time() - epoch)
        self.pace = records.pace_of(message.content)
        try:
            if handler is None:
                raise ValueError(f"no handler for Flower message type {kind!r}")
            request, _ = records.from_records(message.content)
            reply, stats = handler(self, request, started)
        except Exception as exc:  # failures travel as data: the coordinator logs or aborts on ERROR
            log.exception("%s failed", kind)
            reply = protocol.error(f"{kind} failed on node {self.context.node_id}: {type(exc).__name__}: {exc}")
        return FlowerMessage(records.to_records(reply, stats), reply_to=message)

    def hello(self, request: Message, started: float):
        COORDINATOR.check(request.meta, here="client")  # a ServerApp of another EdgeSync: the ERROR names both
        if self.profile is not None:
            parse_profile(self.profile)  # a typo fails here, as `edgesync client --profile` does
        info = host_info(self.device or "cpu")
        info["flower_node_id"] = self.context.node_id
        rank = None if self.partition is None else int(self.partition)
        asked = describe_request(request.meta)
        extensions = describe_here(asked) if asked is not None else None  # as an `edgesync client` does
        return protocol.hello(rank, self.profile, info, extensions=extensions), None

    def setup(self, request: Message, started: float):
        records.put(self.state, SETUP, request.meta, {"indices": request.tensors["indices"]})
        records.put(self.state, HALF, {})
        self.node.update(clock=ClientClock().state_dict(), draws=0, sampler=None, timeline=None,
                         totals={"steps": 0, "samples": 0, "compute_s": 0.0, "overhead_s": 0.0,
                                 "aborted_steps": 0, "step_times": StepSample().state_dict(),
                                 "factors": StepSample().state_dict()})
        self.order = None
        session = self._session(throttled=False)  # builds the trainer: a missing dataset or a bad config fails now
        self._save_node()
        reply = protocol.ready(request.meta["label"])
        reference = self.node["reference_s"].get(self._model_key(session))
        if reference is not None:  # measured in an earlier algorithm: what CALIBRATE would get (grid_socket.py)
            reply.meta["calibrated"] = protocol.calibrated(reference, str(session.trainer.device), NOT_ISOLATED).meta
        return reply, None

    def calibrate(self, request: Message, started: float):
        session = self._session(throttled=False)
        key = self._model_key(session)
        if key not in self.node["reference_s"]:  # measured once per run, as the ZeroMQ client caches it
            self.node["reference_s"][key] = measure_step_s(session.trainer)
            self._save_session(session)  # its batches were drawn: sampling goes on after them
        if request.meta.get("base_s") is not None:  # the ×1 step to pace at (0: the undisturbed one)
            self.node.setdefault("base_s", {})[key] = float(request.meta["base_s"])
        self._save_node()
        return protocol.calibrated(self.node["reference_s"][key], str(session.trainer.device), NOT_ISOLATED), None

    def train(self, request: Message, started: float):
        session = self._session()
        clock = ClientClock(**self.node["clock"])
        clock.instruction_started(started)  # the wait includes this process's start-up
        self.node["totals"]["overhead_s"] += time.time() - psutil.Process(os.getpid()).create_time()
        try:
            if self.schedule is not None and self.schedule.offline_deadline() == -math.inf:
                raise DeviceOffline(0.0)  # the instruction came after the device went offline
            warm_up(session.trainer, steps=1)  # a fresh process's first step is slower (benchmarks/cold_step.py)
            update = session.algorithm.on_instruction(Instruction(tensors=request.tensors, meta=request.meta))
        except DeviceOffline:  # the work is lost with the device; the coordinator ignores what it says now
            log.info("offline at %.3f s of the algorithm (availability)", self.run_clock.now())
            self._save_session(session)
            self._save_node()
            return protocol.heartbeat(), None
        self._save_session(session)
        clock.update_sent(time.time())
        self.node["clock"] = clock.state_dict()
        self._save_node()
        return protocol.update(update.meta, update.tensors), self._stats(session, clock)

    def evaluate(self, request: Message, started: float):
        session = self._session(throttled=False)
        trainer = session.trainer
        trainer.set_params(request.tensors["params"])
        if "buffers" in request.tensors:
            trainer.set_buffers(request.tensors["buffers"])
        acc, loss = evaluate(trainer.model, trainer.x, trainer.y, batch_size=1000)
        reply = protocol.evaluated(session.label, round(acc, 6), round(loss, 6), trainer.num_samples)
        return reply, {"samples": trainer.num_samples}

    HANDLERS: dict[str, Callable] = {"query.hello": hello, "query.setup": setup, "query.calibrate": calibrate,
                                     "train": train, "evaluate": evaluate}

    # -- state ---------------------------------------------------------------------------------------
    def _session(self, throttled: bool = True) -> Session:
        saved = records.get(self.state, SETUP)
        if saved is None:
            raise RuntimeError("no SETUP on this node yet")
        meta, tensors = saved
        session = build_session(meta, tensors["indices"].numpy(), int(meta["rank"]), self.device, self.data_root)
        half_meta, half_tensors = records.get(self.state, HALF) or ({}, {})
        if half_meta or half_tensors:
            session.algorithm.load_state_dict({**half_meta, **half_tensors})
        if self.node.get("sampler") is not None and self.order is not None:
            session.trainer.load_sampler_state({**self.node["sampler"], "order": self.order})
        key = self._model_key(session)
        if self.pace is not None:  # a CALIBRATE the Grid socket answered: its base step, kept at once
            self._keep_pace(key, self.pace)
            self.pace = None
        reference = self.node["reference_s"].get(key)
        base = self.node.get("base_s", {}).get(key) or reference
        self.schedule = DeviceSchedule(meta.get("availability"), int(meta["seed"]), int(meta["rank"]), self.run_clock)
        offline_at = self.schedule.offline_deadline
        if throttled and (needs_throttle(session.sampler) or base != reference):
            if reference is None:  # not calibrated by the coordinator: measure now (with company)
                reference = base = self.node["reference_s"][key] = measure_step_s(session.trainer)
            session.sampler.skip(int(self.node.get("draws", 0)))  # go on with this client's factor sequence
            session.throttle = Throttle(session.sampler, base, clock=self.run_clock.now, offline_at=offline_at)
            if session.throttle.timeline is not None and self.node.get("timeline"):  # a traced device's steps
                session.throttle.timeline = StepTimeline(**self.node["timeline"])
            session.trainer.hook = Beating(session.throttle, lambda: None, offline_at)
        elif throttled and not self.schedule.schedule.always:
            session.trainer.hook = Beating(NoHook(), lambda: None, offline_at)  # a ×1 device still goes offline
        return session

    def _save_session(self, session: Session) -> None:
        rest, tensors = _tensors_and_rest(session.algorithm.state_dict())
        records.put(self.state, HALF, rest, tensors)
        sampler = session.trainer.sampler_state()
        self.order = sampler.pop("order")
        self.node["sampler"] = sampler
        st, totals = session.trainer.stats, self.node["totals"]
        totals["steps"] += st.steps
        totals["samples"] += st.samples
        totals["compute_s"] += st.compute_s
        totals["aborted_steps"] += st.aborted_steps
        _merge(totals, "step_times", st.step_times)
        if session.throttle is not None:
            _merge(totals, "factors", session.throttle.factors)
            self.node["draws"] = int(self.node.get("draws", 0)) + st.steps + st.aborted_steps
            if (timeline := session.throttle.timeline) is not None:
                self.node["timeline"] = {"points": timeline.points, "stride": timeline.stride, "seen": timeline.seen}

    def _keep_pace(self, key: str, base_s: float) -> None:
        """What `calibrate` keeps of a base step, in memory and in the saved state (whatever this message does)."""
        self.node.setdefault("base_s", {})[key] = base_s
        saved = records.get(self.state, NODE)
        if saved is not None:
            saved[0].setdefault("base_s", {})[key] = base_s
            records.put(self.state, NODE, saved[0], saved[1])
        else:
            self._save_node()

    def _save_node(self) -> None:
        tensors = {} if self.order is None else {"order": torch.from_numpy(np.asarray(self.order, dtype=np.int64))}
        records.put(self.state, NODE, self.node, tensors)

    def _model_key(self, session: Session) -> str:
        meta = records.get(self.state, SETUP)[0]
        return f"{meta['model']}|{session.trainer.batch_size}|{session.trainer.device}"

    def _stats(self, session: Session, clock: ClientClock) -> dict[str, Any]:
        """What the ZeroMQ client reports in STATS, as running totals over this algorithm's messages (the
        Grid socket answers END with the last ones: a node is not asked again after its last update)."""
        t = self.node["totals"]
        reference = self.node["reference_s"].get(self._model_key(session))
        stats = TrainerStats(steps=t["steps"], samples=t["samples"], compute_s=t["compute_s"],
                             step_times=StepSample(**t["step_times"]))
        throttle = session.throttle
        out = client_totals(stats, clock, time.time(), str(session.trainer.device), reference,
                            StepSample(**t["factors"]) if throttle is not None else None,
                            gpu=protocol.gpu_name(session.trainer.device),
                            base_s=throttle.reference_s if throttle is not None else None,
                            isolation=NOT_ISOLATED,
                            timeline=StepTimeline(**self.node["timeline"]) if self.node.get("timeline") else None)
        return {"label": session.label, **out, "overhead_s": round(t["overhead_s"], 4)}


def _merge(totals: dict[str, Any], key: str, sample: StepSample) -> None:
    """Add one message's sampled step times (or factors) to the algorithm's running sample."""
    merged = StepSample(**totals[key])
    for value in sample.values:
        merged.add(value)
    totals[key] = merged.state_dict()
