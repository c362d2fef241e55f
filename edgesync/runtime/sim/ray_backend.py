"""The simulator's Ray backend (`sim.backend: ray`): clients' instructions run at once on Ray workers
(worker.py), their results are applied in virtual-time order, and a run's metrics equal the serial
backend's byte for byte.

The engine needs an instruction's result only when its update could be the next event. An instruction
that starts at virtual time s cannot end before s + f·b, its first step (b the base step, f the least
factor the client's next step can have: a constant profile's factor, a trace's smallest, a gamma
profile's next draw read ahead), nor after its device goes offline. An update keeps the sequence number its
instruction's start would have given it serially, so events at equal times keep the serial order, and the
engine runs every event that comes before the earliest (bound, sequence number) in flight without
waiting; it waits for one result at a time, the one that could come first, and only when the next event
may come after it. Sixteen ASGD clients are then sixteen gradients in flight, and each update applied
sends its client's next instruction while the workers compute the rest; an SSGD round is all of its
clients at once.

Instructions and results travel over a ZeroMQ channel (channel.py), at most WINDOW outstanding per
worker; Ray starts and places the workers and gives them the training data. Client halves that query the
server mid-instruction (ESync) run serially (process.py): what they compute depends on when their
queries are answered. Where workers run on machines of different CPU types
the arithmetic may differ in the last bits (docs/simulator.md).
"""
from __future__ import annotations

import heapq
import logging
import math
import os
from collections import deque
from dataclasses import dataclass

import numpy as np

from edgesync.algorithms.machinery.base import AlgorithmConfig, Instruction, Update
from edgesync.constants import TIME_GRID_DIGITS
from edgesync.runtime.bookkeeping.membership import RunAborted
from edgesync.runtime.sim.channel import SIM, DriverChannel, owned
from edgesync.runtime.sim.spill import Spill
from edgesync.runtime.sim.worker import ClientSpec, ClientTotals, Finished, SimWorker, initial_floor
from edgesync.config import Scenario
from edgesync.transport.contracts.ray_worker import RAY_WORKER, RayKind
from edgesync.transport.protocol import Message

log = logging.getLogger("edgesync.sim")

WINDOW = 64  # instructions outstanding per worker; later ones wait here (memory stays bounded at 10,000 clients)


@dataclass
class InFlight:
    rank: int
    start: float
    bound: float  # on the events' time grid: it cannot end before
    seq: int      # its update's place among events at equal times


class RayClients:
    """Ray workers hosting a simulation's clients (each client on one worker, its state kept there)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, model: str, num_classes: int, in_channels: int,
                 clients: int, workers: int | None = None, spill: Spill | None = None):
        try:
            import ray
        except ImportError:
            raise RunAborted("sim.backend ray needs Ray: pip install 'ray==2.60.0' (requirements.txt pins it)") from None
        if not ray.is_initialized():  # address None: RAY_ADDRESS, else a cluster started on this machine, else a new one
            where = os.environ.get("RAY_ADDRESS") or "this machine"
            try:
                ray.init(include_dashboard=False, log_to_driver=False)
            except Exception as exc:  # noqa: BLE001 - ConnectionError, AuthenticationError, …: say where
                raise RunAborted(f"sim.backend ray: cannot start or join Ray at {where}: {exc}") from None
        cpus = int(ray.cluster_resources().get("CPU", 1))
        size = max(1, min(workers or cpus, cpus, clients))
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        self.ray = ray
        data = ray.put(x), ray.put(y)  # once: every worker on a node reads the same copy
        actor = ray.remote(num_cpus=1)(SimWorker)
        self.workers = [actor.remote(*data, model, num_classes, in_channels) for _ in range(size)]
        self.channel = DriverChannel(size, local=len(nodes) <= 1, host=ray.util.get_node_ip_address())
        log.info("Ray backend: %d workers (%d CPUs on %d node%s, cluster at %s; channel %s%s)", size, cpus,
                 len(nodes), "s" if len(nodes) != 1 else "", ray.get_runtime_context().gcs_address,
                 self.channel.address, ", CURVE" if self.channel.server_key else "")
        self.spill = spill or Spill(None)
        self.serving: list = []  # the workers' serve calls, while an algorithm runs

    def _home(self, rank: int) -> int:
        return rank % len(self.workers)

    def begin(self, scenario: Scenario, config: AlgorithmConfig, base_step_s: float, splits: list) -> None:
        self.base_step_s = base_step_s
        profiles = [c.profile for c in scenario.clients]
        hosted: list[list[ClientSpec]] = [[] for _ in self.workers]
        for rank, profile in enumerate(profiles):
            hosted[self._home(rank)].append(ClientSpec(rank, profile, splits[rank], scenario.seed))
        self.ray.get([w.begin.remote(config, base_step_s, specs) for w, specs in zip(self.workers, hosted)])
        self.floor = {rank: initial_floor(p, scenario.seed, rank) for rank, p in enumerate(profiles)}
        self.in_flight: dict[int, InFlight] = {}
        self.order: list[tuple[float, int, int]] = []  # (bound, seq, rank) of what is in flight: a heap
        self.arrived: dict[int, Finished] = {}  # results received before they were needed
        self.waiting = [deque() for _ in self.workers]  # messages beyond a worker's window
        self.outstanding = [0] * len(self.workers)
        self.serving = [w.serve.remote(i, self.channel.address, self.channel.server_key, RAY_WORKER.tag)
                        for i, w in enumerate(self.workers)]
        for _ in self.workers:  # each says READY once it listens: messages to it can go
            self._expect(RayKind.READY)

    def start(self, rank: int, instruction: Instruction, start: float, offline_at: float, seq: int) -> None:
        if rank in self.in_flight:
            raise RuntimeError(f"client {rank} got an instruction while still running the previous one")
        bound = round(min(start + self.floor[rank] * self.base_step_s, offline_at), TIME_GRID_DIGITS)
        online = None if math.isinf(offline_at) else offline_at  # JSON has no infinity: null, never offline
        meta = {**instruction.meta, SIM: {"rank": rank, "start": start, "offline_at": online}}
        self._send(self._home(rank), Message(RayKind.TRAIN, meta, instruction.tensors))
        self.in_flight[rank] = InFlight(rank, start, bound, seq)
        heapq.heappush(self.order, (bound, seq, rank))

    def _send(self, worker: int, message: Message) -> None:
        """Now, or once the worker has fewer than WINDOW instructions outstanding (in order either way)."""
        if self.outstanding[worker] < WINDOW and not self.waiting[worker]:
            self.outstanding[worker] += message.type == RayKind.TRAIN
            self.channel.send(worker, message)
        else:
            self.waiting[worker].append((message, [t._version for t in message.tensors.values()]))

    def _flush(self, worker: int) -> None:
        """What waits for `worker`, as far as its window allows. A waiting instruction's tensors must be as
        they were when it started, as serially (a server half replaces its model, never changes what it sent)."""
        while self.waiting[worker] and self.outstanding[worker] < WINDOW:
            message, versions = self.waiting[worker].popleft()
            if versions != [t._version for t in message.tensors.values()]:
                raise RuntimeError(f"{message.meta[SIM]}: a tensor of this instruction changed in place after it "
                                   f"was sent (the server half must send new tensors; run with sim.backend: serial)")
            self.outstanding[worker] += message.type == RayKind.TRAIN
            self.channel.send(worker, message)

    def _receive(self) -> tuple[int, Message]:
        worker, message = self.channel.receive(self._alive)
        if message.type == RayKind.ERROR:
            raise RuntimeError(f"Ray worker {worker} failed:\n{message.meta.get('reason')}")
        if message.type == RayKind.UPDATE:
            self.outstanding[worker] -= 1
            self._flush(worker)
        return worker, message

    def _expect(self, kind: RayKind) -> None:
        worker, message = self._receive()
        if message.type != kind:
            raise RuntimeError(f"Ray worker {worker} sent {message.type} where {kind} was due")

    def _alive(self) -> None:
        """Asked while no message comes: a worker whose serve call ended (it died, or failed before it
        could say why) ends the run."""
        done, _ = self.ray.wait(self.serving, timeout=0)
        if done:
            try:
                self.ray.get(done)
            except Exception as exc:  # noqa: BLE001 - RayActorError, a worker's exception: say which
                raise RunAborted(f"sim.backend ray: a worker stopped: {exc}") from None
            raise RunAborted("sim.backend ray: a worker stopped serving before the algorithm ended")

    def due(self, t: float, seq: int) -> list[tuple[InFlight, Finished]]:
        """The result of the instruction in flight that could end first (waiting for it), if its update
        could come before the event at (t, seq); else nothing. Asked before every event."""
        while self.order:
            bound, first, rank = self.order[0]
            flight = self.in_flight.get(rank)
            if flight is None or flight.seq != first:
                heapq.heappop(self.order)  # collected already (take, everything)
                continue
            return self._collect([flight]) if (bound, first) < (t, seq) else []
        return []

    def take(self, rank: int) -> list[tuple[InFlight, Finished]]:
        """`rank`'s instruction in flight, if any, finished."""
        return self._collect([self.in_flight[rank]] if rank in self.in_flight else [])

    def everything(self) -> list[tuple[InFlight, Finished]]:
        return self._collect(sorted(self.in_flight.values(), key=lambda f: f.rank))

    def _collect(self, flights: list[InFlight]) -> list[tuple[InFlight, Finished]]:
        results = []
        for f in flights:
            while f.rank not in self.arrived:
                _, message = self._receive()
                if message.type != RayKind.UPDATE:
                    raise RuntimeError(f"a Ray worker sent {message.type} where an UPDATE was due")
                sim = message.meta.pop(SIM)
                update = None if sim["offline"] else self.spill.keep(Update(owned(message.tensors), message.meta))
                self.arrived[sim["rank"]] = Finished(update, sim["elapsed"], sim["next_factor"])
            done = self.arrived.pop(f.rank)
            if done.update is not None:
                done.update = self.spill.take(done.update)
            del self.in_flight[f.rank]
            self.floor[f.rank] = done.next_factor
            if round(f.start + done.elapsed, TIME_GRID_DIGITS) < f.bound:
                raise RuntimeError(f"client {f.rank}: an instruction took {done.elapsed:g} s of virtual time, less "
                                   f"than its first step: the Ray backend's ordering assumed at least one step "
                                   f"(run this algorithm with sim.backend: serial)")
            results.append((f, done))
        return results

    def rejoin(self, rank: int) -> None:
        """Its device came back: a fresh client half, before any later instruction (one channel, in order)."""
        self._send(self._home(rank), Message(RayKind.DEVICE_BACK, {SIM: {"rank": rank}}))

    def totals(self) -> dict[int, ClientTotals]:
        """The algorithm is over: the workers stop serving, then report their clients' totals."""
        self._finish()
        merged: dict[int, ClientTotals] = {}
        for part in self.ray.get([w.totals.remote() for w in self.workers]):
            merged.update(part)
        return merged

    def _finish(self) -> None:
        if not self.serving:
            return
        for worker in range(len(self.workers)):
            self._send(worker, Message(RayKind.SERVE_END))
        while any(self.waiting):  # what is still queued here goes (a device's DEVICE_BACK, SERVE_END)
            self._receive()
        self.ray.get(self.serving)
        self.serving = []

    def close(self) -> None:
        """Stop the workers. A Ray instance this run started stays up for the next run of this process (a
        sweep's variants) and stops when the process ends, as Ray does."""
        for w in self.workers:
            self.ray.kill(w)
        self.workers, self.serving = [], []
        self.channel.close()
