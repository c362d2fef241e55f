"""The simulator's Ray backend (`sim.backend: ray`): clients' instructions run at once on Ray workers
(sim_worker.py), their results are applied in virtual-time order, and a run's metrics equal the serial
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

Client halves that query the server mid-instruction (ESync) run serially (sim_process.py): what they
compute depends on when their queries are answered. Where workers run on machines of different CPU types
the arithmetic may differ in the last bits (docs/simulator.md).
"""
from __future__ import annotations

import heapq
import logging
import os
from dataclasses import dataclass

import numpy as np

from edgesync.algorithms.base import AlgorithmConfig, Instruction, Update
from edgesync.constants import TIME_GRID_DIGITS
from edgesync.runtime.membership import RunAborted
from edgesync.runtime.sim_worker import (ClientSpec, ClientTotals, Finished, SimWorker, as_array, from_arrays,
                                          initial_floor)
from edgesync.scenario import Scenario

log = logging.getLogger("edgesync.sim")

SHARED_TENSORS = 8  # tensors kept in the object store for instructions that send them again


@dataclass
class InFlight:
    rank: int
    start: float
    bound: float  # on the events' time grid: it cannot end before
    seq: int      # its update's place among events at equal times
    ref: object   # the worker's answer (a Ray ObjectRef)


class RayClients:
    """Ray workers hosting a simulation's clients (each client on one worker, its state kept there)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, model: str, num_classes: int, in_channels: int,
                 clients: int, workers: int | None = None):
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
        log.info("Ray backend: %d workers (%d CPUs in the cluster at %s)", size, cpus,
                 ray.get_runtime_context().gcs_address)
        self.ray = ray
        data = ray.put(x), ray.put(y)  # once: every worker on a node reads the same copy
        actor = ray.remote(num_cpus=1)(SimWorker)
        self.workers = [actor.remote(*data, model, num_classes, in_channels) for _ in range(size)]
        self.in_flight: dict[int, InFlight] = {}
        self.order: list[tuple[float, int, int]] = []  # (bound, seq, rank) of what is in flight: a heap
        self._puts: dict[tuple[int, int], tuple] = {}  # (id, version) of a tensor sent → (tensor, its object)

    def _home(self, rank: int):
        return self.workers[rank % len(self.workers)]

    def begin(self, scenario: Scenario, config: AlgorithmConfig, base_step_s: float, splits: list) -> None:
        self.base_step_s = base_step_s
        profiles = [c.profile for c in scenario.clients]
        hosted: list[list[ClientSpec]] = [[] for _ in self.workers]
        for rank, profile in enumerate(profiles):
            hosted[rank % len(self.workers)].append(ClientSpec(rank, profile, splits[rank], scenario.seed))
        self.ray.get([w.begin.remote(config, base_step_s, specs) for w, specs in zip(self.workers, hosted)])
        self.floor = {rank: initial_floor(p, scenario.seed, rank) for rank, p in enumerate(profiles)}
        self.in_flight, self.order = {}, []

    def start(self, rank: int, instruction: Instruction, start: float, offline_at: float, seq: int) -> None:
        if rank in self.in_flight:
            raise RuntimeError(f"client {rank} got an instruction while still running the previous one")
        bound = round(min(start + self.floor[rank] * self.base_step_s, offline_at), TIME_GRID_DIGITS)
        keys = tuple(instruction.tensors)
        ref = self._home(rank).run.remote(rank, instruction.meta, start, offline_at, keys,
                                          *(self._put(instruction.tensors[k]) for k in keys))
        self.in_flight[rank] = InFlight(rank, start, bound, seq, ref)
        heapq.heappush(self.order, (bound, seq, rank))

    def _put(self, tensor):
        """The tensor in the object store, once for every instruction that sends it unchanged (a round's θ
        goes to all its clients); the worker fetches it (sim_worker.py)."""
        key = (id(tensor), tensor._version)
        if key not in self._puts:
            if len(self._puts) >= SHARED_TENSORS:
                self._puts.pop(next(iter(self._puts)))
            self._puts[key] = (tensor, self.ray.put(as_array(tensor)))  # held: its id stays its own while cached
        return self._puts[key][1]

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
        return self._collect(list(self.in_flight.values()))

    def _collect(self, flights: list[InFlight]) -> list[tuple[InFlight, Finished]]:
        if not flights:
            return []
        flights.sort(key=lambda f: f.rank)
        results = self.ray.get([f.ref for f in flights])
        for f, done in zip(flights, results):
            del self.in_flight[f.rank]
            if done.update is not None:
                done.update = Update(from_arrays(done.update.tensors), done.update.meta)
            self.floor[f.rank] = done.next_factor
            if round(f.start + done.elapsed, TIME_GRID_DIGITS) < f.bound:
                raise RuntimeError(f"client {f.rank}: an instruction took {done.elapsed:g} s of virtual time, less "
                                   f"than its first step: the Ray backend's ordering assumed at least one step "
                                   f"(run this algorithm with sim.backend: serial)")
        return list(zip(flights, results))

    def rejoin(self, rank: int) -> None:
        self._home(rank).rejoin.remote(rank)  # before any later instruction: a worker runs its tasks in order

    def totals(self) -> dict[int, ClientTotals]:
        merged: dict[int, ClientTotals] = {}
        for part in self.ray.get([w.totals.remote() for w in self.workers]):
            merged.update(part)
        return merged

    def close(self) -> None:
        """Stop the workers. A Ray instance this run started stays up for the next run of this process (a
        sweep's variants) and stops when the process ends, as Ray does."""
        for w in self.workers:
            self.ray.kill(w)
        self.workers = []
        self._puts.clear()
