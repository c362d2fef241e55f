"""The coordinator's cost model for the simulator: its work per event, measured once per machine and
charged in virtual time (`sim.server_time: model`, the default).

The live coordinator is one thread. For every UPDATE it decodes the frames (`Message.from_frames`),
checks the tensors (update_check.py), hands the update to the server half (`on_update`) and encodes
each instruction it sends back (`to_frames`), one after the other; for every QUERY it decodes it, asks
`on_query` and encodes the REPLY. The model charges that work from five costs per algorithm entry
(`ServerCostSpec` in config/sim.py, seconds):

    an UPDATE:  decode_update + (apply if the global model changed, else collect); then each message
                it sends leaves encode_send after the one before (the i-th after i encodings)
    a QUERY:    query (its reply, if any, leaves then)

Why these classes: `on_update` costs one of two things — a barrier's collect (one in-place add) or an
apply (a model-sized step, a round's aggregation, building the instructions) — and which one an event
was is known the moment `on_update` returns (`server.updates` advanced or not), so a charge is an O(1)
lookup. Encoding is charged per message sent, so a broadcast to 100 clients costs 100 encodings
although the costs are measured with a few clients (server_calibration.py).

The costs are medians of the real work (`CoordinatorWork`, the same code `server_time: measured`
times at every event) over a short calibration run. They are measured once per machine and
algorithm configuration and cached in `$EDGESYNC_CACHE/server_costs.json` like the step time
(step_time.py); the run folder's scenario.yaml records the costs used under `sim.measured_server_s`,
so a replay charges the same costs on any machine, and a run is a pure function of the scenario and
the costs. Not modelled: the sockets' own work (ZeroMQ's copies and system calls), liveness and
checkpoints, evaluation, and any contention for the coordinator's CPU.
"""
from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import ValidationError

from edgesync.algorithms.machinery.base import AlgorithmConfig, ModelState, Send, ServerAlgorithm, Update
from edgesync.runtime.bookkeeping.step_time import cache_file, cached, this_machine
from edgesync.runtime.bookkeeping.update_check import UpdateCheck, UpdateRefused
from edgesync.config.sim import ServerCostSpec
from edgesync.transport import protocol
from edgesync.transport.protocol import Message

CACHE_NAME = "server_costs.json"
COST_DIGITS = 9  # seconds, rounded to the simulator's 1 ns time grid
# Changes to what is timed, or how, make earlier cached costs stale: they are keyed by this.
COST_MODEL_VERSION = 1
CLASSES = tuple(ServerCostSpec.model_fields)  # decode_update, collect, apply, encode_send, query
ON_UPDATE_CLASSES = ("collect", "apply")


@dataclass(frozen=True)
class Charges:
    """The virtual seconds one algorithm entry's events cost, precomputed: one lookup per event."""

    update_collect: float = 0.0  # decode_update + collect
    update_apply: float = 0.0    # decode_update + apply
    encode_send: float = 0.0
    query: float = 0.0

    @classmethod
    def of(cls, costs: ServerCostSpec) -> "Charges":
        return cls(costs.decode_update + costs.collect, costs.decode_update + costs.apply, costs.encode_send,
                   costs.query)


ZERO = Charges()  # `server_time: zero`: the idealised coordinator


@dataclass
class TimedUpdate:
    """One UPDATE handled for real: what the server half sent, and how long each part took."""

    sends: list[Send]
    applied: bool        # whether the global model changed (server.updates advanced)
    work_s: float        # decoding, checking and on_update
    encode_s: list[float]  # encoding each of `sends`, in order


class CostSamples:
    """Wall times of each class of coordinator work, as a calibration collects them."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {kind: [] for kind in CLASSES}
        self.sizes: dict[str, list[int]] = {kind: [] for kind in CLASSES}  # bytes of the message each handled

    def add(self, kind: str, seconds: float, nbytes: int = 0) -> None:
        self.times[kind].append(seconds)
        self.sizes[kind].append(nbytes)

    def count(self, kind: str) -> int:
        return len(self.times[kind])

    def costs(self) -> ServerCostSpec:
        """The median of each class. A class never seen (no query from SSGD; no collect from ASGD, whose
        every update is applied) gets the median of all the server half's calls that were seen, so
        whatever a run meets is charged something measured, not zero."""
        calls = [t for kind in (*ON_UPDATE_CLASSES, "query") for t in self.times[kind]]
        if not calls or not self.times["decode_update"]:
            raise ValueError("the calibration saw no update reach the coordinator: nothing to measure")
        fallback = statistics.median(calls)
        return ServerCostSpec(**{kind: round(statistics.median(times) if times else fallback, COST_DIGITS)
                                 for kind, times in self.times.items()})


class CoordinatorWork:
    """The live coordinator's work on each event, done for real and timed: the frames an UPDATE or a QUERY
    arrives as are built (the client's side, not timed), decoded and checked, the server half is called,
    and what it sends is encoded. The server half sees the decoded tensors and metadata, as it does live.
    `samples`, if given, collects every part's time (a calibration)."""

    def __init__(self, server: ServerAlgorithm, initial: ModelState, samples: CostSamples | None = None):
        self.server = server
        self.check = UpdateCheck.for_server(server, initial)
        self.samples = samples

    def update(self, rank: int, update: Update) -> TimedUpdate:
        frames = protocol.update(update.meta, update.tensors).to_frames()
        before = self.server.updates
        t0 = time.perf_counter()
        msg = Message.from_frames(frames, protocol.CLIENT_TYPES)
        try:
            self.check.check(msg.tensors, raw=msg.raw)
        except UpdateRefused:
            pass  # the simulator applies every update (a diverged model shows at its next evaluation): only the time counts
        t1 = time.perf_counter()
        sends = self.server.on_update(rank, Update(tensors=msg.tensors, meta=msg.meta))
        t2 = time.perf_counter()
        applied = self.server.updates > before
        if self.samples is not None:
            size = frames_bytes(frames)
            self.samples.add("decode_update", t1 - t0, size)
            self.samples.add("apply" if applied else "collect", t2 - t1, size)
        return TimedUpdate(sends, applied, t2 - t0, self.encode(sends))

    def encode(self, sends: list[Send]) -> list[float]:
        """Encode each instruction as the coordinator sends it; the seconds each took."""
        times = []
        for send in sends:
            t0 = time.perf_counter()
            frames = protocol.train(send.instruction.meta, send.instruction.tensors).to_frames()
            times.append(time.perf_counter() - t0)
            if self.samples is not None:  # a calibration: its sizes too (a measured run times alone)
                self.samples.add("encode_send", times[-1], frames_bytes(frames))
        return times

    def query(self, rank: int, meta: dict[str, Any]) -> tuple[dict[str, Any] | None, float]:
        frames = protocol.query(meta).to_frames()
        t0 = time.perf_counter()
        msg = Message.from_frames(frames, protocol.CLIENT_TYPES)
        reply = self.server.on_query(rank, msg.meta)
        if reply is not None:
            protocol.reply(reply).to_frames()
        seconds = time.perf_counter() - t0
        if self.samples is not None:
            self.samples.add("query", seconds)
        return reply, seconds


def frames_bytes(frames: list) -> int:
    """The bytes of a message's frames (bytes, memoryviews or zmq frames)."""
    return sum(memoryview(f).nbytes for f in frames)


def cost_key(config: AlgorithmConfig, model: str, initial: ModelState, clients: int) -> str:
    """What the costs depend on: the algorithm and every setting of it but its label and learning rate (a
    value the same work multiplies by: a sweep or tuning grid over it needs no new calibration), the model
    and its size, the calibration's client count, this cost model's version, and the machine."""
    settings = json.dumps(config.model_dump(mode="json", exclude={"label", "lr"}), sort_keys=True)
    return (f"v{COST_MODEL_VERSION}|{config.name}|{model}|params={initial.params.numel()}"
            f"|buffers={initial.buffers.numel()}|clients={clients}|{settings}|{this_machine()}")


def cached_costs(key: str, calibrate: Callable[[], ServerCostSpec]) -> ServerCostSpec:
    """The costs cached under `key` on this machine; else `calibrate()`'s, cached for next time."""
    entry = cached(CACHE_NAME, key, lambda: calibrate().model_dump())
    try:
        return ServerCostSpec.model_validate(entry)
    except ValidationError as exc:
        raise ValueError(f"{cache_file(CACHE_NAME)}: entry {key!r} is not the coordinator's five costs in seconds "
                         f"({exc.error_count()} problems, first: {exc.errors()[0]['msg']}); delete it to measure "
                         "again") from None
